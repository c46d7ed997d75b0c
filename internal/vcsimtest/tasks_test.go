package vcsimtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// TestReapTasks: the simulator keeps every task it ran; ReapTasks removes
// those that ended before its cutoff, as vCenter forgets a task some
// minutes after it ended (tasks.go), and leaves the younger ones. A
// removed task answers ManagedObjectNotFound, as an expired one does.
func TestReapTasks(t *testing.T) {
	e := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := context.Background()
	f := find.NewFinder(e.Admin.Client, true)
	dc, err := f.DefaultDatacenter(ctx)
	require.NoError(t, err)
	f.SetDatacenter(dc)
	vm, err := f.VirtualMachine(ctx, vcsimtest.DefaultTemplate)
	require.NoError(t, err)
	task, err := vm.Reconfigure(ctx, types.VirtualMachineConfigSpec{Annotation: "reaped"})
	require.NoError(t, err)
	require.NoError(t, task.Wait(ctx))
	tasks := func() int { return len(e.Model.Map().AllReference("Task")) }
	before := tasks()
	require.Positive(t, before)

	assert.Zero(t, e.ReapTasks(time.Now().Add(-time.Hour)), "no task ended an hour ago")
	assert.Equal(t, before, tasks())

	assert.Equal(t, before, e.ReapTasks(time.Now().Add(time.Second)), "every task ended before now")
	assert.Zero(t, tasks())
	assert.Nil(t, e.Model.Map().Get(task.Reference()), "the task is gone from the simulator")
}
