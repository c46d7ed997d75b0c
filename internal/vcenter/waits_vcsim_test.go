package vcenter_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/task"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// slowPolls is a poll interval no test waits out: a wait that ends within
// seconds was woken by a notification, not by a poll (its fallback
// re-read is WaitFallbackFactor times longer still).
const slowPolls = 30 * time.Second

// TestWaitsShareOneCollector: concurrent task and guest waits on many VMs
// are served by one collector of the session with one filter over one
// view, end on notifications (polls are slowPolls apart), and make and
// destroy no filter: each waited-on object is added to the view (a
// ModifyListView for one or more waits), and none is cancelled. Without
// the wait collector the guest waits would each wait out a slowPolls tick;
// with a filter per wait CreateFilter would count one per object and
// DestroyPropertyFilter as many.
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
			if err := c.StartVirtualMachine(ctx, vim.RefOf(vm)); err != nil {
				errs[i] = err
				return
			}
			if err := c.WaitForGuestOperationsReady(ctx, vim.RefOf(vm)); err != nil {
				errs[i] = err
				return
			}
			_, errs[i] = c.WaitForVirtualMachineIP(ctx, vim.RefOf(vm), "")
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	took := time.Since(start)
	assert.Less(t, took, slowPolls/3, "waits end on notifications, not on polls")
	d := c.Stats().Sub(before)
	assert.Equal(t, int64(1), d["CreatePropertyCollector"].Requests, "one collector for every wait")
	assert.Equal(t, int64(1), d["CreateListView"].Requests, "one view for every wait")
	assert.Equal(t, int64(1), d["CreateFilter"].Requests, "one filter for every wait")
	assert.Zero(t, d["DestroyPropertyFilter"].Requests, "no filter per wait")
	assert.Zero(t, d["CancelWaitForUpdates"].Requests, "no long poll cancelled for a new wait")
	// n power-on tasks and n VMs entered the view, some of them together.
	assert.LessOrEqual(t, d["ModifyListView"].Requests, int64(2*n))
	counts := c.WaitCollector()
	assert.Equal(t, 1, counts.Collectors)
	assert.Equal(t, 0, counts.Objects, "no wait left: %+v", counts)
	t.Logf("%d waits in %s: %v", 3*n, took, requestsOf(d))
}

// TestSameObjectWaitedOnTwice: two waits on one VM share its place in the
// view (one ModifyListView), both end on its power off, and a wait that
// ends first leaves the other one notified.
func TestSameObjectWaitedOnTwice(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testCtx(t)
	c := env.NewClient(func(cfg *vcenter.Config) { cfg.PollInterval = slowPolls })
	vm := cloneWorker(t, ctx, env, "worker-1", "")
	require.NoError(t, env.Client.StartVirtualMachine(ctx, vim.RefOf(vm)))

	before := c.Stats()
	first, cancelFirst := context.WithCancel(ctx)
	done := make(chan error, 3)
	go func() { done <- c.WaitForVirtualMachineShutdown(first, vim.RefOf(vm)) }()
	go func() { done <- c.WaitForVirtualMachineShutdown(ctx, vim.RefOf(vm)) }()
	go func() { done <- c.WaitForVirtualMachineShutdown(ctx, vim.RefOf(vm)) }()
	require.Eventually(t, func() bool {
		n := c.WaitCollector()
		return n.Objects == 1 && n.InView == 1 && n.Live
	}, 10*time.Second, 5*time.Millisecond, "the VM is in the view")
	cancelFirst()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(slowPolls / 3):
		t.Fatal("the cancelled wait did not end")
	}
	start := time.Now()
	task, err := object.NewVirtualMachine(env.Admin.Client, vm).PowerOff(ctx)
	require.NoError(t, err)
	require.NoError(t, task.Wait(ctx))
	for range 2 {
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(slowPolls / 3):
			t.Fatal("a wait did not see the power off")
		}
	}
	assert.Less(t, time.Since(start), slowPolls/3, "woken by a notification")
	d := c.Stats().Sub(before)
	assert.Equal(t, int64(1), d["ModifyListView"].Requests, "one place in the view for three waits: %v", requestsOf(d))
}

// TestWaitEndsWithContextAndLeavesTheView: a wait whose ctx ends returns
// ctx's error and sends nothing more; its VM leaves the view with the next
// wait's addition (one ModifyListView for both) once there are
// WaitViewStaleMax such VMs (one here). Without the removal the view
// would keep every VM ever waited on.
func TestWaitEndsWithContextAndLeavesTheView(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testCtx(t)
	c := env.NewClient(func(cfg *vcenter.Config) { cfg.PollInterval = slowPolls })
	c.SetWaitViewStaleMax(1)
	vm := cloneWorker(t, ctx, env, "worker-1", "")
	other := cloneWorker(t, ctx, env, "worker-2", "")
	require.NoError(t, c.StartVirtualMachine(ctx, vim.RefOf(vm)))
	// other is started by another client: this one's view never had it
	// (a task of this client joins its VM to the view, runTaskOn's keep),
	// so the second wait below adds it, and the ended wait's VM leaves
	// with that addition. Started by this client, other could still be
	// in the view, its task's bookkeeping not yet done when vm's wait
	// added vm, and then no addition would come.
	task, err := object.NewVirtualMachine(env.Admin.Client, other).PowerOn(ctx)
	require.NoError(t, err)
	require.NoError(t, task.Wait(ctx))

	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.WaitForVirtualMachineShutdown(wctx, vim.RefOf(vm)) }()
	require.Eventually(t, func() bool {
		n := c.WaitCollector()
		return n.Objects == 1 && n.Live && n.InView >= 1
	}, 10*time.Second, 5*time.Millisecond, "the wait's VM is in the view")
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
		assert.Contains(t, err.Error(), `wait for power off of`)
	case <-time.After(10 * time.Second):
		t.Fatal("the wait did not end with its context")
	}
	n := c.WaitCollector()
	assert.Equal(t, 0, n.Objects, "%+v", n)
	assert.GreaterOrEqual(t, n.InView, 1, "the ended wait's VM stays until the next addition: %+v", n)

	changes := n.ViewChanges
	go func() { done <- c.WaitForVirtualMachineShutdown(ctx, vim.RefOf(other)) }()
	var last vcenter.WaitCollectorCounts
	if !assert.Eventually(t, func() bool {
		last = c.WaitCollector()
		return last.Objects == 1 && last.InView == 1 && last.ViewChanges == changes+1
	}, 10*time.Second, 5*time.Millisecond) {
		t.Fatalf("the next wait's addition (one ModifyListView) did not take the ended one's VM out: %+v", last)
	}
	task, err = object.NewVirtualMachine(env.Admin.Client, other).PowerOff(ctx)
	require.NoError(t, err)
	require.NoError(t, task.Wait(ctx))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(slowPolls / 3):
		t.Fatal("the second wait did not see the power off")
	}
}

// TestWaitSurvivesSessionLoss: the session ends while a wait is open; the
// collector, its view and its filter are made again in the new session and
// the wait ends on the notification of the change made after the loss.
// Without the rebuild the wait would end only at its slowPolls poll.
func TestWaitSurvivesSessionLoss(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testCtx(t)
	c := env.NewClient(func(cfg *vcenter.Config) { cfg.PollInterval = slowPolls })
	vm := cloneWorker(t, ctx, env, "worker-1", "")
	require.NoError(t, c.StartVirtualMachine(ctx, vim.RefOf(vm)))

	done := make(chan error, 1)
	go func() { done <- c.WaitForVirtualMachineShutdown(ctx, vim.RefOf(vm)) }()
	require.Eventually(t, func() bool { n := c.WaitCollector(); return n.Objects == 1 && n.InView >= 1 && n.Live }, 10*time.Second, 5*time.Millisecond)
	env.TerminateSession(c)
	// A call of the client logs in again; the collector's next poll finds
	// its collector gone and rebuilds it.
	_, err := c.ListVirtualMachines(ctx)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		n := c.WaitCollector()
		return n.Collectors == 2 && n.Views == 2 && n.InView == 1 && n.Live
	}, 20*time.Second, 5*time.Millisecond, "the collector and its view are made again: %+v", c.WaitCollector())

	powerOffWakes(t, ctx, env, vm, done, "woken by a notification of the new collector")
	assert.GreaterOrEqual(t, c.Relogins(), int64(1))
}

// TestWaitCollectorRetiredAfterAnUnansweredPoll: a long poll that gets no
// answer (the simulator holds it past the client's request timeout)
// retires its collector, which the server may still be answering
// (destroyed watchRetireDelay later, not now), and
// the wait carries on with a new collector and view, ending on a
// notification. Without the rebuild it would end at its slowPolls poll.
func TestWaitCollectorRetiredAfterAnUnansweredPoll(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testCtx(t)
	vm := cloneWorker(t, ctx, env, "worker-1", "")
	require.NoError(t, env.Client.StartVirtualMachine(ctx, vim.RefOf(vm)))
	c := env.NewClient(func(cfg *vcenter.Config) {
		cfg.PollInterval = slowPolls
		cfg.RequestTimeout = 2 * time.Second // long polls of 1 s
	})

	env.HoldCalls("WaitForUpdatesEx", 1, 4*time.Second)
	before := c.Stats()
	done := make(chan error, 1)
	go func() { done <- c.WaitForVirtualMachineShutdown(ctx, vim.RefOf(vm)) }()
	require.Eventually(t, func() bool {
		n := c.WaitCollector()
		return n.Collectors == 2 && n.Views == 2 && n.InView == 1 && n.Live
	}, 20*time.Second, 5*time.Millisecond, "a new collector and view: %+v", c.WaitCollector())
	assert.Equal(t, 1, c.RetiredCollectors(), "the unanswered collector is retired")
	d := c.Stats().Sub(before)
	assert.Zero(t, d["DestroyPropertyCollector"].Requests, "not destroyed under a poll the server may be answering")
	assert.Equal(t, int64(1), d["DestroyView"].Requests, "its view is destroyed")

	powerOffWakes(t, ctx, env, vm, done, "woken by a notification of the new collector")
}

// TestWaitCollectorRebuildBacksOff: while vCenter refuses to make the
// collector, the wait polls and the loop tries again after the back-off,
// doubling to its bound (40 ms, 70 ms, 70 ms here, shortened from 1 s
// doubling to 30 s); once made, the collector notifies the wait. The
// attempts, timed by a recording proxy, are at least their back-off apart
// (a lower bound: a slow machine only spaces them more). Without the
// back-off the retries would follow each other at once; without the
// rebuild the wait would end at its slowPolls poll.
func TestWaitCollectorRebuildBacksOff(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testCtx(t)
	vm := cloneWorker(t, ctx, env, "worker-1", "")
	require.NoError(t, env.Client.StartVirtualMachine(ctx, vim.RefOf(vm)))
	rec := env.StartRecorder()
	c := rec.NewClient(func(cfg *vcenter.Config) { cfg.PollInterval = slowPolls })
	c.SetWaitRebuildBackoff(40*time.Millisecond, 70*time.Millisecond)

	env.RefuseCalls("CreatePropertyCollector", 3, nil)
	done := make(chan error, 1)
	go func() { done <- c.WaitForVirtualMachineShutdown(ctx, vim.RefOf(vm)) }()
	require.Eventually(t, func() bool {
		n := c.WaitCollector()
		return n.Collectors == 1 && n.InView == 1 && n.Live
	}, 20*time.Second, 5*time.Millisecond, "the collector is made at the fourth attempt: %+v", c.WaitCollector())
	backoffs := []time.Duration{40 * time.Millisecond, 70 * time.Millisecond, 70 * time.Millisecond}
	assert.Equal(t, backoffs, c.WaitCollector().Retries, "one back-off per refusal, doubling to its bound")
	var attempts []time.Time
	for _, e := range rec.Exchanges() {
		if strings.Contains(string(e.Request), "<CreatePropertyCollector") {
			attempts = append(attempts, e.Sent)
		}
	}
	require.Len(t, attempts, 4, "three refused attempts, then the one that made it")
	for i, b := range backoffs {
		assert.GreaterOrEqual(t, attempts[i+1].Sub(attempts[i]), b, "attempt %d came before its back-off", i+2)
	}

	powerOffWakes(t, ctx, env, vm, done, "woken by a notification")
}

// TestRetiredWaitCollectorDestroyedLater: a wait collector retired after
// a poll that got no answer is not destroyed at once (the server may
// still be answering it) but once WatchRetireDelay has passed, by the
// next rebuild of the collector (the watch's clock, moved forward here,
// says when). Without the delayed destroy the server would keep every
// retired collector for the session's life.
func TestRetiredWaitCollectorDestroyedLater(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testCtx(t)
	vm := cloneWorker(t, ctx, env, "worker-1", "")
	require.NoError(t, env.Client.StartVirtualMachine(ctx, vim.RefOf(vm)))
	c := env.NewClient(func(cfg *vcenter.Config) {
		cfg.PollInterval = slowPolls
		cfg.RequestTimeout = 2 * time.Second // long polls of 1 s
	})
	var ahead atomic.Int64 // how far the watch's clock is ahead of the wall clock
	c.SetWatchClock(func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) })

	before := c.Stats()
	env.HoldCalls("WaitForUpdatesEx", 1, 4*time.Second)
	done := make(chan error, 1)
	go func() { done <- c.WaitForVirtualMachineShutdown(ctx, vim.RefOf(vm)) }()
	require.Eventually(t, func() bool { n := c.WaitCollector(); return n.Collectors == 2 && n.Live }, 20*time.Second, 5*time.Millisecond,
		"a new collector after the unanswered poll: %+v", c.WaitCollector())
	require.Equal(t, 1, c.RetiredCollectors())
	assert.Zero(t, c.Stats().Sub(before)["DestroyPropertyCollector"].Requests, "not destroyed while the server may answer it")

	// The delay passes; the next rebuild (after another unanswered poll)
	// destroys the first retired collector and retires the second.
	ahead.Store(int64(vcenter.WatchRetireDelay))
	env.HoldCalls("WaitForUpdatesEx", 1, 4*time.Second)
	require.Eventually(t, func() bool { n := c.WaitCollector(); return n.Collectors == 3 && n.Live }, 20*time.Second, 5*time.Millisecond,
		"a third collector: %+v", c.WaitCollector())
	assert.Equal(t, int64(1), c.Stats().Sub(before)["DestroyPropertyCollector"].Requests, "the first retired collector is destroyed")
	assert.Equal(t, 1, c.RetiredCollectors(), "the second waits for its own delay")

	powerOffWakes(t, ctx, env, vm, done, "woken by a notification of the third collector")
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
	folder := vim.MORef(folderRef)
	a := inventory.Annotation{HatcheryName: "hatch", WorkerName: "worker-1", VMwareModelPath: vcsimtest.DefaultTemplate, Created: time.Now().UTC().Truncate(time.Second)}
	start := time.Now()
	_, err = c.CloneVirtualMachine(ctx, cloneOf(cloneSpec(t, ctx, c, a, 0, 0, ""), tpl, vim.RefOf(folder), "worker-1"))
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
	folder, pool := vim.MORef(folderRef), vim.MORef(poolRef)
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
	assert.Equal(t, vim.RefOf(ref), got)

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
	return vim.MORef(ref)
}

// TestTaskOutcomeFromItsNotification: a task's wait takes the result or
// the fault from the values the collector reported as the task ended (its
// state, result and fault come in one update), with no read of the task:
// a clone hands back its VM, a clone onto a taken name its DuplicateName
// fault, and neither sends a RetrieveProperties (the task is not polled
// while it is being added to the view: its first poll is slowPolls away).
// Without the outcome in the notification each wait would read the task
// once it ended.
func TestTaskOutcomeFromItsNotification(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testCtx(t)
	c := env.NewClient(func(cfg *vcenter.Config) { cfg.PollInterval = slowPolls })
	c.SetTaskPollFirst(slowPolls)
	tpl := object.NewVirtualMachine(env.Admin.Client, mustTemplate(t, ctx, c))
	folderRef, err := c.LoadFolder(ctx)
	require.NoError(t, err)
	poolRef, err := c.LoadResourcePool(ctx)
	require.NoError(t, err)
	folder, pool := vim.MORef(folderRef), vim.MORef(poolRef)
	spec := types.VirtualMachineCloneSpec{Location: types.VirtualMachineRelocateSpec{Pool: &pool}}
	clone := func(ctx context.Context) (*object.Task, error) {
		return tpl.Clone(ctx, object.NewFolder(env.Admin.Client, folder), "notified-clone", spec)
	}

	before := c.Stats()
	res, err := c.RunTask(ctx, time.Minute, clone)
	require.NoError(t, err)
	assert.Zero(t, c.Stats().Sub(before)["RetrievePropertiesEx"].Requests, "the result came with the notification")
	ref, ok := res.(types.ManagedObjectReference)
	require.True(t, ok, "a clone's result is the new VM: %#v", res)
	got, err := c.LoadVirtualMachine(ctx, "notified-clone")
	require.NoError(t, err)
	assert.Equal(t, vim.RefOf(ref), got)

	before = c.Stats()
	_, err = c.RunTask(ctx, time.Minute, clone)
	require.Error(t, err)
	assert.True(t, fault.Is(err, &types.DuplicateName{}), "%v", err)
	var terr task.Error
	assert.ErrorAs(t, err, &terr)
	assert.Zero(t, c.Stats().Sub(before)["RetrievePropertiesEx"].Requests, "the fault came with the notification")
}

// powerOffWakes powers vm off from outside the hatchery (the admin
// session) and fails unless the wait running on done ends without error
// well before a poll of slowPolls would have ended it: woken by a
// notification, as why says.
func powerOffWakes(t *testing.T, ctx context.Context, env *vcsimtest.Env, vm types.ManagedObjectReference, done <-chan error, why string) {
	t.Helper()
	start := time.Now()
	task, err := object.NewVirtualMachine(env.Admin.Client, vm).PowerOff(ctx)
	require.NoError(t, err)
	require.NoError(t, task.Wait(ctx))
	select {
	case err := <-done:
		require.NoError(t, err)
		assert.Less(t, time.Since(start), slowPolls/3, why)
	case <-time.After(slowPolls / 3):
		t.Fatal("the wait did not see the power off")
	}
}

// TestCloseEndsARetiredCollectorsPoll: Close while a retired wait
// collector's long poll is still in flight returns without waiting out
// its bound and logs out with it. The vCenter modelled: the connection of
// a ModifyListView breaks (no answer: the collector is retired, not
// destroyed, WatchRetireDelay) while the server keeps the collector's
// poll running (held here until the test ends, as vCenter holds a poll
// within its wait); destroying the current collector ends that one's
// poll only. Without cancelling the retired collector's poll, Close
// would wait for it until its ctx ended and then log out with the ended
// ctx: a WARN and the session left on vCenter until it expires.
func TestCloseEndsARetiredCollectorsPoll(t *testing.T) {
	t.Parallel()
	f := startHeldPoll(t, 2)
	// The second wait's addition to the view gets no answer.
	f.env.DropCalls("ModifyListView", 1)
	f.waits.add(f.vms[1])
	require.Eventually(t, func() bool {
		n := f.c.WaitCollector()
		return n.Collectors == 2 && n.InView == 2 && n.Live && f.c.RetiredCollectors() == 1
	}, 20*time.Second, 5*time.Millisecond, "the first collector retired, a second one made: %+v", f.c.WaitCollector())
	f.waits.stop()

	closeCleanly(t, f.ctx, f.env, f.c, f.logs)
}

// TestCloseEndsALostSessionsPoll: the session ends (terminated on the
// server) while the wait collector's poll is in flight and unanswered
// (held by the server until the test ends); the client logs in again.
// The collector went with the old session, so no destroy ends its poll:
// Close cancels it and logs the new session out within its bound, with
// no WARN.
func TestCloseEndsALostSessionsPoll(t *testing.T) {
	t.Parallel()
	f := startHeldPoll(t, 1)
	f.env.TerminateSession(f.c)
	_, err := f.c.ListVirtualMachines(f.ctx) // logs in again
	require.NoError(t, err)
	require.Equal(t, int64(1), f.c.Relogins())
	f.waits.stop()

	closeCleanly(t, f.ctx, f.env, f.c, f.logs)
}

// heldPoll is a simulator with powered-on workers and a client whose log
// is kept, whose wait collector's first long poll the server holds until
// the test ends.
type heldPoll struct {
	ctx   context.Context
	env   *vcsimtest.Env
	vms   []types.ManagedObjectReference
	c     *vcenter.Client
	logs  *testutil.SyncBuffer
	waits *shutdownWaits
}

// startHeldPoll starts a heldPoll with n workers, a wait on the first one
// and the collector polling for it (that poll held, released before the
// Env closes).
func startHeldPoll(t *testing.T, n int) *heldPoll {
	t.Helper()
	f := &heldPoll{env: vcsimtest.Start(t, vcsimtest.Options{}), ctx: testCtx(t), logs: &testutil.SyncBuffer{}}
	f.vms = make([]types.ManagedObjectReference, n)
	for i := range f.vms {
		f.vms[i] = cloneWorker(t, f.ctx, f.env, fmt.Sprintf("worker-%d", i), "")
		require.NoError(t, f.env.Client.StartVirtualMachine(f.ctx, vim.RefOf(f.vms[i])))
	}
	f.c = f.env.NewClient(func(cfg *vcenter.Config) {
		cfg.PollInterval = slowPolls
		cfg.RequestTimeout = time.Minute // long polls of 10 s; no request of the test times out
		cfg.Logger = slog.New(slog.NewTextHandler(f.logs, nil))
	})
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // runs before the Env's own cleanup
	f.env.HoldCallsUntil("WaitForUpdatesEx", 1, release)
	f.waits = startShutdownWaits(f.ctx, f.c)
	f.waits.add(f.vms[0])
	require.Eventually(t, func() bool { n := f.c.WaitCollector(); return n.Collectors == 1 && n.InView == 1 && n.Live },
		20*time.Second, 5*time.Millisecond, "the collector polls: %+v", f.c.WaitCollector())
	return f
}

// shutdownWaits are WaitForVirtualMachineShutdown calls that the test
// ends itself (stop) before it closes the client.
type shutdownWaits struct {
	c      *vcenter.Client
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startShutdownWaits returns an empty set of waits of c under ctx.
func startShutdownWaits(ctx context.Context, c *vcenter.Client) *shutdownWaits {
	wctx, cancel := context.WithCancel(ctx)
	return &shutdownWaits{c: c, ctx: wctx, cancel: cancel}
}

// add starts a wait on vm.
func (w *shutdownWaits) add(vm types.ManagedObjectReference) {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		_ = w.c.WaitForVirtualMachineShutdown(w.ctx, vim.RefOf(vm)) // ended by stop
	}()
}

// stop cancels the waits and joins them.
func (w *shutdownWaits) stop() {
	w.cancel()
	w.wg.Wait()
}

// closeCleanly closes c with a bound far above what Close needs (a few
// requests; the tests' held polls are held past any bound) and asserts
// that Close returned before its ctx ended (so its logout ran with a live
// ctx), logged no WARN and logged the session out.
func closeCleanly(t *testing.T, ctx context.Context, env *vcsimtest.Env, c *vcenter.Client, logs *testutil.SyncBuffer) {
	t.Helper()
	us, err := session.NewManager(c.Vim25()).UserSession(ctx)
	require.NoError(t, err)
	require.NotNil(t, us)
	mark := len(logs.String())
	cctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c.Close(cctx)
	assert.NoError(t, cctx.Err(), "Close's ctx was still live when it logged out")
	assert.NotContains(t, logs.String()[mark:], "level=WARN", "a clean close logs no WARN")
	keys, err := env.Sessions(ctx)
	require.NoError(t, err)
	assert.NotContains(t, keys, us.Key, "the session is logged out")
}
