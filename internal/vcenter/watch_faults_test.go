//go:build !race

// Fault tests of the VM change watch. The simulator's fault injector
// updates its rule counters without a lock (see faults_helpers_test.go), so
// these run without the race detector; their TestFaults prefix puts them in
// that step of .ci/test.

package vcenter_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// watchFault makes the WaitForUpdatesEx calls after the next skip answer f,
// once.
func watchFault(env *vcsimtest.Env, skip int, f types.BaseMethodFault) {
	env.InjectFault(vcsimtest.Fault{Method: "WaitForUpdatesEx", Skip: skip, Max: 1, Err: f})
}

func TestFaultsWatchPollKeepsOrLosesTheWatch(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{NoTemplates: true})
	ctx := watchCtx(t)
	c := env.Client
	refs := env.AddForeignVMs("many-", 250)
	require.NoError(t, c.ResetVirtualMachineWatch(ctx))
	require.NoError(t, c.WatchVirtualMachineRefs(ctx, refs))

	// A failing poll keeps the watch: nothing was read.
	watchFault(env, 0, &types.SystemError{Reason: "injected"})
	_, err := c.VirtualMachineObjectUpdates(ctx)
	require.Error(t, err)
	assert.NotErrorIs(t, err, vcenter.ErrWatchLost)
	assert.Contains(t, err.Error(), `datacenter "DC0"`)
	nudge(env)
	ups, err := c.VirtualMachineObjectUpdates(ctx)
	require.NoError(t, err, "the watch is kept")
	assert.Len(t, ups, 250)

	// A failure after a first page would lose updates: the watch is lost
	// and its collector destroyed.
	require.NoError(t, c.ResetVirtualMachineWatch(ctx))
	require.NoError(t, c.WatchVirtualMachineRefs(ctx, refs))
	nudge(env)
	watchFault(env, 1, &types.SystemError{Reason: "injected"})
	before := c.Stats()
	_, err = c.VirtualMachineObjectUpdates(ctx)
	require.ErrorIs(t, err, vcenter.ErrWatchLost)
	d := c.Stats().Sub(before)
	assert.Equal(t, int64(2), d["WaitForUpdatesEx"].Requests)
	assert.Equal(t, int64(1), d["DestroyPropertyCollector"].Requests)

	// An invalid version loses the watch too.
	require.NoError(t, c.ResetVirtualMachineWatch(ctx))
	watchFault(env, 0, &types.InvalidCollectorVersion{})
	_, err = c.VirtualMachineObjectUpdates(ctx)
	require.ErrorIs(t, err, vcenter.ErrWatchLost)
	_, err = c.VirtualMachineObjectUpdates(ctx)
	require.ErrorIs(t, err, vcenter.ErrWatchLost, "until reset")
	require.NoError(t, c.ResetVirtualMachineWatch(ctx))
	ups, err = c.VirtualMachineObjectUpdates(ctx)
	require.NoError(t, err)
	assert.Empty(t, ups)
}
