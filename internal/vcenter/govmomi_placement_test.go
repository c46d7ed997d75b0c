package vcenter_test

import (
	"context"
	"path"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/daemon"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

func TestPlacement(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{NoTemplates: true})
	ctx := testCtx(t)

	t.Run("configured", func(t *testing.T) {
		c := env.Client
		pool, err := c.LoadResourcePool(ctx)
		require.NoError(t, err)
		assert.Equal(t, vcsimtest.ResourcePoolPath, inventoryPath(t, ctx, c, vim.MORef(pool)))
		folder, err := c.LoadFolder(ctx)
		require.NoError(t, err)
		assert.Equal(t, vcsimtest.FolderPath, inventoryPath(t, ctx, c, vim.MORef(folder)))
		ds, err := c.LoadDatastore(ctx, vcsimtest.DatastoreName)
		require.NoError(t, err)
		assert.Equal(t, vcsimtest.DatastoreName, path.Base(inventoryPath(t, ctx, c, vim.MORef(ds))))
		card := &types.VirtualEthernetCard{}
		require.NoError(t, c.SetupEthernetCard(ctx, card, "vmxnet3", vcsimtest.NetworkName))
		backing, ok := card.Backing.(*types.VirtualEthernetCardNetworkBackingInfo)
		require.True(t, ok, "%T", card.Backing)
		assert.Contains(t, backing.DeviceName, vcsimtest.NetworkName)
	})

	t.Run("defaults", func(t *testing.T) {
		c := env.NewClient(func(c *vcenter.Config) { c.ResourcePool, c.Folder, c.Datacenter = "", "", "" })
		folder, err := c.LoadFolder(ctx)
		require.NoError(t, err)
		assert.Equal(t, vcsimtest.FolderPath, inventoryPath(t, ctx, c, vim.MORef(folder)))
		ds, err := c.LoadDatastore(ctx, "")
		require.NoError(t, err, "one datastore: the default")
		assert.Equal(t, vcsimtest.DatastoreName, path.Base(inventoryPath(t, ctx, c, vim.MORef(ds))))
		// The VPX model has a standalone host and a cluster: two pools.
		_, err = c.LoadResourcePool(ctx)
		require.ErrorIs(t, err, vcenter.ErrAmbiguous)
		assert.Contains(t, err.Error(), "resourcePoolString")
	})

	t.Run("pool by name", func(t *testing.T) {
		c := env.NewClient(func(c *vcenter.Config) { c.ResourcePool = "Resources" })
		_, err := c.LoadResourcePool(ctx)
		require.ErrorIs(t, err, vcenter.ErrAmbiguous, "two pools are named Resources")
		assert.Contains(t, err.Error(), `find resource pool "Resources" (resourcePoolString)`)
	})

	t.Run("missing", func(t *testing.T) {
		c := env.NewClient(func(c *vcenter.Config) { c.ResourcePool, c.Folder = "/DC0/host/nope/Resources", "/DC0/vm/nope" })
		_, err := c.LoadResourcePool(ctx)
		require.Error(t, err)
		assert.NotErrorIs(t, err, vcenter.ErrAmbiguous)
		_, err = c.LoadFolder(ctx)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `find folder "/DC0/vm/nope" (folderString)`)
		_, err = c.LoadDatastore(ctx, "nope")
		require.Error(t, err)
		err = c.SetupEthernetCard(ctx, &types.VirtualEthernetCard{}, "vmxnet3", "nope")
		require.Error(t, err)
		_, err = env.TryClient(func(c *vcenter.Config) { c.Datacenter = "nope" })
		require.Error(t, err)
		assert.Contains(t, err.Error(), `find datacenter "nope" (datacenterString)`)
	})

	t.Run("config mapping", func(t *testing.T) {
		cfg := daemon.VCenterConfig(env.Config())
		cfg.PollInterval = vcsimtest.TestPollInterval
		c, err := vcenter.Dial(ctx, cfg)
		require.NoError(t, err)
		defer c.Close(ctx)
		pool, err := c.LoadResourcePool(ctx)
		require.NoError(t, err)
		assert.Equal(t, vcsimtest.ResourcePoolPath, inventoryPath(t, ctx, c, vim.MORef(pool)))
	})
}

// inventoryPath reads the inventory path of ref: the port returns
// references, the assertions name placement objects by their path.
func inventoryPath(t *testing.T, ctx context.Context, c *vcenter.Client, ref types.ManagedObjectReference) string {
	t.Helper()
	p, err := find.InventoryPath(ctx, c.Vim25(), ref)
	require.NoError(t, err)
	return p
}
