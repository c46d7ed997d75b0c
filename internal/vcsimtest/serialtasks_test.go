package vcsimtest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// TestVcsimSerialTasks shows Options.SerialTasks, the test-side workaround
// for races inside the pinned simulator (it is not vCenter's behaviour:
// vCenter runs clones concurrently). Two clones called at once each take
// the latency model's linked-clone delay (about a second), so without the
// queue their tasks overlap; with it the second task is created only once
// the first has ended. Each keeps its own result; a clone to a taken name
// still fails with DuplicateName, and a call the simulator refuses at once
// (an unknown folder) gives the queue back: the clone after both
// succeeds.
//
// Not parallel: the task delays are process-wide (ApplyTaskDelays), and
// the package's parallel tests run only after this one.
func TestVcsimSerialTasks(t *testing.T) {
	restore := vcsimtest.ApplyTaskDelays(vcsimtest.OpLinkedClone)
	defer restore()
	env := vcsimtest.Start(t, vcsimtest.Options{SerialTasks: true})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tpl, folder, poolRef := cloneFixture(ctx, t, env)
	spec := types.VirtualMachineCloneSpec{Location: types.VirtualMachineRelocateSpec{Pool: &poolRef}}
	clone := func(f *object.Folder, name string) (*types.TaskInfo, error) {
		task, err := tpl.Clone(ctx, f, name, spec)
		if err != nil {
			return nil, err
		}
		return task.WaitForResult(ctx)
	}

	names := []string{"serial-a", "serial-b"}
	infos := make([]*types.TaskInfo, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			infos[i], errs[i] = clone(folder, name)
		}()
	}
	wg.Wait()
	for i := range names {
		require.NoError(t, errs[i], names[i])
	}
	first, second := infos[0], infos[1]
	if second.QueueTime.Before(first.QueueTime) {
		first, second = second, first
	}
	require.NotNil(t, first.CompleteTime)
	assert.False(t, second.QueueTime.Before(*first.CompleteTime),
		"the second clone's task was queued at %s, before the first ended at %s", second.QueueTime, *first.CompleteTime)
	for i, name := range names {
		ref, ok := infos[i].Result.(types.ManagedObjectReference)
		require.True(t, ok, "%s: result %T", name, infos[i].Result)
		st := env.MustInspect(name)
		assert.Equal(t, st.Ref, ref, "%s: the task's result is the VM of that name", name)
	}

	_, err := clone(folder, names[0])
	require.Error(t, err)
	assert.True(t, fault.Is(err, &types.DuplicateName{}), "a taken name: %v", err)

	gone := object.NewFolder(env.Admin.Client, types.ManagedObjectReference{Type: "Folder", Value: "group-v-none"})
	_, err = clone(gone, "serial-c")
	require.Error(t, err, "a clone into an unknown folder")

	_, err = clone(folder, "serial-c")
	require.NoError(t, err, "the queue was given back after both faults")
	env.MustInspect("serial-c")

	// An empty folder's destroy (a lock's deletion) called while a clone
	// runs is queued once the clone has ended, and gives the queue back.
	lock, err := folder.CreateFolder(ctx, "serial-lock")
	require.NoError(t, err)
	cloning, err := tpl.Clone(ctx, folder, "serial-d", spec)
	require.NoError(t, err)
	destroying, err := lock.Destroy(ctx)
	require.NoError(t, err)
	destroyed, err := destroying.WaitForResult(ctx)
	require.NoError(t, err)
	cloned, err := cloning.WaitForResult(ctx)
	require.NoError(t, err)
	require.NotNil(t, cloned.CompleteTime)
	assert.False(t, destroyed.QueueTime.Before(*cloned.CompleteTime),
		"the folder's destroy was queued at %s, before the clone ended at %s", destroyed.QueueTime, *cloned.CompleteTime)
	_, err = clone(folder, "serial-e")
	require.NoError(t, err, "the queue was given back after the folder's destroy")
}
