package vcenter_test

// Simulator tests of the incremental inventory's port methods: probe,
// retrieve by reference and the VM change watch (govmomi_probe.go,
// govmomi_watch.go). Every wait polls with a ticker under a context
// deadline, so a simulator deadlock fails a test instead of hanging it.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// watchTick is the poll period of the tests' waits.
const watchTick = 5 * time.Millisecond

// watchCtx bounds a watch test: long enough for a -race run on a busy
// 2-core machine, short enough that a deadlock fails the test.
func watchCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// pollUntil calls cond every watchTick until it is true or ctx ends.
func pollUntil(ctx context.Context, cond func() bool) error {
	tick := time.NewTicker(watchTick)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// nudge makes a registry update that is no VM's: vcsim v0.56.0 computes
// the "enter" updates of a filter only when some inventory update reaches
// the collector after the filter was made (a quiet simulator never
// reports them; vCenter does at the next WaitForUpdatesEx). Rewriting the
// pool's runtime unchanged is such an update. The tests' simulator already
// reports a new filter's objects at the next poll (vcsimtest's
// collectors.go) and passes a collector only the changes its filters can
// report (pollscope.go), so this update no longer reaches a watch's
// collector there; it is kept for the pinned simulator's behaviour.
func nudge(env *vcsimtest.Env) {
	env.SetResourcePoolRuntime(func(*types.ResourcePoolRuntimeInfo) {})
}

// changeOf returns the value of property name in u's change set.
func changeOf(u types.ObjectUpdate, name string) (any, bool) {
	for _, ch := range u.ChangeSet {
		if ch.Name == name {
			return ch.Val, true
		}
	}
	return nil, false
}

// refsOf returns the references of vms.
func refsOf(vms []mo.VirtualMachine) []types.ManagedObjectReference {
	refs := make([]types.ManagedObjectReference, len(vms))
	for i, vm := range vms {
		refs[i] = vm.Self
	}
	return refs
}

// drainEnters polls the watch (nudging the simulator once) until every
// ref entered, and returns everything read.
func drainEnters(t *testing.T, ctx context.Context, env *vcsimtest.Env, c *vcenter.Client, refs []types.ManagedObjectReference) []types.ObjectUpdate {
	t.Helper()
	nudge(env)
	entered := map[types.ManagedObjectReference]bool{}
	var all []types.ObjectUpdate
	var err error
	perr := pollUntil(ctx, func() bool {
		var ups []types.ObjectUpdate
		ups, err = c.VirtualMachineObjectUpdates(ctx)
		if err != nil {
			return true
		}
		all = append(all, ups...)
		for _, u := range ups {
			if u.Kind == types.ObjectUpdateKindEnter {
				entered[u.Obj] = true
			}
		}
		for _, ref := range refs {
			if !entered[ref] {
				return false
			}
		}
		return true
	})
	require.NoError(t, err)
	require.NoError(t, perr, "every watched vm enters")
	return all
}

func TestProbeInventoryMatchesListing(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{ForeignVMs: 250})
	ctx := watchCtx(t)
	c := env.Client
	cloneWorker(t, ctx, env, "worker-1", "")
	poolRef, err := c.LoadResourcePool(ctx)
	require.NoError(t, err)
	pool := vim.MORef(poolRef)

	var want types.ResourcePoolRuntimeInfo
	env.SetResourcePoolRuntime(func(rt *types.ResourcePoolRuntimeInfo) {
		rt.Memory.UnreservedForVm = 8 << 30
		rt.Memory.OverallUsage = 3 << 30
		rt.Cpu.UnreservedForVm = 12345
		want = *rt
	})

	vms, err := c.ListVirtualMachineObjects(ctx)
	require.NoError(t, err)
	require.Len(t, vms, 252, "250 foreign vms, the template and the worker")

	before := c.Stats()
	refs, rt, err := c.ProbeInventoryRefs(ctx, &pool)
	require.NoError(t, err)
	delta := c.Stats().Sub(before)
	assert.ElementsMatch(t, refsOf(vms), refs, "the probe sees every vm and template the listing does")
	require.NotNil(t, rt)
	assert.Equal(t, want, *rt)
	require.Len(t, delta, 1, "%v", delta)
	assert.Equal(t, int64(1), delta["RetrievePropertiesEx"].Requests, "one round trip")
	t.Logf("ProbeInventory at %d vms: 1 request, %d bytes sent, %d bytes received",
		len(refs), delta["RetrievePropertiesEx"].RequestBytes, delta["RetrievePropertiesEx"].ResponseBytes)

	refs, rt, err = c.ProbeInventoryRefs(ctx, nil)
	require.NoError(t, err)
	assert.Nil(t, rt, "no pool, no runtime")
	assert.ElementsMatch(t, refsOf(vms), refs)

	// After a session loss the view is made again, once.
	env.TerminateSession(c)
	refs, _, err = c.ProbeInventoryRefs(ctx, &pool)
	require.NoError(t, err)
	assert.Len(t, refs, 252)
}

func TestRetrieveVirtualMachinesByReference(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{ForeignVMs: 3})
	ctx := watchCtx(t)
	c := env.Client
	cloneWorker(t, ctx, env, "worker-1", "")
	doomed := cloneWorker(t, ctx, env, "worker-2", "")

	listed, err := c.ListVirtualMachineObjects(ctx)
	require.NoError(t, err)
	require.Len(t, listed, 6)
	got, err := c.RetrieveVirtualMachineObjects(ctx, refsOf(listed))
	require.NoError(t, err)
	assert.ElementsMatch(t, listed, got, "the same properties as the listing")

	require.NoError(t, c.DestroyVirtualMachine(ctx, vim.RefOf(doomed)))
	got, err = c.RetrieveVirtualMachineObjects(ctx, refsOf(listed))
	require.NoError(t, err, "a destroyed vm is left out, not an error")
	assert.Len(t, got, 5)
	assert.NotContains(t, refsOf(got), doomed.Reference())
	for _, vm := range got {
		if vm.Name == "worker-1" {
			v := inventory.VMFromInfo(vim.VMInfoOf(vm))
			require.NotNil(t, v.Annotation)
			assert.Equal(t, "worker-1", v.Annotation.WorkerName)
		}
	}

	got, err = c.RetrieveVirtualMachineObjects(ctx, []types.ManagedObjectReference{doomed.Reference()})
	require.NoError(t, err)
	assert.Empty(t, got)

	before := c.Stats()
	got, err = c.RetrieveVirtualMachineObjects(ctx, nil)
	require.NoError(t, err)
	assert.Nil(t, got)
	assert.Empty(t, c.Stats().Sub(before), "no refs, no request")
}

func TestWatchIdleChangesNeverBlock(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{ForeignVMs: 5})
	ctx := watchCtx(t)
	c := env.Client

	_, err := c.VirtualMachineObjectUpdates(ctx)
	require.ErrorIs(t, err, vctypes.ErrWatchLost, "no watch yet")
	require.ErrorIs(t, c.WatchVirtualMachineRefs(ctx, nil), vctypes.ErrWatchLost)

	before := c.Stats()
	require.NoError(t, c.ResetVirtualMachineWatch(ctx))
	d := c.Stats().Sub(before)
	assert.Equal(t, int64(1), d["CreatePropertyCollector"].Requests)
	assert.Equal(t, int64(1), d["WaitForUpdatesEx"].Requests)

	refs, _, err := c.ProbeInventoryRefs(ctx, nil)
	require.NoError(t, err)
	require.Len(t, refs, 6)
	before = c.Stats()
	require.NoError(t, c.WatchVirtualMachineRefs(ctx, refs))
	require.NoError(t, c.WatchVirtualMachineRefs(ctx, refs), "watched vms are skipped")
	d = c.Stats().Sub(before)
	assert.Equal(t, soapOnly("CreateFilter", 1), requestsOf(d), "one filter, none for vms already watched")

	all := drainEnters(t, ctx, env, c, refs)
	assert.Len(t, all, 6)
	for _, u := range all {
		for _, p := range vim.VMWatchProperties {
			if p == "config.changeVersion" {
				continue // the fixture vms have none
			}
			_, ok := changeOf(u, p)
			assert.True(t, ok, "enter of %s carries %s", u.Obj.Value, p)
		}
	}

	for range 3 {
		before = c.Stats()
		ups, err := c.VirtualMachineObjectUpdates(ctx)
		require.NoError(t, err)
		assert.Empty(t, ups, "nothing changed")
		d = c.Stats().Sub(before)
		assert.Equal(t, soapOnly("WaitForUpdatesEx", 1), requestsOf(d))
		t.Logf("idle VirtualMachineChanges: %d request, %d bytes sent, %d bytes received",
			d["WaitForUpdatesEx"].Requests, d["WaitForUpdatesEx"].RequestBytes, d["WaitForUpdatesEx"].ResponseBytes)
	}

	// A reset destroys the previous collector.
	before = c.Stats()
	require.NoError(t, c.ResetVirtualMachineWatch(ctx))
	d = c.Stats().Sub(before)
	assert.Equal(t, int64(1), d["DestroyPropertyCollector"].Requests)
	ups, err := c.VirtualMachineObjectUpdates(ctx)
	require.NoError(t, err)
	assert.Empty(t, ups, "a new watch is empty")
}

// soapOnly is a request count map with one method.
func soapOnly(method string, n int64) map[string]int64 { return map[string]int64{method: n} }

// requestsOf keeps the request counts of a stats delta.
func requestsOf(s vcenter.SOAPStats) map[string]int64 {
	out := map[string]int64{}
	for k, m := range s {
		if m.Requests != 0 {
			out[k] = m.Requests
		}
	}
	return out
}

func TestWatchLostWithSession(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := watchCtx(t)
	c := env.Client
	vm := cloneWorker(t, ctx, env, "worker-1", "")
	ref := vm.Reference()

	require.NoError(t, c.ResetVirtualMachineWatch(ctx))
	require.NoError(t, c.WatchVirtualMachineRefs(ctx, []types.ManagedObjectReference{ref}))
	drainEnters(t, ctx, env, c, []types.ManagedObjectReference{ref})

	env.TerminateSession(c)
	_, err := c.VirtualMachineObjectUpdates(ctx)
	require.Error(t, err)
	assert.ErrorIs(t, err, vctypes.ErrWatchLost, "%v", err)
	assert.Contains(t, err.Error(), `datacenter "DC0"`)
	assert.Equal(t, int64(1), c.Relogins())
	_, err = c.VirtualMachineObjectUpdates(ctx)
	assert.ErrorIs(t, err, vctypes.ErrWatchLost, "the lost watch stays lost")
	assert.ErrorIs(t, c.WatchVirtualMachineRefs(ctx, []types.ManagedObjectReference{ref}), vctypes.ErrWatchLost)

	// Reset, watch again: it works in the new session.
	require.NoError(t, c.ResetVirtualMachineWatch(ctx))
	require.NoError(t, c.WatchVirtualMachineRefs(ctx, []types.ManagedObjectReference{ref}))
	drainEnters(t, ctx, env, c, []types.ManagedObjectReference{ref})
	require.NoError(t, c.RenameVirtualMachine(ctx, vim.RefOf(vm), "worker-1b"))
	var renamed bool
	require.NoError(t, pollUntil(ctx, func() bool {
		ups, err := c.VirtualMachineObjectUpdates(ctx)
		require.NoError(t, err)
		for _, u := range ups {
			if v, ok := changeOf(u, "name"); ok && u.Obj == ref && u.Kind == types.ObjectUpdateKindModify && v == "worker-1b" {
				renamed = true
			}
		}
		return renamed
	}))
}

func TestWatchUnwatchDestroysFilter(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := watchCtx(t)
	c := env.Client
	a := cloneWorker(t, ctx, env, "worker-a", "")
	b := cloneWorker(t, ctx, env, "worker-b", "")
	k := cloneWorker(t, ctx, env, "worker-c", "")
	ra, rb, rc := a.Reference(), b.Reference(), k.Reference()

	require.NoError(t, c.ResetVirtualMachineWatch(ctx))
	require.NoError(t, c.WatchVirtualMachineRefs(ctx, []types.ManagedObjectReference{ra, rb})) // filter 1
	require.NoError(t, c.WatchVirtualMachineRefs(ctx, []types.ManagedObjectReference{rc}))     // filter 2
	drainEnters(t, ctx, env, c, []types.ManagedObjectReference{ra, rb, rc})

	unknown := types.ManagedObjectReference{Type: "VirtualMachine", Value: "vm-nope"}
	before := c.Stats()
	require.NoError(t, c.UnwatchVirtualMachineRefs(ctx, []types.ManagedObjectReference{ra, unknown}))
	assert.Empty(t, c.Stats().Sub(before), "filter 1 still lists worker-b: no request")
	require.NoError(t, c.UnwatchVirtualMachineRefs(ctx, []types.ManagedObjectReference{rb}))
	assert.Equal(t, soapOnly("DestroyPropertyFilter", 1), requestsOf(c.Stats().Sub(before)), "filter 1 is empty: destroyed")
	before = c.Stats()
	require.NoError(t, c.UnwatchVirtualMachineRefs(ctx, []types.ManagedObjectReference{ra, rb, unknown}))
	assert.Empty(t, c.Stats().Sub(before), "unknown vms cost nothing")

	// Changes of the unwatched vms are not reported; the other filter's are.
	require.NoError(t, c.RenameVirtualMachine(ctx, vim.RefOf(a), "worker-a2"))
	require.NoError(t, c.StartVirtualMachine(ctx, vim.RefOf(b)))
	require.NoError(t, c.RenameVirtualMachine(ctx, vim.RefOf(k), "worker-c2"))
	var all []types.ObjectUpdate
	require.NoError(t, pollUntil(ctx, func() bool {
		ups, err := c.VirtualMachineObjectUpdates(ctx)
		require.NoError(t, err)
		all = append(all, ups...)
		return slices.ContainsFunc(ups, func(u types.ObjectUpdate) bool {
			v, ok := changeOf(u, "name")
			return u.Obj == rc && ok && v == "worker-c2"
		})
	}))
	for _, u := range all {
		assert.Equal(t, rc, u.Obj, "only worker-c is watched: %+v", u)
	}

	// Watching a vm again after an unwatch works.
	require.NoError(t, c.WatchVirtualMachineRefs(ctx, []types.ManagedObjectReference{ra}))
	all = drainEnters(t, ctx, env, c, []types.ManagedObjectReference{ra})
	require.NotEmpty(t, all)
	v, _ := changeOf(all[0], "name")
	assert.Equal(t, "worker-a2", v)
}

func TestWatchAbandonedPollRetiresTheCollector(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{NoTemplates: true})
	ctx := watchCtx(t)
	c := env.Client
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c.SetWatchClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	refs := env.AddForeignVMs("abandon-", 3)
	require.NoError(t, c.ResetVirtualMachineWatch(ctx))
	require.NoError(t, c.WatchVirtualMachineRefs(ctx, refs))

	// A poll with a version takes at least one 20 ms simulator tick: a
	// 1 ms deadline gets no answer while the simulator still computes it.
	short, cancel := context.WithTimeout(ctx, time.Millisecond)
	_, err := c.VirtualMachineObjectUpdates(short)
	cancel()
	require.Error(t, err)
	assert.NotErrorIs(t, err, vctypes.ErrWatchLost, "a poll without an answer keeps the watch")

	before := c.Stats()
	require.NoError(t, c.ResetVirtualMachineWatch(ctx))
	assert.Zero(t, c.Stats().Sub(before)["DestroyPropertyCollector"].Requests,
		"a collector whose poll got no answer is not destroyed under the simulator")
	_, err = c.VirtualMachineObjectUpdates(ctx)
	require.NoError(t, err, "the new watch works")

	mu.Lock()
	now = now.Add(vcenter.WatchRetireDelay)
	mu.Unlock()
	before = c.Stats()
	require.NoError(t, c.ResetVirtualMachineWatch(ctx))
	assert.Equal(t, int64(2), c.Stats().Sub(before)["DestroyPropertyCollector"].Requests,
		"the current collector, and the retired one once its delay passed")
	before = c.Stats()
	require.NoError(t, c.ResetVirtualMachineWatch(ctx))
	assert.Equal(t, int64(1), c.Stats().Sub(before)["DestroyPropertyCollector"].Requests,
		"a retired collector is destroyed once")
}

func TestWatchPagesTruncatedUpdates(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{NoTemplates: true})
	ctx := watchCtx(t)
	c := env.Client
	refs := env.AddForeignVMs("many-", 250)

	require.NoError(t, c.ResetVirtualMachineWatch(ctx))
	require.NoError(t, c.WatchVirtualMachineRefs(ctx, refs))
	nudge(env)
	before := c.Stats()
	ups, err := c.VirtualMachineObjectUpdates(ctx)
	require.NoError(t, err)
	d := c.Stats().Sub(before)
	require.Len(t, ups, 250, "every enter in one call")
	entered := map[types.ManagedObjectReference]bool{}
	for _, u := range ups {
		assert.Equal(t, types.ObjectUpdateKindEnter, u.Kind)
		entered[u.Obj] = true
	}
	assert.Len(t, entered, 250)
	assert.Equal(t, soapOnly("WaitForUpdatesEx", 3), requestsOf(d), "vcsim pages at 100 object updates: 100+100+50")
	t.Logf("250 enters: %d requests, %d bytes received", d["WaitForUpdatesEx"].Requests, d["WaitForUpdatesEx"].ResponseBytes)

	ups, err = c.VirtualMachineObjectUpdates(ctx)
	require.NoError(t, err)
	assert.Empty(t, ups)
}

// watchObserver is the inventory's side of the convergence test: one
// goroutine probes, reads changes, watches new vms and unwatches gone
// ones, and records what it saw.
type watchObserver struct {
	mu      sync.Mutex
	log     []types.ObjectUpdate
	watched map[types.ManagedObjectReference]bool
	entered map[types.ManagedObjectReference]bool
	probed  map[types.ManagedObjectReference]bool // the last probe
	absent  map[types.ManagedObjectReference]int  // watched, absent from that many probes in a row
	begun   int                                   // refreshes (step) begun
	steps   int                                   // refreshes done: their changes read, their probe recorded
	err     error
}

func newWatchObserver() *watchObserver {
	return &watchObserver{
		watched: map[types.ManagedObjectReference]bool{},
		entered: map[types.ManagedObjectReference]bool{},
		probed:  map[types.ManagedObjectReference]bool{},
		absent:  map[types.ManagedObjectReference]int{},
	}
}

// run steps every watchTick until stop is closed, ctx ends or a step
// fails.
func (o *watchObserver) run(ctx context.Context, c *vcenter.Client, stop <-chan struct{}) {
	tick := time.NewTicker(watchTick)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			o.fail(ctx.Err())
			return
		case <-tick.C:
		}
		if err := o.step(ctx, c); err != nil {
			o.fail(err)
			return
		}
	}
}

// fail records the error that ended the observer.
func (o *watchObserver) fail(err error) {
	o.mu.Lock()
	o.err = err
	o.mu.Unlock()
}

// step is one refresh of the observer, in the inventory's order
// (internal/inventory's watchStep): it reads the changes, then probes,
// watches new vms and unwatches gone ones. The order matters: once the
// watch's filter on the scope's views has reported, the probe answers from
// the views' changes the watch read (govmomi_members.go), so a probe made
// before the read answered what the previous refresh read, and a vm that
// left the views meanwhile stayed in the observer's last probe while its
// log already held its removal (TestWatchObserverLastProbeFollowsItsLog).
func (o *watchObserver) step(ctx context.Context, c *vcenter.Client) error {
	o.mu.Lock()
	o.begun++
	o.mu.Unlock()
	ups, err := c.VirtualMachineObjectUpdates(ctx)
	if err != nil {
		return err
	}
	refs, _, err := c.ProbeInventoryRefs(ctx, nil)
	if err != nil {
		return err
	}
	probed := map[types.ManagedObjectReference]bool{}
	var add, gone []types.ManagedObjectReference
	o.mu.Lock()
	o.log = append(o.log, ups...)
	for _, u := range ups {
		if u.Kind == types.ObjectUpdateKindEnter {
			o.entered[u.Obj] = true
		}
	}
	for _, ref := range refs {
		probed[ref] = true
		if !o.watched[ref] {
			add = append(add, ref)
		}
	}
	for ref := range o.watched {
		if probed[ref] {
			delete(o.absent, ref)
			continue
		}
		// Two probes in a row: the changes read between them
		// hold its leave if it had entered (the simulator's
		// container view and collector hear of a removal in
		// either order, microseconds apart, so the read before
		// the first may hold the view's change alone).
		if o.absent[ref]++; o.absent[ref] >= 2 {
			gone = append(gone, ref)
		}
	}
	o.mu.Unlock()
	// As the inventory does: new vms are watched, vms the probe
	// no longer shows are unwatched.
	if err := c.WatchVirtualMachineRefs(ctx, add); err != nil {
		return err
	}
	if err := c.UnwatchVirtualMachineRefs(ctx, gone); err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.probed = probed
	for _, ref := range add {
		o.watched[ref] = true
	}
	for _, ref := range gone {
		delete(o.watched, ref)
		delete(o.absent, ref)
	}
	o.steps++
	return nil
}

func (o *watchObserver) mark() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.log)
}

// begunCount is how many refreshes the observer has begun.
func (o *watchObserver) begunCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.begun
}

// stepCount is how many refreshes the observer has done.
func (o *watchObserver) stepCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.steps
}

func (o *watchObserver) failed() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

func (o *watchObserver) isWatched(ref types.ManagedObjectReference) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.watched[ref]
}

// seen tells whether an update of kind for ref, carrying name = val when
// name is set (any value when val is nil), was read since mark.
func (o *watchObserver) seen(mark int, ref types.ManagedObjectReference, kind types.ObjectUpdateKind, name string, val any) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, u := range o.log[mark:] {
		if u.Obj != ref || u.Kind != kind {
			continue
		}
		if name == "" {
			return true
		}
		if v, ok := changeOf(u, name); ok && (val == nil || v == val) {
			return true
		}
	}
	return false
}

// goneOrLeft: a destroyed vm left the watch, or it never entered and the
// last probe no longer shows it (the probe follows the changes read with
// it: see step).
func (o *watchObserver) goneOrLeft(mark int, ref types.ManagedObjectReference) bool {
	if o.seen(mark, ref, types.ObjectUpdateKindLeave, "", nil) {
		return true
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return !o.entered[ref] && len(o.probed) > 0 && !o.probed[ref]
}

// model replays the log: the watched properties of every vm present.
func (o *watchObserver) model() map[types.ManagedObjectReference]map[string]any {
	o.mu.Lock()
	defer o.mu.Unlock()
	m := map[types.ManagedObjectReference]map[string]any{}
	for _, u := range o.log {
		switch u.Kind {
		case types.ObjectUpdateKindEnter:
			m[u.Obj] = map[string]any{}
			fallthrough
		case types.ObjectUpdateKindModify:
			if m[u.Obj] == nil {
				m[u.Obj] = map[string]any{}
			}
			for _, ch := range u.ChangeSet {
				m[u.Obj][ch.Name] = ch.Val
			}
		case types.ObjectUpdateKindLeave:
			delete(m, u.Obj)
		}
	}
	return m
}

// watchTruth is the simulator's state of the watched properties, read
// through a listing.
func watchTruth(ctx context.Context, c *vcenter.Client) (map[types.ManagedObjectReference]map[string]any, error) {
	vms, err := c.ListVirtualMachineObjects(ctx)
	if err != nil {
		return nil, err
	}
	out := map[types.ManagedObjectReference]map[string]any{}
	for _, vm := range vms {
		p := map[string]any{"name": vm.Name, "runtime.powerState": vm.Runtime.PowerState}
		if vm.Config != nil {
			p["config.template"] = vm.Config.Template
			p["config.changeVersion"] = vm.Config.ChangeVersion
		}
		out[vm.Self] = p
	}
	return out, nil
}

// modelMatches compares the replayed watch with the truth on the
// properties both hold.
func modelMatches(model, truth map[types.ManagedObjectReference]map[string]any) error {
	for ref := range model {
		if _, ok := truth[ref]; !ok {
			return fmt.Errorf("%s in the model, not in the simulator", ref.Value)
		}
	}
	for ref, want := range truth {
		got, ok := model[ref]
		if !ok {
			return fmt.Errorf("%s (%v) missing from the model", ref.Value, want["name"])
		}
		for k, w := range want {
			g, ok := got[k]
			if (!ok || g == nil) && k == "config.changeVersion" && w == "" {
				continue // the fixture vms have none
			}
			if g != w {
				return fmt.Errorf("%s %s: watch says %v, simulator %v", ref.Value, k, g, w)
			}
		}
	}
	return nil
}

func TestWatchConvergesUnderConcurrentChanges(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{ForeignVMs: 5})
	// Liveness only: about thirty simulator tasks and as many watch polls
	// under -race, seconds alone and minutes on a loaded machine, so the
	// bound is the test binary's (testutil.PatienceContext), not a fixed
	// one; a stuck watch still fails with what it was waiting for.
	ctx := testutil.PatienceContext(t)
	c := env.Client             // the inventory's client: probe and watch
	ops := env.NewClient(nil)   // the operations' client
	const stepped, burst = 4, 3 // clones checked op by op, clones in a burst

	tpl, err := ops.LoadVirtualMachine(ctx, vcsimtest.DefaultTemplate)
	require.NoError(t, err)
	folderRef, err := ops.LoadFolder(ctx)
	require.NoError(t, err)
	folder := vim.MORef(folderRef)
	specs := make([]vctypes.Clone, stepped+burst+1)
	for i := range specs {
		a := inventory.Annotation{HatcheryName: "hatch", WorkerName: fmt.Sprintf("w-%d", i), Created: time.Now().UTC().Truncate(time.Second)}
		specs[i] = cloneSpec(t, ctx, ops, a, 0, 0, "")
	}

	// Start as the inventory does: reset, probe, watch. Both clients make
	// their container view now: vcsim v0.56.0's CreateContainerView walks
	// the VM folder unlocked, a data race with a clone adding to it.
	require.NoError(t, c.ResetVirtualMachineWatch(ctx))
	refs, _, err := c.ProbeInventoryRefs(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, c.WatchVirtualMachineRefs(ctx, refs))
	_, err = watchTruth(ctx, ops)
	require.NoError(t, err)
	obs := newWatchObserver()
	for _, ref := range refs {
		obs.watched[ref] = true
	}
	stop := make(chan struct{})
	stopObserver := sync.OnceFunc(func() { close(stop) })
	var wg sync.WaitGroup
	t.Cleanup(func() { // before ctx is cancelled and the simulator closed
		stopObserver()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		obs.run(ctx, c, stop)
	}()

	// wait polls until cond holds, the observer fails or ctx ends.
	wait := func(what string, cond func() bool) error {
		var oerr error
		err := pollUntil(ctx, func() bool {
			if oerr = obs.failed(); oerr != nil {
				return true
			}
			return cond()
		})
		if oerr != nil {
			return fmt.Errorf("%s: observer: %w", what, oerr)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}

	var (
		destroyed []types.ManagedObjectReference
		destroyAt []int
	)
	mutate := func() error {
		// Stepped: every operation's change must show up before the next.
		for i := range stepped {
			name := fmt.Sprintf("w-%d", i)
			cref, err := ops.CloneVirtualMachine(ctx, cloneOf(specs[i], tpl, vim.RefOf(folder), name))
			ref := vim.MORef(cref)
			if err != nil {
				return err
			}
			if err := wait(name+" watched after its clone", func() bool { return obs.isWatched(ref) }); err != nil {
				return err
			}
			vm := ref

			m := obs.mark()
			a := inventory.Annotation{HatcheryName: "hatch", WorkerName: name, JobID: fmt.Sprint(100 + i)}
			rec := a.Record()
			if err := ops.ReconfigureVirtualMachine(ctx, vim.RefOf(vm), vctypes.ConfigChange{Record: &rec, Growth: &vctypes.Growth{Flavor: "three", CPUs: 3, MemoryMB: 32}}); err != nil {
				return err
			}
			if err := wait(name+" reconfigure", func() bool {
				return obs.seen(m, ref, types.ObjectUpdateKindModify, "config.changeVersion", nil)
			}); err != nil {
				return err
			}

			m = obs.mark()
			if err := ops.RenameVirtualMachine(ctx, vim.RefOf(vm), name+"-renamed"); err != nil {
				return err
			}
			if err := wait(name+" rename", func() bool {
				return obs.seen(m, ref, types.ObjectUpdateKindModify, "name", name+"-renamed")
			}); err != nil {
				return err
			}

			for _, st := range []types.VirtualMachinePowerState{types.VirtualMachinePowerStatePoweredOn, types.VirtualMachinePowerStatePoweredOff} {
				m = obs.mark()
				if st == types.VirtualMachinePowerStatePoweredOn {
					err = ops.StartVirtualMachine(ctx, vim.RefOf(vm))
				} else {
					err = ops.ShutdownVirtualMachine(ctx, vim.RefOf(vm))
				}
				if err != nil {
					return err
				}
				if err := wait(fmt.Sprintf("%s %s", name, st), func() bool {
					return obs.seen(m, ref, types.ObjectUpdateKindModify, "runtime.powerState", st)
				}); err != nil {
					return err
				}
			}

			if i%2 == 1 {
				m = obs.mark()
				if err := ops.DestroyVirtualMachine(ctx, vim.RefOf(vm)); err != nil {
					return err
				}
				destroyed, destroyAt = append(destroyed, ref), append(destroyAt, m)
				if err := wait(name+" destroy", func() bool { return obs.goneOrLeft(m, ref) }); err != nil {
					return err
				}
			}
		}

		// A clone destroyed at once: it may never enter the watch.
		m := obs.mark()
		cref, err := ops.CloneVirtualMachine(ctx, cloneOf(specs[stepped+burst], tpl, vim.RefOf(folder), "ephemeral"))
		ref := vim.MORef(cref)
		if err != nil {
			return err
		}
		if err := ops.DestroyVirtualMachine(ctx, vim.RefOf(ref)); err != nil {
			return err
		}
		destroyed, destroyAt = append(destroyed, ref), append(destroyAt, m)

		// Burst: operations back to back, only convergence is checked.
		var vms []types.ManagedObjectReference
		for i := stepped; i < stepped+burst; i++ {
			cref, err := ops.CloneVirtualMachine(ctx, cloneOf(specs[i], tpl, vim.RefOf(folder), fmt.Sprintf("b-%d", i)))
			ref := vim.MORef(cref)
			if err != nil {
				return err
			}
			vms = append(vms, ref)
		}
		for i, ref := range vms {
			vm := ref
			if err := ops.RenameVirtualMachine(ctx, vim.RefOf(vm), fmt.Sprintf("b-%d-renamed", i)); err != nil {
				return err
			}
			if err := ops.StartVirtualMachine(ctx, vim.RefOf(vm)); err != nil {
				return err
			}
		}
		for i, ref := range vms {
			vm := ref
			if i == 0 {
				continue // stays on
			}
			if err := ops.ShutdownVirtualMachine(ctx, vim.RefOf(vm)); err != nil {
				return err
			}
			if i == 2 {
				destroyed, destroyAt = append(destroyed, ref), append(destroyAt, obs.mark())
				if err := ops.DestroyVirtualMachine(ctx, vim.RefOf(vm)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	errc := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		errc <- mutate()
	}()
	merr := <-errc
	require.NoError(t, merr)
	mutated := time.Now()

	// Convergence: the watch's replayed model equals the simulator. The
	// last clones may be watched after the last registry update: each
	// round nudges the simulator so that their enters come (see nudge).
	// A round waits for a refresh of the observer: the model changes only
	// then, and comparing again meanwhile only takes the simulator from
	// the watch it waits for. The first round waits for a refresh begun
	// after the last operation returned: one begun before may have read
	// the changes and probed before the last destroy, and the assertions
	// below read the observer's last probe.
	var last, mismatch error
	from := obs.begunCount()
	round := -1
	err = pollUntil(ctx, func() bool {
		if last = obs.failed(); last != nil {
			return true
		}
		n := obs.stepCount()
		if n <= from || n == round {
			return false
		}
		round = n
		nudge(env)
		truth, err := watchTruth(ctx, ops)
		if err != nil {
			last = err
			return true
		}
		mismatch = modelMatches(obs.model(), truth)
		return mismatch == nil
	})
	stopObserver()
	wg.Wait()
	require.NoError(t, err, "converge: %v", mismatch)
	require.NoError(t, last, "converge: last mismatch: %v", mismatch)
	require.NoError(t, obs.failed())
	for i, ref := range destroyed {
		assert.True(t, obs.goneOrLeft(destroyAt[i], ref), "destroyed %s left or never entered", ref.Value)
	}
	obs.mu.Lock()
	t.Logf("converged after %d refreshes, %d updates read; convergence took %v", obs.steps, len(obs.log), time.Since(mutated).Round(time.Millisecond))
	obs.mu.Unlock()
	st := c.Stats()
	t.Logf("watch client: %d WaitForUpdatesEx, %d CreateFilter, %d DestroyPropertyFilter, %d RetrievePropertiesEx",
		st["WaitForUpdatesEx"].Requests, st["CreateFilter"].Requests, st["DestroyPropertyFilter"].Requests, st["RetrievePropertiesEx"].Requests)
}

func TestWatchReportsGuestOperationsReady(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{ReadyDelay: 200 * time.Millisecond})
	ctx := watchCtx(t)
	c := env.Client
	vm := cloneWorker(t, ctx, env, "worker-1", "")
	ref := vm.Reference()
	require.NoError(t, c.ResetVirtualMachineWatch(ctx))
	require.NoError(t, c.WatchVirtualMachineRefs(ctx, []types.ManagedObjectReference{ref}))
	drainEnters(t, ctx, env, c, []types.ManagedObjectReference{ref})

	// The tools come up after the power-on: only the readiness moves.
	require.NoError(t, c.StartVirtualMachine(ctx, vim.RefOf(vm)))
	var on, ready bool
	require.NoError(t, pollUntil(ctx, func() bool {
		ups, err := c.VirtualMachineObjectUpdates(ctx)
		require.NoError(t, err)
		for _, u := range ups {
			if v, ok := changeOf(u, "runtime.powerState"); ok && v == types.VirtualMachinePowerStatePoweredOn {
				on = true
			}
			if v, ok := changeOf(u, "guest.guestOperationsReady"); ok && v == true {
				ready = true
			}
		}
		return on && ready
	}))
}

// TestWatchObserverLastProbeFollowsItsLog drives the convergence test's
// observer step by step through the ordering that test must survive: a vm
// made, seen by one refresh, and destroyed before the next, never entering
// the watch. Once the observer's model matches the simulator, its last
// probe must not show the vm: the probe's references come from the scope
// views' changes the watch read (govmomi_members.go), so a probe made
// before the poll of the same refresh answers what the previous poll read.
func TestWatchObserverLastProbeFollowsItsLog(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{ForeignVMs: 2})
	ctx := watchCtx(t)
	c, ops := env.Client, env.NewClient(nil)
	tpl, folder := cloneSource(t, ctx, ops)
	a := inventory.Annotation{HatcheryName: "hatch", WorkerName: "brief", Created: time.Now().UTC().Truncate(time.Second)}
	spec := cloneSpec(t, ctx, ops, a, 0, 0, "")

	require.NoError(t, c.ResetVirtualMachineWatch(ctx))
	refs, _, err := c.ProbeInventoryRefs(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, c.WatchVirtualMachineRefs(ctx, refs))
	obs := newWatchObserver()
	for _, ref := range refs {
		obs.watched[ref] = true
	}
	// The first refreshes read the enters and the views' contents: from
	// then on the probe answers from the views' changes.
	for range 2 {
		require.NoError(t, obs.step(ctx, c))
	}

	m := obs.mark()
	cref, err := ops.CloneVirtualMachine(ctx, cloneOf(spec, tpl, folder, "brief"))
	require.NoError(t, err)
	ref := vim.MORef(cref)
	require.NoError(t, obs.step(ctx, c)) // the views report the clone
	require.NoError(t, ops.DestroyVirtualMachine(ctx, cref))
	require.NoError(t, obs.step(ctx, c)) // the views report it gone

	truth, err := watchTruth(ctx, ops)
	require.NoError(t, err)
	require.NoError(t, modelMatches(obs.model(), truth), "the model is converged")
	assert.True(t, obs.goneOrLeft(m, ref), "destroyed %s left or never entered", ref.Value)
}
