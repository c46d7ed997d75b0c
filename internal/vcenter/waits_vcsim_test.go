package vcenter_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/task"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// slowPolls is a poll interval no test waits out: a wait that ends within
// seconds was woken by a notification, not by a poll (its fallback
// re-read is WaitFallbackFactor times longer still).
const slowPolls = 30 * time.Second

// TestWaitsShareOneCollector: concurrent task and guest waits on many VMs
// are served by one collector of the session (one filter per object), end
// on notifications (polls are slowPolls apart), and leave no filter.
// Without the wait collector the guest waits would each wait out a
// slowPolls tick; with one collector per wait CreatePropertyCollector would
// count one per wait.
func TestWaitsShareOneCollector(t *testing.T) {
	t.Parallel()
	const n = 6
	env := vcsimtest.Start(t, vcsimtest.Options{ReadyDelay: 300 * time.Millisecond})
	ctx := testCtx(t)
	c := env.NewClient(func(cfg *vcenter.Config) { cfg.PollInterval = slowPolls })
	vms := make([]types.ManagedObjectReference, n)
	for i := range vms {
		vms[i] = cloneWorker(t, ctx, env, fmt.Sprintf("worker-%d", i), fmt.Sprintf("10.0.0.%d", 30+i))
	}
	before := c.Stats()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, vm := range vms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.StartVirtualMachine(ctx, vcenter.RefOf(vm)); err != nil {
				errs[i] = err
				return
			}
			if err := c.WaitForGuestOperationsReady(ctx, vcenter.RefOf(vm)); err != nil {
				errs[i] = err
				return
			}
			_, errs[i] = c.WaitForVirtualMachineIP(ctx, vcenter.RefOf(vm), "")
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	took := time.Since(start)
	assert.Less(t, took, slowPolls/3, "waits end on notifications, not on polls")
	after := c.Stats()
	assert.Equal(t, int64(1), after["CreatePropertyCollector"].Requests-before["CreatePropertyCollector"].Requests, "one collector for every wait")
	created := after["CreateFilter"].Requests - before["CreateFilter"].Requests
	assert.GreaterOrEqual(t, created, int64(n), "a filter per waited-on VM")
	counts := c.WaitCollector()
	assert.Equal(t, 1, counts.Collectors)
	assert.Equal(t, 0, counts.Filters, "the filters go with their waits: %+v", counts)
	t.Logf("%d waits in %s: %v", 3*n, took, requestsOf(vcenter.SOAPStats(diffStats(after, before))))
}

func diffStats(after, before vcenter.SOAPStats) vcenter.SOAPStats {
	d := vcenter.SOAPStats{}
	for m, a := range after {
		if r := a.Requests - before[m].Requests; r > 0 {
			d[m] = vcenter.SOAPMethodStats{Requests: r}
		}
	}
	return d
}

// TestWaitEndsWithContextAndDropsItsFilter: a wait whose ctx ends returns
// ctx's error and its filter is destroyed (no other wait needs it).
// Without the unsubscribe the filter would stay in place.
func TestWaitEndsWithContextAndDropsItsFilter(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testCtx(t)
	c := env.NewClient(func(cfg *vcenter.Config) { cfg.PollInterval = slowPolls })
	vm := cloneWorker(t, ctx, env, "worker-1", "")
	require.NoError(t, c.StartVirtualMachine(ctx, vcenter.RefOf(vm)))

	before := c.WaitCollector()
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.WaitForVirtualMachineShutdown(wctx, vcenter.RefOf(vm)) }()
	require.Eventually(t, func() bool { return c.WaitCollector().Filters == 1 }, 10*time.Second, 5*time.Millisecond, "the wait's filter is made")
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
		assert.Contains(t, err.Error(), `wait for power off of`)
	case <-time.After(10 * time.Second):
		t.Fatal("the wait did not end with its context")
	}
	// The last wait returns once its filter is destroyed.
	n := c.WaitCollector()
	assert.Equal(t, 0, n.Filters, "%+v", n)
	assert.Equal(t, 0, n.Objects, "%+v", n)
	assert.Equal(t, before.FiltersDestroyed+1, n.FiltersDestroyed, "%+v", n)
}

// TestWaitSurvivesSessionLoss: the session ends while a wait is open; the
// collector is rebuilt in the new session and the wait ends on the
// notification of the change made after the loss. Without the rebuild the
// wait would end only at its slowPolls poll.
func TestWaitSurvivesSessionLoss(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testCtx(t)
	c := env.NewClient(func(cfg *vcenter.Config) { cfg.PollInterval = slowPolls })
	vm := cloneWorker(t, ctx, env, "worker-1", "")
	require.NoError(t, c.StartVirtualMachine(ctx, vcenter.RefOf(vm)))

	done := make(chan error, 1)
	go func() { done <- c.WaitForVirtualMachineShutdown(ctx, vcenter.RefOf(vm)) }()
	require.Eventually(t, func() bool { return c.WaitCollector().Filters == 1 }, 10*time.Second, 5*time.Millisecond)
	env.TerminateSession(c)
	// A call of the client logs in again; the collector's next poll finds
	// its collector gone and rebuilds it.
	_, err := c.ListVirtualMachines(ctx)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		n := c.WaitCollector()
		return n.Collectors == 2 && n.Filters == 1 && n.Live
	}, 20*time.Second, 5*time.Millisecond, "the collector is rebuilt: %+v", c.WaitCollector())

	start := time.Now()
	task, err := object.NewVirtualMachine(env.Admin.Client, vm).PowerOff(ctx)
	require.NoError(t, err)
	require.NoError(t, task.Wait(ctx))
	select {
	case err := <-done:
		require.NoError(t, err)
		assert.Less(t, time.Since(start), slowPolls/3, "woken by a notification of the new collector")
	case <-time.After(slowPolls / 3):
		t.Fatal("the wait did not see the power off")
	}
	assert.GreaterOrEqual(t, c.Relogins(), int64(1))
}

// TestTaskWaitFailsWithItsFault: a failed task's wait returns its fault
// (task.Error, so fault.Is finds it), not a success nor a timeout: a
// clone onto a name the folder holds fails with DuplicateName, in the
// simulator as on vCenter.
func TestTaskWaitFailsWithItsFault(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testCtx(t)
	c := env.NewClient(func(cfg *vcenter.Config) { cfg.PollInterval = slowPolls })
	cloneWorker(t, ctx, env, "worker-1", "")
	tpl, err := c.LoadVirtualMachine(ctx, vcsimtest.DefaultTemplate)
	require.NoError(t, err)
	folderRef, err := c.LoadFolder(ctx)
	require.NoError(t, err)
	folder := vcenter.MORef(folderRef)
	a := inventory.Annotation{HatcheryName: "hatch", WorkerName: "worker-1", VMwareModelPath: vcsimtest.DefaultTemplate, Created: time.Now().UTC().Truncate(time.Second)}
	start := time.Now()
	_, err = c.CloneVirtualMachine(ctx, vcenter.MORef(tpl), folder, "worker-1", cloneSpec(t, ctx, c, a, 0, 0, ""))
	require.Error(t, err)
	assert.True(t, fault.Is(err, &types.DuplicateName{}), "%v", err)
	var terr task.Error
	assert.ErrorAs(t, err, &terr)
	assert.Less(t, time.Since(start), slowPolls/3, "no poll waited out")
}

// TestCutTaskOutcomeIsLearnt: a task whose caller's context ends while it
// runs (the shutdown cutting a clone) still ends on vCenter; runTask waits
// for its outcome (taskOutcomeGrace) and hands back the clone's VM, so the
// caller cleans it up. Before, the cut wait returned the context's error
// and the VM vCenter made was left powered on, with no worker, until its
// registration TTL (TestRestartDuringSpawnBurst's job waited behind it).
func TestCutTaskOutcomeIsLearnt(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testCtx(t)
	c := env.NewClient(func(cfg *vcenter.Config) { cfg.PollInterval = slowPolls })
	tpl := object.NewVirtualMachine(env.Admin.Client, mustTemplate(t, ctx, c))
	folderRef, err := c.LoadFolder(ctx)
	require.NoError(t, err)
	poolRef, err := c.LoadResourcePool(ctx)
	require.NoError(t, err)
	folder, pool := vcenter.MORef(folderRef), vcenter.MORef(poolRef)
	spec := types.VirtualMachineCloneSpec{Location: types.VirtualMachineRelocateSpec{Pool: &pool}}
	cut, cancel := context.WithCancel(ctx)
	res, err := c.RunTask(cut, time.Minute, func(ctx context.Context) (*object.Task, error) {
		task, err := tpl.Clone(ctx, object.NewFolder(env.Admin.Client, folder), "cut-clone", spec)
		cancel() // the caller gives up once the task runs
		return task, err
	})
	require.NoError(t, err, "the task ended within the grace: its outcome, not the cut")
	ref, ok := res.(types.ManagedObjectReference)
	require.True(t, ok, "a clone's result is the new VM: %#v", res)
	got, err := c.LoadVirtualMachine(ctx, "cut-clone")
	require.NoError(t, err)
	assert.Equal(t, vcenter.RefOf(ref), got)

	// A task that fails after the cut returns its own fault.
	cut, cancel = context.WithCancel(ctx)
	_, err = c.RunTask(cut, time.Minute, func(ctx context.Context) (*object.Task, error) {
		task, err := tpl.Clone(ctx, object.NewFolder(env.Admin.Client, folder), "cut-clone", spec)
		cancel()
		return task, err
	})
	require.Error(t, err)
	assert.True(t, fault.Is(err, &types.DuplicateName{}), "%v", err)
}

// mustTemplate is the default template's reference.
func mustTemplate(t *testing.T, ctx context.Context, c *vcenter.Client) types.ManagedObjectReference {
	t.Helper()
	ref, err := c.LoadVirtualMachine(ctx, vcsimtest.DefaultTemplate)
	require.NoError(t, err)
	return vcenter.MORef(ref)
}
