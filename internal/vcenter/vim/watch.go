package vim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// The VM change watch (docs/inventory-watch.md) is a property
// collector of its own with filters that list VMs explicitly: no traversal
// spec, no SelectSet, no slice-valued VM property; and one filter listing
// the scope's container views for their `view` (members.go). That
// is what keeps it free of govmomi simulator v0.56.0's lock-order deadlock;
// the views' live-slice race is the tests' simulator's to avoid, as vCenter
// does (docs/inventory-watch.md, "Filter design").

const (
	// watchDestroyTimeout bounds a best-effort cleanup request of the
	// watch (destroying an old collector or an emptied filter): cleanup
	// must not hold the inventory's owner loop for a whole request
	// timeout, and what it fails to destroy dies with its session.
	watchDestroyTimeout = 5 * time.Second

	// watchFilterMaxRefs is the most VMs one property filter lists. It
	// bounds a CreateFilter request (one ObjectSpec, ~100 bytes, per VM:
	// ~100 KB at 1,000, far inside the request timeout) and how many VMs
	// a filter keeps alive: a filter is destroyed once all its VMs are
	// gone, so smaller filters are freed sooner.
	watchFilterMaxRefs = 1000

	// WatchRetireDelay is how long a collector whose WaitForUpdatesEx was
	// abandoned (a timeout or a broken connection: no answer came) is kept
	// before it is destroyed. The server may still be computing that
	// answer, and destroying the collector under it is at best wasted and,
	// in govmomi's simulator v0.56.0, a panic (it looks the collector's
	// filters up while it iterates them). Two minutes is eight request
	// bounds; a collector still running then is destroyed anyway.
	WatchRetireDelay = 2 * time.Minute
)

// watchNoWait is WaitOptions.MaxWaitSeconds = 0: "compute the updates once
// and return", so VirtualMachineChanges never waits for a change.
var watchNoWait int32

// vmWatch is the change watch of one session generation. Its fields are
// guarded by Collector.watchMu; pc and gen never change.
type vmWatch struct {
	pc  *property.Collector
	gen int64
	// version is the collector's data version the next
	// VirtualMachineChanges asks from.
	version string
	// filters maps each filter to the watched VMs it lists that are not
	// gone yet; byRef maps each watched VM to its filter.
	filters map[types.ManagedObjectReference]map[types.ManagedObjectReference]struct{}
	byRef   map[types.ManagedObjectReference]types.ManagedObjectReference
	// members is the filter on the scope's views and what they reported
	// (members.go); nil when none.
	members *vmMembers
	// abandoned is when a WaitForUpdatesEx on pc got no answer; zero when
	// every poll was answered. An abandoned collector is never changed
	// again, only retired (WatchRetireDelay).
	abandoned time.Time
}

// retiredWatch is an abandoned watch collector waiting to be destroyed.
type retiredWatch struct {
	ref types.ManagedObjectReference
	gen int64
	at  time.Time
}

// abandonedAt returns now when err is a poll that got no answer (timeout,
// cancel, broken connection: the server may still be running it), zero
// when err carries the server's answer (a SOAP or vim fault).
func (c *Collector) abandonedAt(err error) time.Time {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if soap.IsSoapFault(e) || soap.IsVimFault(e) {
			return time.Time{}
		}
	}
	return c.watchClock()
}

// watchClock returns the watch's current time.
func (c *Collector) watchClock() time.Time {
	if c.watchNow != nil {
		return c.watchNow()
	}
	return time.Now()
}

// ResetVirtualMachineWatch drops the VM change watch (its collector is
// destroyed, best effort, when it belongs to the current session) and
// starts an empty one: a new property collector and its baseline version.
// Cost: 2 requests (3 when an old collector is destroyed).
func (c *Collector) ResetVirtualMachineWatch(ctx context.Context) error {
	c.watchMu.Lock()
	old := c.watch
	c.watch = nil
	c.watchMu.Unlock()
	if old != nil && old.gen == c.gen() {
		c.dropWatchCollector(ctx, old)
	}
	c.destroyRetiredWatches(ctx)
	// A re-login while the collector is being made leaves it in an
	// unknown session: make it again, once.
	for attempt := 0; ; attempt++ {
		w, err := c.newVMWatch(ctx)
		if err != nil {
			return err
		}
		if w.gen == c.gen() {
			c.watchMu.Lock()
			c.watch = w
			c.watchMu.Unlock()
			return nil
		}
		c.destroyWatchCollector(ctx, w.pc.Reference())
		if attempt > 0 {
			return fmt.Errorf("start vm change watch in datacenter %q: session changed twice: %w", c.dc, vctypes.ErrWatchLost)
		}
	}
}

// newVMWatch creates a collector and reads its baseline version (in the
// simulator this first WaitForUpdatesEx also makes the collector listen
// to inventory changes).
func (c *Collector) newVMWatch(ctx context.Context) (*vmWatch, error) {
	gen := c.gen()
	pc, err := c.pc.Create(ctx)
	if err != nil {
		return nil, fmt.Errorf("create vm change watch collector in datacenter %q: %w", c.dc, err)
	}
	res, err := methods.WaitForUpdatesEx(ctx, c.vim, &types.WaitForUpdatesEx{
		This:    pc.Reference(),
		Options: &types.WaitOptions{MaxWaitSeconds: &watchNoWait},
	})
	if err != nil {
		c.dropWatchCollector(ctx, &vmWatch{pc: pc, gen: gen, abandoned: c.abandonedAt(err)})
		return nil, fmt.Errorf("read baseline version of vm change watch collector %s in datacenter %q: %w", pc.Reference().Value, c.dc, err)
	}
	w := &vmWatch{
		pc:      pc,
		gen:     gen,
		filters: map[types.ManagedObjectReference]map[types.ManagedObjectReference]struct{}{},
		byRef:   map[types.ManagedObjectReference]types.ManagedObjectReference{},
	}
	if res.Returnval != nil {
		w.version = res.Returnval.Version
	}
	return w, nil
}

// WatchVirtualMachines adds VMs to the change watch, in filters of at most
// watchFilterMaxRefs VMs each; VMs already watched are skipped. Cost: one
// CreateFilter per started watchFilterMaxRefs new VMs, none when every VM
// is already watched. vctypes.ErrWatchLost (wrapped) when there is no watch of the
// current session.
func (c *Collector) WatchVirtualMachines(ctx context.Context, refs []types.ManagedObjectReference) error {
	c.watchMu.Lock()
	w := c.watch
	if w == nil || w.gen != c.gen() {
		c.watchMu.Unlock()
		return fmt.Errorf("watch virtual machines of datacenter %q: %w", c.dc, vctypes.ErrWatchLost)
	}
	var todo []types.ManagedObjectReference
	seen := map[types.ManagedObjectReference]struct{}{}
	for _, ref := range refs {
		if _, ok := w.byRef[ref]; ok {
			continue
		}
		if _, ok := seen[ref]; ok {
			continue
		}
		seen[ref] = struct{}{}
		todo = append(todo, ref)
	}
	c.watchMu.Unlock()

	for chunk := range slices.Chunk(todo, watchFilterMaxRefs) {
		f, err := w.pc.CreateFilter(ctx, types.CreateFilter{Spec: vmWatchFilterSpec(chunk), PartialUpdates: false})
		if err != nil {
			if IsNotFound(err) || w.gen != c.gen() {
				c.forgetWatch(w)
				return fmt.Errorf("watch %d virtual machines of datacenter %q: %w: %w", len(chunk), c.dc, vctypes.ErrWatchLost, err)
			}
			return fmt.Errorf("watch %d virtual machines of datacenter %q: %w", len(chunk), c.dc, err)
		}
		c.watchMu.Lock()
		if c.watch != w {
			c.watchMu.Unlock()
			return fmt.Errorf("watch virtual machines of datacenter %q: watch reset meanwhile: %w", c.dc, vctypes.ErrWatchLost)
		}
		live := make(map[types.ManagedObjectReference]struct{}, len(chunk))
		for _, ref := range chunk {
			live[ref] = struct{}{}
			w.byRef[ref] = f.Reference()
		}
		w.filters[f.Reference()] = live
		c.watchMu.Unlock()
	}
	return nil
}

// vmWatchFilterSpec lists refs explicitly (no traversal, no SelectSet) with
// the scalar VMWatchProperties. Missing objects are reported, not faults:
// a VM destroyed before its filter is made must not fail the watch.
func vmWatchFilterSpec(refs []types.ManagedObjectReference) types.PropertyFilterSpec {
	objs := make([]types.ObjectSpec, len(refs))
	for i, ref := range refs {
		objs[i] = types.ObjectSpec{Obj: ref, Skip: types.NewBool(false)}
	}
	return types.PropertyFilterSpec{
		ObjectSet:                     objs,
		PropSet:                       []types.PropertySpec{{Type: "VirtualMachine", PathSet: VMWatchProperties}},
		ReportMissingObjectsInResults: types.NewBool(true),
	}
}

// UnwatchVirtualMachines takes VMs out of the change watch; a filter left
// with no VM is destroyed (best effort). Unknown VMs cost nothing: no
// request is made unless a filter empties.
func (c *Collector) UnwatchVirtualMachines(ctx context.Context, refs []types.ManagedObjectReference) error {
	c.watchMu.Lock()
	w := c.watch
	if w == nil {
		c.watchMu.Unlock()
		return nil
	}
	empty := w.forget(refs)
	c.watchMu.Unlock()
	c.destroyWatchFilters(ctx, w, empty)
	return nil
}

// forget drops refs and returns the filters left empty, which it also
// drops. The caller holds watchMu.
func (w *vmWatch) forget(refs []types.ManagedObjectReference) []types.ManagedObjectReference {
	var empty []types.ManagedObjectReference
	for _, ref := range refs {
		f, ok := w.byRef[ref]
		if !ok {
			continue
		}
		delete(w.byRef, ref)
		live := w.filters[f]
		delete(live, ref)
		if len(live) == 0 {
			delete(w.filters, f)
			empty = append(empty, f)
		}
	}
	return empty
}

// VirtualMachineChanges reads the watch's updates since the previous call
// with WaitForUpdatesEx and MaxWaitSeconds 0, so it never waits for a
// change: one request when nothing changed, one more per page of a
// truncated update set. It returns every VM update in order; a VM that
// left (or that vCenter reports missing from its filter) comes as
// "leave" and is taken out of the watch. vctypes.ErrWatchLost (wrapped) when
// there is no watch of the current session, the collector is gone, or a
// failure after a first page would lose updates; the watch is then
// forgotten. Other errors keep it.
func (c *Collector) VirtualMachineChanges(ctx context.Context) ([]types.ObjectUpdate, error) {
	c.watchMu.Lock()
	w := c.watch
	if w != nil && w.gen != c.gen() {
		c.watch = nil
		w = nil
	}
	if w == nil {
		c.watchMu.Unlock()
		return nil, fmt.Errorf("read vm changes of datacenter %q: %w", c.dc, vctypes.ErrWatchLost)
	}
	version := w.version
	c.watchMu.Unlock()

	var (
		updates []types.ObjectUpdate
		gone    []types.ManagedObjectReference
	)
	for page := 0; ; page++ {
		res, err := methods.WaitForUpdatesEx(ctx, c.vim, &types.WaitForUpdatesEx{
			This:    w.pc.Reference(),
			Version: version,
			Options: &types.WaitOptions{MaxWaitSeconds: &watchNoWait},
		})
		lost := w.gen != c.gen()
		if err != nil {
			if at := c.abandonedAt(err); !at.IsZero() {
				c.watchMu.Lock()
				w.abandoned = at
				c.watchMu.Unlock()
			}
			if lost || page > 0 || IsNotFound(err) || IsStaleCollectorVersion(err) {
				c.forgetWatch(w)
				if !lost && !IsNotFound(err) {
					// The collector still exists: nothing else will destroy it.
					c.dropWatchCollector(ctx, w)
				}
				return nil, fmt.Errorf("read vm changes of datacenter %q (collector %s): %w: %w", c.dc, w.pc.Reference().Value, vctypes.ErrWatchLost, err)
			}
			return nil, fmt.Errorf("read vm changes of datacenter %q (collector %s): %w", c.dc, w.pc.Reference().Value, err)
		}
		if lost {
			c.forgetWatch(w)
			return nil, fmt.Errorf("read vm changes of datacenter %q: session changed: %w", c.dc, vctypes.ErrWatchLost)
		}
		set := res.Returnval
		if set == nil {
			break // nothing changed
		}
		version = set.Version
		var members []types.ObjectUpdate
		for _, fu := range set.FilterSet {
			for _, ou := range fu.ObjectSet {
				if ou.Obj.Type == "ContainerView" {
					members = append(members, ou)
					continue
				}
				if ou.Obj.Type != "VirtualMachine" {
					continue
				}
				updates = append(updates, ou)
				if ou.Kind == types.ObjectUpdateKindLeave {
					gone = append(gone, ou.Obj)
				}
			}
			for _, miss := range fu.MissingSet {
				if miss.Obj.Type == "ContainerView" {
					members = append(members, types.ObjectUpdate{Obj: miss.Obj, Kind: types.ObjectUpdateKindLeave})
				}
				if miss.Obj.Type == "VirtualMachine" && objectGone(miss.Fault) {
					updates = append(updates, types.ObjectUpdate{Obj: miss.Obj, Kind: types.ObjectUpdateKindLeave})
					gone = append(gone, miss.Obj)
				}
			}
		}
		c.watchMu.Lock()
		if c.watch == w {
			w.version = version
			for _, ou := range members {
				w.applyMemberUpdate(ou)
			}
		}
		c.watchMu.Unlock()
		if set.Truncated == nil || !*set.Truncated {
			break
		}
	}
	if len(gone) > 0 {
		c.watchMu.Lock()
		var empty []types.ManagedObjectReference
		if c.watch == w {
			empty = w.forget(gone)
		}
		c.watchMu.Unlock()
		c.destroyWatchFilters(ctx, w, empty)
	}
	return updates, nil
}

// objectGone tells whether a missing-object fault says the object no
// longer exists (rather than, say, that it may not be read).
func objectGone(f types.LocalizedMethodFault) bool {
	_, ok := f.Fault.(*types.ManagedObjectNotFound)
	return ok
}

// forgetWatch drops w if it is still the current watch.
func (c *Collector) forgetWatch(w *vmWatch) {
	c.watchMu.Lock()
	if c.watch == w {
		c.watch = nil
	}
	c.watchMu.Unlock()
}

// destroyWatchFilters destroys w's filters, best effort, when w belongs to
// the current session (others died with theirs).
func (c *Collector) destroyWatchFilters(ctx context.Context, w *vmWatch, filters []types.ManagedObjectReference) {
	c.watchMu.Lock()
	abandoned := !w.abandoned.IsZero()
	c.watchMu.Unlock()
	if len(filters) == 0 || w.gen != c.gen() || abandoned {
		return // an abandoned collector's filters go with it
	}
	for _, f := range filters {
		dctx, cancel := context.WithTimeout(ctx, watchDestroyTimeout)
		_, err := methods.DestroyPropertyFilter(dctx, c.vim, &types.DestroyPropertyFilter{This: f})
		cancel()
		if err != nil {
			c.log.Debug("destroy vm change watch filter", "filter", f.Value, logkey.Err, err)
		}
	}
}

// dropWatchCollector destroys w's collector now, or retires it when a poll
// of it was abandoned (WatchRetireDelay). The caller has made w not
// current.
func (c *Collector) dropWatchCollector(ctx context.Context, w *vmWatch) {
	c.watchMu.Lock()
	abandoned := w.abandoned
	if !abandoned.IsZero() {
		c.retired = append(c.retired, retiredWatch{ref: w.pc.Reference(), gen: w.gen, at: abandoned})
	}
	c.watchMu.Unlock()
	if abandoned.IsZero() {
		c.destroyWatchCollector(ctx, w.pc.Reference())
		return
	}
	c.log.Debug("vm change watch collector retired: a poll of it got no answer", "collector", w.pc.Reference().Value, "destroyed_after", WatchRetireDelay)
}

// destroyRetiredWatches destroys the retired collectors of the current
// session that were abandoned at least WatchRetireDelay ago and forgets
// those of older sessions (they died with them).
func (c *Collector) destroyRetiredWatches(ctx context.Context) {
	gen := c.gen()
	var due []types.ManagedObjectReference
	c.watchMu.Lock()
	keep := c.retired[:0]
	for _, r := range c.retired {
		switch {
		case r.gen != gen:
		case c.watchClock().Sub(r.at) >= WatchRetireDelay:
			due = append(due, r.ref)
		default:
			keep = append(keep, r)
		}
	}
	c.retired = keep
	c.watchMu.Unlock()
	for _, ref := range due {
		c.destroyWatchCollector(ctx, ref)
	}
}

// destroyWatchCollector destroys a watch collector (and so its filters),
// best effort. It calls the method by reference: property.Collector.Destroy
// would clear the shared Collector's reference under other readers.
func (c *Collector) destroyWatchCollector(ctx context.Context, ref types.ManagedObjectReference) {
	dctx, cancel := context.WithTimeout(ctx, watchDestroyTimeout)
	defer cancel()
	if _, err := methods.DestroyPropertyCollector(dctx, c.vim, &types.DestroyPropertyCollector{This: ref}); err != nil {
		c.log.Debug("destroy vm change watch collector", "collector", ref.Value, logkey.Err, err)
	}
}

// closeWatch destroys the watch's collector at Close, best effort; an
// abandoned or retired one is left to the session's logout.
func (c *Collector) closeWatch(ctx context.Context) {
	c.watchMu.Lock()
	w := c.watch
	c.watch = nil
	c.retired = nil
	abandoned := w != nil && !w.abandoned.IsZero()
	c.watchMu.Unlock()
	if w != nil && w.gen == c.gen() && !abandoned {
		c.destroyWatchCollector(ctx, w.pc.Reference())
	}
}

// SetClock replaces the clock of the retirement of abandoned collectors
// (WatchRetireDelay). Tests use it, before the watch or the waits are.
func (c *Collector) SetClock(now func() time.Time) { c.watchNow = now }

// RetiredCollectors is how many abandoned collectors (the watch's, the
// wait collector's) wait to be destroyed.
func (c *Collector) RetiredCollectors() int {
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	return len(c.retired)
}
