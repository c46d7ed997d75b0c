package vcenter_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/find"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// TestDefaultPoolWithPlacements: with [[placements]] entries and
// resourcePoolString unset (validation refuses it beside entries),
// LoadResourcePool (ResourcePoolAt("")) is the first entry's pool, not the
// datacenter's default pool, which is ambiguous in the simulator as on
// most datacenters and would be a topology problem nothing configured;
// without entries an unset resourcePoolString is still the datacenter's
// default pool, ambiguous here.
func TestDefaultPoolWithPlacements(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{NoTemplates: true, Placements: true})
	ctx := testCtx(t)
	finder := find.NewFinder(env.Admin.Client, false)
	dc, err := finder.Datacenter(ctx, vcsimtest.DatacenterName)
	require.NoError(t, err)
	finder.SetDatacenter(dc)
	rootB, err := finder.ResourcePool(ctx, env.ClusterPoolPath(vcsimtest.ClusterB))
	require.NoError(t, err)

	placed := env.NewClient(func(c *vcenter.Config) {
		c.ResourcePool = ""
		c.Placements = []vcenter.PlacementKeys{{ResourcePool: vcsimtest.ClusterB}, {ResourcePool: env.ClusterPath(vcsimtest.ClusterA)}}
	})
	got, err := placed.LoadResourcePool(ctx)
	require.NoError(t, err)
	assert.Equal(t, vim.RefOf(rootB.Reference()), got, "the first entry's pool")
	assert.Empty(t, placed.PlacementProblems(), "no topology problem")

	bare := env.NewClient(func(c *vcenter.Config) { c.ResourcePool = "" })
	_, err = bare.LoadResourcePool(ctx)
	require.Error(t, err)
	assert.True(t, errors.Is(err, vcenter.ErrAmbiguous), "without entries: the datacenter's default pool, ambiguous: %v", err)
}
