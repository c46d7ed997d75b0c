package vcsimtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// TestReadyDelayCountsFromTheLastPowerOn: a VM powered off and on again
// before its guest was ready gets its guest ready ReadyDelay after the
// second power-on, not when the first power-on's delay runs out (as a
// warm-pool VM does: cloned powered on, powered off at once, claimed and
// powered on again; the latency benchmark's powered-off pool showed a
// guest ready before its boot). The bound is a lower one: a slow machine
// only makes the wait longer.
func TestReadyDelayCountsFromTheLastPowerOn(t *testing.T) {
	t.Parallel()
	const delay = 2 * time.Second
	env := vcsimtest.Start(t, vcsimtest.Options{ReadyDelay: delay})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tpl, folder, pool := cloneFixture(ctx, t, env)

	task, err := tpl.Clone(ctx, folder, "cycled", types.VirtualMachineCloneSpec{Location: types.VirtualMachineRelocateSpec{Pool: &pool}, PowerOn: true})
	require.NoError(t, err)
	info, err := task.WaitForResult(ctx)
	require.NoError(t, err)
	vm := object.NewVirtualMachine(env.Admin.Client, info.Result.(types.ManagedObjectReference))
	off, err := vm.PowerOff(ctx)
	require.NoError(t, err)
	require.NoError(t, off.Wait(ctx))

	start := time.Now()
	on, err := vm.PowerOn(ctx)
	require.NoError(t, err)
	require.NoError(t, on.Wait(ctx))
	require.Eventually(t, func() bool { return env.MustInspect("cycled").GuestOperationsReady }, 30*time.Second, 5*time.Millisecond)
	assert.GreaterOrEqual(t, time.Since(start), delay, "the guest was ready before its second boot's delay")
}
