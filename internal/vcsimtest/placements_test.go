package vcsimtest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// placementFixture finds, through env's admin client, the default
// template, the VM folder, and the references of the pools and datastores
// by path or name.
type placementFixture struct {
	env    *vcsimtest.Env
	finder *find.Finder
	tpl    types.ManagedObjectReference
	folder types.ManagedObjectReference
}

func newPlacementFixture(ctx context.Context, t *testing.T, env *vcsimtest.Env) *placementFixture {
	t.Helper()
	tpl, folder, _ := cloneFixture(ctx, t, env)
	finder := dcFinder(ctx, t, env)
	return &placementFixture{env: env, finder: finder, tpl: tpl.Reference(), folder: folder.Reference()}
}

func (f *placementFixture) pool(ctx context.Context, t *testing.T, path string) types.ManagedObjectReference {
	t.Helper()
	p, err := f.finder.ResourcePool(ctx, path)
	require.NoError(t, err, path)
	return p.Reference()
}

func (f *placementFixture) datastore(ctx context.Context, t *testing.T, name string) types.ManagedObjectReference {
	t.Helper()
	d, err := f.finder.Datastore(ctx, name)
	require.NoError(t, err, name)
	return d.Reference()
}

// clone clones the template as name into the pool at poolPath on the
// datastore named ds with the hatchery's client, as a spawn does.
func (f *placementFixture) clone(ctx context.Context, t *testing.T, name, poolPath, ds string) error {
	t.Helper()
	pool, dsRef := f.pool(ctx, t, poolPath), f.datastore(ctx, t, ds)
	_, err := f.env.Client.CloneVirtualMachine(ctx, vctypes.Clone{Template: vim.RefOf(f.tpl), Folder: vim.RefOf(f.folder), Name: name,
		Pool: vim.RefOf(pool), Datastore: vim.RefOf(dsRef)})
	return err
}

// placementCtx bounds a placement test's requests by its liveness only
// (testutil.PatienceContext): a fixed 60 s for the whole test ran out on a
// loaded machine (TestPlacementsFailingCluster's nine clones took 56 s at
// load 27), though every clone succeeded or failed as asserted.
func placementCtx(t *testing.T) context.Context {
	t.Helper()
	return testutil.PatienceContext(t)
}

// TestPlacementsInventory: Options.Placements builds cluster-a and
// cluster-b of two hosts each; LocalDS_0 is mounted on every host,
// LocalDS_1 only on cluster-a's, LocalDS_2 only on cluster-b's.
func TestPlacementsInventory(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{Placements: true})
	ctx := placementCtx(t)
	f := newPlacementFixture(ctx, t, env)

	hostsOf := map[string][]types.ManagedObjectReference{}
	for _, cl := range []string{vcsimtest.ClusterA, vcsimtest.ClusterB} {
		cr, err := f.finder.ClusterComputeResource(ctx, env.ClusterPath(cl))
		require.NoError(t, err, cl)
		var m mo.ClusterComputeResource
		require.NoError(t, cr.Properties(ctx, cr.Reference(), []string{"host", "resourcePool"}, &m))
		require.Len(t, m.Host, vcsimtest.PlacementHosts, cl)
		hostsOf[cl] = m.Host
		assert.Equal(t, *m.ResourcePool, f.pool(ctx, t, env.ClusterPoolPath(cl)), "ClusterPoolPath is the cluster's root pool")
	}
	mounts := func(name string) map[types.ManagedObjectReference]bool {
		ds := object.NewDatastore(env.Admin.Client, f.datastore(ctx, t, name))
		var m mo.Datastore
		require.NoError(t, ds.Properties(ctx, ds.Reference(), []string{"host"}, &m))
		out := map[types.ManagedObjectReference]bool{}
		for _, h := range m.Host {
			out[h.Key] = true
		}
		return out
	}
	shared, a, b := mounts(vcsimtest.DatastoreName), mounts(vcsimtest.DatastoreA), mounts(vcsimtest.DatastoreB)
	for _, h := range hostsOf[vcsimtest.ClusterA] {
		assert.True(t, shared[h] && a[h], "cluster-a's host mounts LocalDS_0 and LocalDS_1")
		assert.False(t, b[h], "cluster-a's host does not mount LocalDS_2")
	}
	for _, h := range hostsOf[vcsimtest.ClusterB] {
		assert.True(t, shared[h] && b[h], "cluster-b's host mounts LocalDS_0 and LocalDS_2")
		assert.False(t, a[h], "cluster-b's host does not mount LocalDS_1")
	}
	assert.Len(t, a, vcsimtest.PlacementHosts)
	assert.Len(t, b, vcsimtest.PlacementHosts)
}

// TestPlacementsCloneLandsOnTargetCluster: a clone of the template (on
// DC0_C0) into a cluster's pool runs on a host of that cluster, on the
// datastore asked, as vCenter places it (vcsim alone keeps the template's
// host); clones spread over the cluster's hosts; a datastore no host of
// the target cluster mounts fails the clone as a datastore fault.
func TestPlacementsCloneLandsOnTargetCluster(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{Placements: true})
	ctx := placementCtx(t)
	f := newPlacementFixture(ctx, t, env)

	tplAt, ok := env.PlacedOn(vcsimtest.DefaultTemplate)
	require.True(t, ok)
	require.Equal(t, "DC0_C0", tplAt.Cluster, "the template is on the default cluster")

	cases := []struct{ name, cluster, pool, ds string }{
		{"on-a", vcsimtest.ClusterA, env.ClusterPoolPath(vcsimtest.ClusterA), vcsimtest.DatastoreA},
		{"on-a-2", vcsimtest.ClusterA, env.ClusterPoolPath(vcsimtest.ClusterA), vcsimtest.DatastoreA},
		{"on-b", vcsimtest.ClusterB, env.ClusterPoolPath(vcsimtest.ClusterB), vcsimtest.DatastoreB},
		{"on-b-shared", vcsimtest.ClusterB, env.ClusterPoolPath(vcsimtest.ClusterB), vcsimtest.DatastoreName},
	}
	hosts := map[string]bool{}
	for _, c := range cases {
		require.NoError(t, f.clone(ctx, t, c.name, c.pool, c.ds), c.name)
		at, ok := env.PlacedOn(c.name)
		require.True(t, ok, c.name)
		assert.Equal(t, c.cluster, at.Cluster, c.name)
		assert.Equal(t, []string{c.ds}, at.Datastores, c.name)
		hosts[at.Host] = true
	}
	assert.Len(t, hosts, 4, "each cluster's two clones went to its two hosts, the least loaded first")

	err := f.clone(ctx, t, "b-on-a-ds", env.ClusterPoolPath(vcsimtest.ClusterB), vcsimtest.DatastoreA)
	require.Error(t, err)
	assert.True(t, errors.Is(vcenter.Classify(err), vctypes.FaultDatastoreUnavailable), "%v", err)
	_, exists := env.PlacedOn("b-on-a-ds")
	assert.False(t, exists, "the refused clone left no VM")

	// A clone into the template's own cluster keeps the simulator's host.
	require.NoError(t, f.clone(ctx, t, "home", vcsimtest.ResourcePoolPath, vcsimtest.DatastoreName))
	at, _ := env.PlacedOn("home")
	assert.Equal(t, "DC0_C0", at.Cluster)
}

// TestPlacementsFilledDatastore: a datastore filled below the template's
// disks (10 GB) reads that free space, and a clone into it fails with
// NoDiskSpace (vctypes.FaultNoDiskSpace); the other cluster's datastore
// still takes clones; with room again the clone works and lowers the free
// space by its disk.
func TestPlacementsFilledDatastore(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{Placements: true})
	ctx := placementCtx(t)
	f := newPlacementFixture(ctx, t, env)

	env.FillDatastore(vcsimtest.DatastoreA, 1<<30)
	space, err := env.Client.DatastoreSpace(ctx, vim.RefOf(f.datastore(ctx, t, vcsimtest.DatastoreA)))
	require.NoError(t, err)
	assert.Equal(t, int64(1<<30), space.FreeBytes, "the hatchery's client reads the filled figure")
	ds := object.NewDatastore(env.Admin.Client, f.datastore(ctx, t, vcsimtest.DatastoreA))
	var m mo.Datastore
	require.NoError(t, ds.Properties(ctx, ds.Reference(), []string{"summary"}, &m))
	assert.Equal(t, int64(1<<30), m.Summary.FreeSpace)

	err = f.clone(ctx, t, "full", env.ClusterPoolPath(vcsimtest.ClusterA), vcsimtest.DatastoreA)
	require.Error(t, err)
	assert.True(t, errors.Is(vcenter.Classify(err), vctypes.FaultNoDiskSpace), "%v", err)
	assert.True(t, vctypes.PointsAtPlacement(vcenter.Classify(err)))
	_, exists := env.PlacedOn("full")
	assert.False(t, exists, "the refused clone left no VM")

	require.NoError(t, f.clone(ctx, t, "other", env.ClusterPoolPath(vcsimtest.ClusterB), vcsimtest.DatastoreB))

	env.FillDatastore(vcsimtest.DatastoreA, 25<<30)
	require.NoError(t, f.clone(ctx, t, "fits", env.ClusterPoolPath(vcsimtest.ClusterA), vcsimtest.DatastoreA))
	require.NoError(t, ds.Properties(ctx, ds.Reference(), []string{"summary"}, &m))
	assert.Equal(t, int64(15<<30), m.Summary.FreeSpace, "the clone's 10 GB disk is taken from the free space")
	err = f.clone(ctx, t, "fits-2", env.ClusterPoolPath(vcsimtest.ClusterA), vcsimtest.DatastoreA)
	require.NoError(t, err)
	err = f.clone(ctx, t, "no-more", env.ClusterPoolPath(vcsimtest.ClusterA), vcsimtest.DatastoreA)
	assert.True(t, errors.Is(vcenter.Classify(err), vctypes.FaultNoDiskSpace), "5 GB left: %v", err)
}

// TestPlacementsFailingCluster: while a cluster fails its clones
// (FailClonesInto, by name or by pool path) they fail with
// HostNotConnected (vctypes.FaultHostUnavailable) and the other cluster
// still takes clones; healed, the cluster takes clones again.
func TestPlacementsFailingCluster(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{Placements: true})
	ctx := placementCtx(t)
	f := newPlacementFixture(ctx, t, env)
	poolA := env.ClusterPoolPath(vcsimtest.ClusterA)

	for i, down := range []string{vcsimtest.ClusterA, poolA, env.ClusterPath(vcsimtest.ClusterA)} {
		env.FailClonesInto(down)
		err := f.clone(ctx, t, "down", poolA, vcsimtest.DatastoreName)
		require.Error(t, err, down)
		assert.True(t, errors.Is(vcenter.Classify(err), vctypes.FaultHostUnavailable), "%s: %v", down, err)
		assert.True(t, vctypes.PointsAtPlacement(vcenter.Classify(err)))
		_, exists := env.PlacedOn("down")
		assert.False(t, exists, "the refused clone left no VM")

		up := []string{"up-0", "up-1", "up-2"}[i]
		require.NoError(t, f.clone(ctx, t, up, env.ClusterPoolPath(vcsimtest.ClusterB), vcsimtest.DatastoreB), "the other cluster is up")

		env.HealClonesInto(down)
		healed := []string{"healed-0", "healed-1", "healed-2"}[i]
		require.NoError(t, f.clone(ctx, t, healed, poolA, vcsimtest.DatastoreA), down)
		at, _ := env.PlacedOn(healed)
		assert.Equal(t, vcsimtest.ClusterA, at.Cluster)
	}
}
