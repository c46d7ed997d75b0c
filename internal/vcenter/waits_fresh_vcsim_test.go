package vcenter_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/mo"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// TestWaitsEndOnFreshValuesWithoutReads: after the client powers a VM on
// (the VM joins the wait collector's view with the power-on task, whose
// end is notified), its guest readiness wait and its wait for the expected
// IP end on the values the collector reports, with no read of the VM and
// no ModifyListView of their own; the guest program that follows costs no
// read of the process manager (read once per session, by the first
// program). Before, each wait read the VM once notified (two reads), the
// VM joined the view with a request of its own, and each program read the
// process manager first.
func TestWaitsEndOnFreshValuesWithoutReads(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{ReadyDelay: 300 * time.Millisecond})
	ctx := testCtx(t)
	c := env.NewClient(func(cfg *vcenter.Config) { cfg.PollInterval = slowPolls })
	c.SetTaskPollFirst(slowPolls) // a task's outcome can only come from its notification
	auth := guestAuth
	first := cloneWorker(t, ctx, env, "worker-0", "")
	require.NoError(t, c.StartVirtualMachine(ctx, vim.RefOf(first)))
	require.NoError(t, c.WaitForGuestOperationsReady(ctx, vim.RefOf(first)))
	_, err := c.StartProgramInGuest(ctx, vim.RefOf(first), auth, echoProgram())
	require.NoError(t, err)

	vm := cloneWorker(t, ctx, env, "worker-1", "10.0.0.41")
	require.NoError(t, c.StartVirtualMachine(ctx, vim.RefOf(vm)))
	before := c.Stats()
	require.NoError(t, c.WaitForGuestOperationsReady(ctx, vim.RefOf(vm)))
	ip, err := c.WaitForVirtualMachineIP(ctx, vim.RefOf(vm), "10.0.0.41")
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.41", ip)
	_, err = c.StartProgramInGuest(ctx, vim.RefOf(vm), auth, echoProgram())
	require.NoError(t, err)
	d := c.Stats().Sub(before)
	assert.Zero(t, d["RetrievePropertiesEx"].Requests, "no read: %v", requestsOf(d))
	assert.Zero(t, d["ModifyListView"].Requests, "the VM joined the view with its power-on: %v", requestsOf(d))
	assert.Equal(t, int64(1), d["StartProgramInGuest"].Requests)
}

// TestStaleValuesAreReadAgain: values the collector reported before it
// stopped polling (no wait open) may miss any change since, and a wait does
// not end on them. A VM reported ready is powered off and on from outside
// while the collector polls no more; its guest readiness wait reads it
// (not ready: its guest boots again), and returns only once the guest is
// ready. Taken as they were reported, the stale "ready" would end the wait
// at once, with the guest still booting.
func TestStaleValuesAreReadAgain(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{ReadyDelay: time.Second})
	ctx := testCtx(t)
	c := env.NewClient(func(cfg *vcenter.Config) {
		cfg.PollInterval = slowPolls
		cfg.RequestTimeout = 4 * time.Second // long polls of 2 s: the collector soon stops
	})
	vm := cloneWorker(t, ctx, env, "worker-1", "")
	require.NoError(t, c.StartVirtualMachine(ctx, vim.RefOf(vm)))
	require.NoError(t, c.WaitForGuestOperationsReady(ctx, vim.RefOf(vm)))
	require.Eventually(t, func() bool { return c.WaitCollector().Frozen }, 30*time.Second, 10*time.Millisecond,
		"the collector stops polling once no wait is open")

	admin := object.NewVirtualMachine(env.Admin.Client, vm)
	task, err := admin.PowerOff(ctx)
	require.NoError(t, err)
	require.NoError(t, task.Wait(ctx))
	task, err = admin.PowerOn(ctx)
	require.NoError(t, err)
	require.NoError(t, task.Wait(ctx))

	require.NoError(t, c.WaitForGuestOperationsReady(ctx, vim.RefOf(vm)))
	var o mo.VirtualMachine
	require.NoError(t, property.DefaultCollector(env.Admin.Client).RetrieveOne(ctx, vm, []string{"guest.guestOperationsReady"}, &o))
	require.NotNil(t, o.Guest)
	require.NotNil(t, o.Guest.GuestOperationsReady)
	assert.True(t, *o.Guest.GuestOperationsReady, "the wait returned before the guest was ready again")
}

// echoProgram is a guest program that ends at once.
func echoProgram() vctypes.GuestProgram {
	return vctypes.GuestProgram{Path: "/bin/echo", Args: "-n hi"}
}
