package vcenter_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// TestWatchLearnsScopeMembersFromNotifications: once the watch's filter on
// the scope's views has reported, ProbeInventory answers the scope's VMs
// from the notifications and reads no view: a VM made in the scope is
// learnt, and one moved out of it or destroyed is forgotten, with no
// request but the watch's own poll. The simulator's container views are
// extended to report VMs entering and leaving as vCenter does
// (vcsimtest/containerview.go), and its collectors to report a new
// filter's objects at the next poll (vcsimtest/collectors.go).
func TestWatchLearnsScopeMembersFromNotifications(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{ForeignVMs: 3})
	ctx := watchCtx(t)
	c := env.Client

	require.NoError(t, c.ResetVirtualMachineWatch(ctx))
	before := c.Stats()
	listed, _, err := c.ProbeInventoryRefs(ctx, nil)
	require.NoError(t, err)
	d := c.Stats().Sub(before)
	assert.Equal(t, int64(1), d["CreateFilter"].Requests, "the first probe reads the views and watches them")

	// probe runs one refresh's watch poll and probe, and returns the
	// probe's VMs and the requests the probe made.
	probe := func() ([]types.ManagedObjectReference, map[string]int64) {
		t.Helper()
		_, err := c.VirtualMachineChanges(ctx)
		require.NoError(t, err)
		before := c.Stats()
		refs, _, err := c.ProbeInventoryRefs(ctx, nil)
		require.NoError(t, err)
		return refs, requestsOf(c.Stats().Sub(before))
	}
	refs, reqs := probe()
	assert.Empty(t, reqs, "the views reported at the watch's next poll: the probe reads nothing")
	assert.ElementsMatch(t, listed, refs)

	finder := find.NewFinder(env.Admin.Client, true)
	dc, err := finder.Datacenter(ctx, vcsimtest.DatacenterName)
	require.NoError(t, err)
	finder.SetDatacenter(dc)
	folder, err := finder.Folder(ctx, vcsimtest.FolderPath)
	require.NoError(t, err)
	pool, err := finder.ResourcePool(ctx, vcsimtest.ResourcePoolPath)
	require.NoError(t, err)
	away, err := folder.CreateFolder(ctx, "members-away")
	require.NoError(t, err)

	task, err := folder.CreateVM(ctx, types.VirtualMachineConfigSpec{
		Name: "members-new", GuestId: "otherGuest64",
		Files: &types.VirtualMachineFileInfo{VmPathName: "[LocalDS_0]"},
	}, pool, nil)
	require.NoError(t, err)
	info, err := task.WaitForResult(ctx, nil)
	require.NoError(t, err)
	made := info.Result.(types.ManagedObjectReference)
	refs, reqs = probe()
	assert.Empty(t, reqs, "a new vm is learnt without reading the views")
	assert.ElementsMatch(t, append(slices.Clone(listed), made), refs)

	task, err = away.MoveInto(ctx, []types.ManagedObjectReference{made})
	require.NoError(t, err)
	require.NoError(t, task.Wait(ctx))
	refs, reqs = probe()
	assert.Empty(t, reqs)
	assert.ElementsMatch(t, listed, refs, "a vm moved out of the scope is forgotten")

	task, err = folder.MoveInto(ctx, []types.ManagedObjectReference{made})
	require.NoError(t, err)
	require.NoError(t, task.Wait(ctx))
	refs, _ = probe()
	assert.Contains(t, refs, made, "moved back, it is in the scope again")

	task, err = object.NewVirtualMachine(env.Admin.Client, made).Destroy(ctx)
	require.NoError(t, err)
	require.NoError(t, task.Wait(ctx))
	refs, reqs = probe()
	assert.Empty(t, reqs)
	assert.ElementsMatch(t, listed, refs, "a destroyed vm is forgotten")

	// A new watch reads the views again before it trusts its own filter.
	require.NoError(t, c.ResetVirtualMachineWatch(ctx))
	before = c.Stats()
	_, _, err = c.ProbeInventoryRefs(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, int64(1), c.Stats().Sub(before)["RetrievePropertiesEx"].Requests)
}
