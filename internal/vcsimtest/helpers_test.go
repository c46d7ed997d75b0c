package vcsimtest_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// dcFinder is a finder over env's admin client, set to the simulator's
// datacenter.
func dcFinder(ctx context.Context, t *testing.T, env *vcsimtest.Env) *find.Finder {
	t.Helper()
	finder := find.NewFinder(env.Admin.Client, true)
	dc, err := finder.Datacenter(ctx, vcsimtest.DatacenterName)
	require.NoError(t, err)
	finder.SetDatacenter(dc)
	return finder
}

// cloneFixture finds the default template, the VM folder and the resource
// pool through env's admin client.
func cloneFixture(ctx context.Context, t *testing.T, env *vcsimtest.Env) (*object.VirtualMachine, *object.Folder, types.ManagedObjectReference) {
	t.Helper()
	finder := dcFinder(ctx, t, env)
	tpl, err := finder.VirtualMachine(ctx, vcsimtest.DefaultTemplate)
	require.NoError(t, err)
	folder, err := finder.Folder(ctx, vcsimtest.FolderPath)
	require.NoError(t, err)
	pool, err := finder.ResourcePool(ctx, vcsimtest.ResourcePoolPath)
	require.NoError(t, err)
	return tpl, folder, pool.Reference()
}
