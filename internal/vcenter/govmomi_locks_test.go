package vcenter_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// TestVcsimLocksCreateTwiceListDelete: a lock is a folder vCenter keeps
// unique by name. The second create of one name, from a second client (a
// second process), is the typed taken outcome; the listing returns the
// folders of the prefix only (not the VMs beside them, not another
// prefix); a delete frees the name for a new create, and deleting a lock
// already gone is success.
func TestVcsimLocksCreateTwiceListDelete(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{ForeignVMs: 2})
	ctx := testCtx(t)
	a, b := env.Client, env.NewClient(nil)
	t.Cleanup(func() { b.Close(ctx) })
	cloneWorker(t, ctx, env, "hatch-ip-vm", "") // a VM whose name shares the prefix

	first, err := a.CreateLock(ctx, "hatch-ip-10.0.0.1")
	require.NoError(t, err)
	_, err = b.CreateLock(ctx, "hatch-ip-10.0.0.1")
	require.Error(t, err)
	assert.ErrorIs(t, err, vctypes.ErrLockTaken, "the second create of one name is taken: %v", err)
	assert.Contains(t, err.Error(), "hatch-ip-10.0.0.1", "the error names the lock")
	_, err = a.CreateLock(ctx, "hatch-ip-10.0.0.2")
	require.NoError(t, err)
	_, err = a.CreateLock(ctx, "other-ip-10.0.0.1")
	require.NoError(t, err, "another hatchery's lock of the same address is another name")

	locks, err := b.ListLocks(ctx, "hatch-ip-")
	require.NoError(t, err)
	assert.Len(t, locks, 2, "the two folders of the prefix, not the vm: %v", locks)
	assert.Equal(t, first, locks["hatch-ip-10.0.0.1"])
	assert.Contains(t, locks, "hatch-ip-10.0.0.2")

	require.NoError(t, b.DeleteLock(ctx, first))
	require.NoError(t, a.DeleteLock(ctx, first), "a lock already gone is success")
	locks, err = a.ListLocks(ctx, "hatch-ip-")
	require.NoError(t, err)
	assert.NotContains(t, locks, "hatch-ip-10.0.0.1")
	again, err := b.CreateLock(ctx, "hatch-ip-10.0.0.1")
	require.NoError(t, err, "a deleted lock's name can be taken again")
	assert.NotEqual(t, first, again)
}

// TestVcsimLocksConcurrentCreateOneWins: clients creating one name at the
// same moment: exactly one gets the lock, every other the taken outcome.
func TestVcsimLocksConcurrentCreateOneWins(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testCtx(t)
	const n = 4
	clients := []*vcenter.Client{env.Client}
	for range n - 1 {
		c := env.NewClient(nil)
		t.Cleanup(func() { c.Close(ctx) })
		clients = append(clients, c)
	}
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			<-start
			_, errs[i] = c.CreateLock(ctx, "hatch-ip-10.9.0.1")
		})
	}
	close(start)
	wg.Wait()
	won := 0
	for _, err := range errs {
		if err == nil {
			won++
			continue
		}
		assert.ErrorIs(t, err, vctypes.ErrLockTaken)
	}
	assert.Equal(t, 1, won, "one create wins: %v", errs)
}

// TestVcsimDeleteLockLeavesAFolderThatHoldsSomething: a folder of the lock
// prefix that holds a VM is not a lock: deleting it would destroy the VM,
// so DeleteLock refuses and the VM is still there.
func TestVcsimDeleteLockLeavesAFolderThatHoldsSomething(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testCtx(t)
	c := env.Client
	lock, err := c.CreateLock(ctx, "hatch-ip-10.0.0.7")
	require.NoError(t, err)
	vm := cloneWorker(t, ctx, env, "worker-in-lock", "")
	task, err := object.NewFolder(c.Vim25(), vim.MORef(lock)).MoveInto(ctx, []types.ManagedObjectReference{vm})
	require.NoError(t, err)
	require.NoError(t, task.Wait(ctx))

	err = c.DeleteLock(ctx, lock)
	require.Error(t, err)
	assert.False(t, errors.Is(err, vctypes.ErrLockTaken))
	objs, err := c.RetrieveVirtualMachineObjects(ctx, []types.ManagedObjectReference{vm})
	require.NoError(t, err)
	assert.Len(t, objs, 1, "the vm in the folder is still there")
}

// TestVcsimLockFolderCreatedOnce: the locks live in one folder
// (vcenter.LockFolderName) inside the folder new VMs go to, never beside
// the VMs. Processes taking their first lock at the same moment, with no
// lock folder yet, create it once between them and all use it: none fails
// for the other's create. (The Env creates the lock folder up front, see
// vcsimtest.Env.createLockFolder; this test removes it first.)
func TestVcsimLockFolderCreatedOnce(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{NoTemplates: true})
	ctx := testCtx(t)
	vmFolder, err := find.NewFinder(env.Admin.Client).Folder(ctx, env.Folder)
	require.NoError(t, err)
	children := func() map[string]types.ManagedObjectReference {
		var f mo.Folder
		require.NoError(t, env.Admin.PropertyCollector().RetrieveOne(ctx, vmFolder.Reference(), []string{"childEntity"}, &f))
		names := map[string]types.ManagedObjectReference{}
		for _, ref := range f.ChildEntity {
			var c mo.ManagedEntity
			require.NoError(t, env.Admin.PropertyCollector().RetrieveOne(ctx, ref, []string{"name"}, &c))
			names[c.Name] = ref
		}
		return names
	}
	pre, ok := children()[vcenter.LockFolderName]
	require.True(t, ok, "the env made the lock folder")
	task, err := object.NewFolder(env.Admin.Client, pre).Destroy(ctx)
	require.NoError(t, err)
	require.NoError(t, task.Wait(ctx))
	require.NotContains(t, children(), vcenter.LockFolderName)

	const n = 4
	errs := make([]error, n)
	locks := make([]vctypes.Ref, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		c := env.NewClient(nil)
		t.Cleanup(func() { c.Close(ctx) })
		wg.Go(func() {
			<-start
			locks[i], errs[i] = c.CreateLock(ctx, fmt.Sprintf("hatch-ip-10.8.0.%d", i+1))
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "client %d", i)
	}
	got := children()
	lockFolder, ok := got[vcenter.LockFolderName]
	require.True(t, ok, "the lock folder exists again: %v", got)
	for name := range got {
		assert.NotContains(t, name, "hatch-ip-", "no lock beside the VMs")
	}
	for i, l := range locks {
		var f mo.Folder
		require.NoError(t, env.Admin.PropertyCollector().RetrieveOne(ctx, vim.MORef(l), []string{"parent"}, &f))
		require.NotNil(t, f.Parent)
		assert.Equal(t, lockFolder, *f.Parent, "lock %d is in the lock folder", i)
	}
	listed, err := env.Client.ListLocks(ctx, "hatch-ip-")
	require.NoError(t, err)
	assert.Len(t, listed, n)
}
