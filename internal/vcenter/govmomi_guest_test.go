package vcenter_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

var guestAuth = &vctypes.GuestAuth{Username: vcsimtest.DefaultGuestUser, Password: vcsimtest.DefaultGuestPassword}

func TestGuestReadinessAfterDelay(t *testing.T) {
	t.Parallel()
	// The delay is long enough for the "not ready yet" checks to run before
	// it ends on a loaded machine; they are only asserted when they did.
	const delay = 2 * time.Second
	env := vcsimtest.Start(t, vcsimtest.Options{ReadyDelay: delay})
	ctx := testCtx(t)
	c := env.Client
	vm := cloneWorker(t, ctx, env, "worker-1", "10.0.0.21")

	start := time.Now()
	require.NoError(t, c.StartVirtualMachine(ctx, vim.RefOf(vm)))
	readyEarly := env.MustInspect("worker-1").GuestOperationsReady
	_, err := c.StartProgramInGuest(ctx, vim.RefOf(vm), guestAuth, vctypes.GuestProgram{Path: "/usr/bin/env"})
	if time.Since(start) < delay {
		assert.False(t, readyEarly, "not ready before the delay")
		require.Error(t, err)
		assert.True(t, fault.Is(err, &types.GuestOperationsUnavailable{}), "%v", err)
	}

	require.NoError(t, c.WaitForGuestOperationsReady(ctx, vim.RefOf(vm)))
	assert.GreaterOrEqual(t, time.Since(start), delay)
	st := env.MustInspect("worker-1")
	assert.True(t, st.GuestOperationsReady)
	assert.Equal(t, string(types.VirtualMachineToolsRunningStatusGuestToolsRunning), st.ToolsRunningStatus)

	ip, err := c.WaitForVirtualMachineIP(ctx, vim.RefOf(vm), "")
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.21", ip)

	// Another expected IP never shows up: the wait ends with ctx.
	short, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
	defer cancel()
	_, err = c.WaitForVirtualMachineIP(short, vim.RefOf(vm), "10.0.0.99")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "wait for ip address of")
}

func TestGuestReadinessWaitEndsWithContext(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testCtx(t)
	vm := cloneWorker(t, ctx, env, "worker-1", "")
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	before := env.Client.Stats()
	err := env.Client.WaitForGuestOperationsReady(short, vim.RefOf(vm)) // powered off: never ready
	require.ErrorIs(t, err, context.DeadlineExceeded)
	// Read on a timer, not in a busy loop: a first read, then at most one
	// per poll interval. Only the reads are counted: the session's wait
	// collector (its long polls, the view it adds the VM to) runs on its
	// own goroutine, and how many polls it makes in the window depends on
	// how the machine schedules it, not on this wait.
	d := env.Client.Stats().Sub(before)
	reads := d["RetrieveProperties"].Requests + d["RetrievePropertiesEx"].Requests
	assert.LessOrEqual(t, reads, int64(100*time.Millisecond/vcsimtest.TestPollInterval)+1, "%v", d)
	// The session's collector is live (the clone's task was waited on
	// it): the wait learns the VM's state from the values it enters the
	// view with, not from a read of its own.
	assert.Positive(t, reads+d["ModifyListView"].Requests, "the wait reads the VM or adds it to the view: %v", d)
	// And no filter of its own: the session's one filter, made once.
	assert.LessOrEqual(t, d["CreateFilter"].Requests, int64(1), "%v", d)
	assert.Zero(t, d["DestroyPropertyFilter"].Requests, "%v", d)
}

func TestStartProgramInGuest(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testCtx(t)
	c := env.Client
	vm := cloneWorker(t, ctx, env, "worker-1", "")
	spec := vctypes.GuestProgram{Path: "/bin/echo", Args: "-n ;./worker", Env: []string{"CDS_CONFIG=e30="}}

	_, err := c.StartProgramInGuest(ctx, vim.RefOf(vm), guestAuth, spec)
	require.Error(t, err, "powered off")
	assert.True(t, fault.Is(err, &types.InvalidPowerState{}), "%v", err)

	require.NoError(t, c.StartVirtualMachine(ctx, vim.RefOf(vm)))
	require.NoError(t, c.WaitForGuestOperationsReady(ctx, vim.RefOf(vm)))

	_, err = c.StartProgramInGuest(ctx, vim.RefOf(vm), &vctypes.GuestAuth{Username: "root", Password: "wrong"}, spec)
	require.Error(t, err)
	assert.True(t, fault.Is(err, &types.InvalidGuestLogin{}), "%v", err)
	assert.NotContains(t, err.Error(), "wrong")

	env.Guest.FailNext(new(types.GuestProcessNotFound))
	_, err = c.StartProgramInGuest(ctx, vim.RefOf(vm), guestAuth, spec)
	require.Error(t, err)
	assert.True(t, fault.Is(err, &types.GuestProcessNotFound{}), "%v", err)

	pid, err := c.StartProgramInGuest(ctx, vim.RefOf(vm), guestAuth, spec)
	require.NoError(t, err)
	assert.Positive(t, pid)

	calls, err := env.Guest.WaitForCalls(ctx, 4)
	require.NoError(t, err)
	require.Len(t, calls, 4)
	last := calls[3]
	assert.Equal(t, vcsimtest.GuestCall{
		VM: "worker-1", User: vcsimtest.DefaultGuestUser, ProgramPath: "/bin/echo", Arguments: "-n ;./worker",
		EnvVariables: []string{"CDS_CONFIG=e30="}, Pid: pid,
	}, last)
	assert.NotNil(t, calls[0].Fault)
	assert.Zero(t, calls[0].Pid)
}

func TestResourcePoolRuntime(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{NoTemplates: true})
	ctx := testCtx(t)
	c := env.Client
	pool, err := c.LoadResourcePool(ctx)
	require.NoError(t, err)
	assert.Equal(t, env.ResourcePoolRef(), vim.MORef(pool))

	env.SetResourcePoolRuntime(func(rt *types.ResourcePoolRuntimeInfo) {
		rt.Memory.UnreservedForVm = 8 << 30
		rt.Cpu.UnreservedForVm = 12000
		rt.Memory.OverallUsage = 1 << 30
	})
	rt, err := c.ResourcePoolRuntime(ctx, pool)
	require.NoError(t, err)
	assert.Equal(t, int64(8<<30), rt.MemoryUnreservedBytes)
	assert.Equal(t, int64(12000), rt.CPUUnreservedMHz)
	assert.Equal(t, int64(1<<30), rt.MemoryUsageBytes)
}

func TestLoadVirtualMachineEvents(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testCtx(t)
	c := env.Client
	vm := cloneWorker(t, ctx, env, "worker-1", "")
	// More than the 10 events vcsim returns without MaxCount.
	for range 6 {
		require.NoError(t, c.StartVirtualMachine(ctx, vim.RefOf(vm)))
		require.NoError(t, c.ShutdownVirtualMachine(ctx, vim.RefOf(vm)))
	}
	require.NoError(t, c.StartVirtualMachine(ctx, vim.RefOf(vm)))

	on, err := c.LoadVirtualMachineEvents(ctx, vim.RefOf(vm), "VmPoweredOnEvent")
	require.NoError(t, err)
	require.Len(t, on, 7)
	for _, e := range on {
		assert.Equal(t, "VmPoweredOnEvent", e.Type)
	}
	all, err := c.LoadVirtualMachineEvents(ctx, vim.RefOf(vm))
	require.NoError(t, err)
	assert.Greater(t, len(all), 20)
	for i := 1; i < len(all); i++ {
		assert.Less(t, all[i-1].Key, all[i].Key, "oldest first")
	}
	assert.Equal(t, "VmPoweredOnEvent", all[len(all)-1].Type, "newest last")
}
