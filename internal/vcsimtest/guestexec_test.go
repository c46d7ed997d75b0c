package vcsimtest_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// runnerVM starts an Env with a GuestRunner and clones one powered-on VM
// (its guest ready at once).
func runnerVM(ctx context.Context, t *testing.T) (*vcsimtest.Env, types.ManagedObjectReference) {
	t.Helper()
	env := vcsimtest.Start(t, vcsimtest.Options{Runner: &vcsimtest.GuestRunnerOptions{Root: t.TempDir()}})
	tpl, folder, pool := cloneFixture(ctx, t, env)
	task, err := tpl.Clone(ctx, folder, "runner-vm", types.VirtualMachineCloneSpec{
		Location: types.VirtualMachineRelocateSpec{Pool: &pool}, PowerOn: true})
	require.NoError(t, err)
	info, err := task.WaitForResult(ctx)
	require.NoError(t, err)
	return env, info.Result.(types.ManagedObjectReference)
}

func guestAuth() *vctypes.GuestAuth {
	return &vctypes.GuestAuth{Username: vcsimtest.DefaultGuestUser, Password: vcsimtest.DefaultGuestPassword}
}

// TestGuestRunnerRunsTheLaunchAndPowersOff: the program of a
// StartProgramInGuest runs through the guest's shell with the call's
// environment, in a directory of its own, `sudo` and `shutdown` work as
// the script expects, and the VM is powered off when the script ends; the
// readiness probe (`env`) runs nothing.
func TestGuestRunnerRunsTheLaunchAndPowersOff(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	env, vm := runnerVM(ctx, t)

	_, err := env.Client.StartProgramInGuest(ctx, vim.RefOf(vm), guestAuth(), vctypes.GuestProgram{Path: "/usr/bin/env"})
	require.NoError(t, err)
	_, err = env.Client.StartProgramInGuest(ctx, vim.RefOf(vm), guestAuth(), vctypes.GuestProgram{
		Path: "/bin/echo",
		Args: `-n ;echo "cfg=$CDS_CONFIG" > out.txt && pwd >> out.txt && sudo echo as-root >> out.txt && sudo shutdown -h now`,
		Env:  []string{"CDS_CONFIG=c2VjcmV0"},
	})
	require.NoError(t, err)

	runs, err := env.Runner.WaitForRuns(ctx, 1)
	require.NoError(t, err)
	require.Len(t, runs, 1, "the env probe ran nothing")
	r := runs[0]
	assert.Equal(t, "runner-vm", r.VM)
	assert.NoError(t, r.Err)
	assert.False(t, r.Killed)
	out, err := os.ReadFile(filepath.Join(r.Dir, "out.txt"))
	require.NoError(t, err)
	assert.Equal(t, "cfg=c2VjcmV0\n"+r.Dir+"\nas-root\n", string(out))

	st := env.MustInspect("runner-vm")
	assert.Equal(t, types.VirtualMachinePowerStatePoweredOff, st.PowerState, "the end of the script powers the VM off")
	assert.Empty(t, env.Runner.Running())
}

// TestGuestRunnerPowerOffKillsTheGuest: a VM powered off from outside ends
// its guest's processes, detached ones included, and the run is recorded
// as killed.
func TestGuestRunnerPowerOffKillsTheGuest(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	env, vm := runnerVM(ctx, t)

	_, err := env.Client.StartProgramInGuest(ctx, vim.RefOf(vm), guestAuth(), vctypes.GuestProgram{
		Path: "/bin/echo", Args: "-n ;nohup sleep 300 >/dev/null 2>&1 &"})
	require.NoError(t, err)
	require.Equal(t, []string{"runner-vm"}, env.Runner.Running(), "the detached sleep keeps the guest running")

	task, err := object.NewVirtualMachine(env.Admin.Client, vm).PowerOff(ctx)
	require.NoError(t, err)
	require.NoError(t, task.Wait(ctx))

	runs, err := env.Runner.WaitForRuns(ctx, 1)
	require.NoError(t, err)
	assert.True(t, runs[0].Killed, "run: %+v", runs[0])
	assert.Empty(t, env.Runner.Running())
}

// TestGuestRunnerRunInGuest: a script handed to the runner directly (for a
// guest it does not play) runs with the environment given, in a directory
// of its own, and powers the VM off when it ends.
func TestGuestRunnerRunInGuest(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	env, vm := runnerVM(ctx, t)

	require.NoError(t, env.Runner.RunInGuest(vm, "runner-vm", `echo "cfg=$CDS_CONFIG" > out.txt`, []string{"CDS_CONFIG=d2lu"}))
	runs, err := env.Runner.WaitForRuns(ctx, 1)
	require.NoError(t, err)
	require.NoError(t, runs[0].Err)
	out, err := os.ReadFile(filepath.Join(runs[0].Dir, "out.txt"))
	require.NoError(t, err)
	assert.Equal(t, "cfg=d2lu\n", string(out))
	assert.Equal(t, types.VirtualMachinePowerStatePoweredOff, env.MustInspect("runner-vm").PowerState)
}
