package vcsimtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// TestSetClusterPoolRuntime: the runtime set on a placement cluster's root
// pool is what the API reads for that pool, and the other cluster's pool
// keeps vcsim's own figure.
func TestSetClusterPoolRuntime(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{NoTemplates: true, Placements: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	env.SetClusterPoolRuntime(vcsimtest.ClusterA, func(rt *types.ResourcePoolRuntimeInfo) {
		rt.Memory.UnreservedForVm = 64 << 30
	})
	finder := find.NewFinder(env.Admin.Client, false)
	dc, err := finder.Datacenter(ctx, vcsimtest.DatacenterName)
	require.NoError(t, err)
	finder.SetDatacenter(dc)
	unreserved := func(cluster string) int64 {
		p, err := finder.ResourcePool(ctx, env.ClusterPoolPath(cluster))
		require.NoError(t, err)
		var m mo.ResourcePool
		require.NoError(t, p.Properties(ctx, p.Reference(), []string{"runtime"}, &m))
		return m.Runtime.Memory.UnreservedForVm
	}
	assert.Equal(t, int64(64<<30), unreserved(vcsimtest.ClusterA))
	assert.NotEqual(t, int64(64<<30), unreserved(vcsimtest.ClusterB))
}
