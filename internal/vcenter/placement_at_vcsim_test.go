package vcenter_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// TestPlacementLookupsAt: FolderAt, ResourcePoolAt and the datastore and
// network lookups of [[placements]] entries against the simulator's two
// clusters (vcsimtest Options.Placements): a cluster's path or name
// stands for its root pool; "" is the top-level setting's object; a value
// that matches several objects, or none, is a *PlacementError naming the
// entry's key (placements[i].…) and the candidates, listed by
// PlacementProblems under that key; a value no entry holds keeps the
// top-level key.
func TestPlacementLookupsAt(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{NoTemplates: true, Placements: true})
	ctx := testCtx(t)
	c := env.NewClient(func(c *vcenter.Config) {
		c.Placements = []vcenter.PlacementKeys{
			{ResourcePool: env.ClusterPath(vcsimtest.ClusterA), Datastores: []string{vcsimtest.DatastoreA, "LocalDS_9"}, Folder: "/DC0/vm/nowhere"},
			{ResourcePool: "Resources", Datastores: []string{vcsimtest.DatastoreB}, Network: "no-such-net"},
			{ResourcePool: vcsimtest.ClusterB},
			{ResourcePool: "/DC0/host/cluster-c"},
		}
	})
	finder := find.NewFinder(env.Admin.Client, false)
	dc, err := finder.Datacenter(ctx, vcsimtest.DatacenterName)
	require.NoError(t, err)
	finder.SetDatacenter(dc)
	rootOf := func(cluster string) types.ManagedObjectReference {
		p, err := finder.ResourcePool(ctx, env.ClusterPoolPath(cluster))
		require.NoError(t, err)
		return p.Reference()
	}

	t.Run("cluster path, pool path and cluster name", func(t *testing.T) {
		for path, want := range map[string]types.ManagedObjectReference{
			env.ClusterPath(vcsimtest.ClusterA):     rootOf(vcsimtest.ClusterA),
			env.ClusterPoolPath(vcsimtest.ClusterB): rootOf(vcsimtest.ClusterB),
			vcsimtest.ClusterB:                      rootOf(vcsimtest.ClusterB),
		} {
			got, err := c.ResourcePoolAt(ctx, path)
			require.NoError(t, err, path)
			assert.Equal(t, vim.RefOf(want), got, path)
		}
		def, err := c.ResourcePoolAt(ctx, "")
		require.NoError(t, err)
		assert.Equal(t, vim.RefOf(env.ResourcePoolRef()), def, `"" is resourcePoolString's pool`)
		load, err := c.LoadResourcePool(ctx)
		require.NoError(t, err)
		assert.Equal(t, def, load)
	})

	t.Run("ambiguous pool names its entry", func(t *testing.T) {
		_, err := c.ResourcePoolAt(ctx, "Resources")
		require.ErrorIs(t, err, vcenter.ErrAmbiguous)
		require.ErrorIs(t, err, vctypes.ErrPlacementUnresolved)
		var pe *vcenter.PlacementError
		require.True(t, errors.As(err, &pe), "%v", err)
		assert.Equal(t, "placements[1].resourcePool", pe.Setting)
		assert.Contains(t, pe.Candidates, env.ClusterPoolPath(vcsimtest.ClusterA))
		assert.Contains(t, pe.Candidates, env.ClusterPoolPath(vcsimtest.ClusterB))
		assert.Contains(t, err.Error(), "set placements[1].resourcePool to one of: ")
	})

	t.Run("missing pool, folder, datastore, network name their entries", func(t *testing.T) {
		_, err := c.ResourcePoolAt(ctx, "/DC0/host/cluster-c")
		var pe *vcenter.PlacementError
		require.True(t, errors.As(err, &pe), "%v", err)
		assert.False(t, pe.Ambiguous)
		assert.Equal(t, "placements[3].resourcePool", pe.Setting)
		assert.Contains(t, pe.Candidates, env.ClusterPoolPath(vcsimtest.ClusterA), "what exists is listed")

		_, err = c.FolderAt(ctx, "/DC0/vm/nowhere")
		require.True(t, errors.As(err, &pe), "%v", err)
		assert.Equal(t, "placements[0].folder", pe.Setting)

		_, err = c.LoadDatastore(ctx, "LocalDS_9")
		require.True(t, errors.As(err, &pe), "%v", err)
		assert.Equal(t, "placements[0].datastores[1]", pe.Setting)
		assert.Contains(t, pe.Candidates, "/DC0/datastore/"+vcsimtest.DatastoreB)

		err = c.SetupEthernetCard(ctx, &types.VirtualEthernetCard{}, "vmxnet3", "no-such-net")
		require.True(t, errors.As(err, &pe), "%v", err)
		assert.Equal(t, "placements[1].network", pe.Setting)

		_, err = c.ResourcePoolAt(ctx, "/DC0/host/elsewhere")
		require.True(t, errors.As(err, &pe), "%v", err)
		assert.Equal(t, "resourcePoolString", pe.Setting, "a value no entry holds keeps the top-level key")

		var settings []string
		for _, p := range c.PlacementProblems() {
			settings = append(settings, p.Setting)
		}
		assert.ElementsMatch(t, []string{"placements[1].resourcePool", "placements[3].resourcePool", "placements[0].folder",
			"placements[0].datastores[1]", "placements[1].network", "resourcePoolString"}, settings)
	})

	t.Run("folder", func(t *testing.T) {
		f, err := c.FolderAt(ctx, vcsimtest.FolderPath)
		require.NoError(t, err)
		def, err := c.FolderAt(ctx, "")
		require.NoError(t, err)
		assert.Equal(t, f, def, `"" is folderString's folder`)
		load, err := c.LoadFolder(ctx)
		require.NoError(t, err)
		assert.Equal(t, def, load)
	})

	t.Run("datastore space is read fresh", func(t *testing.T) {
		ds, err := c.LoadDatastore(ctx, vcsimtest.DatastoreA)
		require.NoError(t, err)
		env.FillDatastore(vcsimtest.DatastoreA, 3<<30)
		s, err := c.DatastoreSpace(ctx, ds)
		require.NoError(t, err)
		assert.Equal(t, vcsimtest.DatastoreA, s.Name)
		assert.Equal(t, int64(3<<30), s.FreeBytes)
		assert.Positive(t, s.CapacityBytes)
		assert.True(t, s.Accessible)
		env.FillDatastore(vcsimtest.DatastoreA, 1<<30)
		before := c.Stats()
		s, err = c.DatastoreSpace(ctx, ds)
		require.NoError(t, err)
		assert.Equal(t, int64(1<<30), s.FreeBytes, "not cached")
		reads := c.Stats().Sub(before)
		t.Logf("DatastoreSpace: %d request(s), %d bytes received", reads.Total().Requests, reads.Total().ResponseBytes)
		assert.Equal(t, int64(1), reads.Total().Requests, "one request: %v", reads)

		_, err = c.DatastoreSpace(ctx, vctypes.Ref{Type: "Datastore", Value: "datastore-404"})
		assert.Error(t, err)
	})
}
