package vcenter

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/types"
)

// The wait collector (docs/architecture.md, "Waits from change
// notifications"): every task, power, guest IP and guest readiness wait of
// a Client learns of its object's changes from one property collector of
// the session, long-polled with WaitForUpdatesEx by one goroutine (the
// hub's loop), instead of re-reading the object every PollInterval.
//
// Each waited-on object gets a filter of its own that lists it explicitly
// (no traversal, no SelectSet: docs/inventory-watch.md, "Filter design"),
// shared by every wait on that object, with a few scalar properties
// (waitProps). Filters are created and destroyed only by the loop, between
// two WaitForUpdatesEx: a new wait wakes the loop, which ends its long
// poll with CancelWaitForUpdates. Govmomi's simulator v0.56.0 ranges over a
// collector's filter list, unlocked, while a WaitForUpdatesEx of that
// collector waits, so a filter made or destroyed meanwhile would be a data
// race (docs/architecture.md, "Latency model").
//
// A notification only wakes a wait: the wait then reads what it needs
// (the task's result, the guest's addresses) with RetrieveProperties, as
// before. A wait never relies on notifications alone: while its filter is
// in place it still re-reads every waitFallbackFactor × PollInterval (a
// missed notification costs at most that), and while there is none (being
// made, or the collector lost with its session and being rebuilt) it polls
// as it did before the collector existed.
//
// The inventory's VM change watch (govmomi_watch.go) has a collector of
// its own, which never waits on the server; this one is separate.

const (
	// waitLongPollMax bounds one WaitForUpdatesEx of the wait collector
	// (its MaxWaitSeconds; also at most half the request timeout, so the
	// server's answer always comes inside the request's bound). While
	// some wait is open and nothing changes, the collector costs one
	// request per this period; with no wait open, none.
	waitLongPollMax = 10 * time.Second

	// waitFallbackFactor × PollInterval is how often a wait whose object
	// has a live filter re-reads it anyway: a notification vCenter never
	// sends (or that is lost) delays the wait by at most that. Ten
	// seconds with the default poll interval: ten times fewer reads than
	// the poll it replaces.
	waitFallbackFactor = 10

	// waitControlTimeout bounds CancelWaitForUpdates: it is small and
	// answered at once; a stuck one must not hold the loop (and so every
	// new wait's filter) for a whole request timeout.
	waitControlTimeout = 5 * time.Second

	// waitCancelRetryMin and waitCancelRetryMax: while a long poll the
	// loop cancelled has not ended, the cancel is sent again after
	// waitCancelRetryMin, doubling up to waitCancelRetryMax. A cancel that
	// reaches vCenter before the poll it means to end (sent just as the
	// poll is) ends nothing; without the retry the new wait's filter
	// would wait for the long poll's end.
	waitCancelRetryMin = 25 * time.Millisecond
	waitCancelRetryMax = time.Second

	// waitRestartMin is the youngest a long poll is cancelled at: a wait
	// that starts sooner has its filter made when the poll is that old.
	// It bounds the collector's restarts in a burst of new waits (each is
	// a cancel and a new poll: at most two requests per this period), and
	// it lets every poll deliver what changed: govmomi's simulator v0.56.0
	// looks at changes only 20 ms after a poll began, so polls cancelled
	// sooner, one after the other, would never notify anything.
	waitRestartMin = 40 * time.Millisecond

	// waitRebuildMin and waitRebuildMax bound the back-off between two
	// failed attempts to create the wait collector (vCenter refusing it):
	// meanwhile every wait polls.
	waitRebuildMin = time.Second
	waitRebuildMax = 30 * time.Second
)

// waitProps are the properties a wait filter reports, by object type:
// scalars only (the simulator hands slices to a queued update live; see
// docs/inventory-watch.md). A change of any of them wakes the object's
// waits.
var waitProps = map[string][]string{
	"VirtualMachine": {"runtime.powerState", "guest.ipAddress", "guest.guestOperationsReady"},
	"Task":           {"info.state"},
}

// waitHub owns the wait collector of a Client: its loop goroutine (started
// at the first wait, stopped and joined by close), the collector, one
// filter per waited-on object and the waits subscribed to each.
type waitHub struct {
	c   *Client
	log *slog.Logger

	// kick wakes the loop: a filter to make or destroy, or close.
	kick chan struct{}
	done chan struct{} // closed when the loop returned

	mu      sync.Mutex
	objs    map[types.ManagedObjectReference]*waitObj
	started bool
	closing bool
	// loopIdle: the loop waits for work with no filter and no poll in
	// flight; progress is closed (and replaced) at each turn of the loop.
	loopIdle bool
	progress chan struct{}
	stop     context.CancelFunc // cancels the loop's context (last resort at close)
	// live: the collector of the current session answers; a filter
	// made on it notifies.
	live bool
	// stats, for tests: collectors and filters made and destroyed.
	collectors, filtersMade, filtersDestroyed int
}

// waitObj is one waited-on object: its filter (zero until made), the last
// values the filter reported and the waits on it.
type waitObj struct {
	filter types.ManagedObjectReference
	failed bool // CreateFilter failed (not a lost collector): its waits poll
	vals   map[string]any
	subs   map[*waitSub]struct{}
}

// waitSub is one wait's subscription to its object's notifications.
type waitSub struct {
	obj types.ManagedObjectReference
	// wake is signalled (never blocking) when the object changed, its
	// filter was made, or the collector was lost or rebuilt.
	wake chan struct{}
	// dirty (under waitHub.mu): read again whatever the values say: the
	// filter was just made, the collector rebuilt, or the object left.
	dirty bool
}

func newWaitHub(c *Client) *waitHub {
	return &waitHub{
		c:        c,
		log:      c.log,
		kick:     make(chan struct{}, 1),
		done:     make(chan struct{}),
		objs:     map[types.ManagedObjectReference]*waitObj{},
		progress: make(chan struct{}),
	}
}

// broadcastLocked wakes whoever waits for the loop's next turn. The caller
// holds h.mu.
func (h *waitHub) broadcastLocked() {
	close(h.progress)
	h.progress = make(chan struct{})
}

// anySubsLocked tells whether some wait is open. The caller holds h.mu.
func (h *waitHub) anySubsLocked() bool {
	for _, o := range h.objs {
		if len(o.subs) > 0 {
			return true
		}
	}
	return false
}

// subscribe registers a wait on obj, starts the loop at the first wait and
// wakes it to make obj's filter. nil after close: the wait polls.
func (h *waitHub) subscribe(ctx context.Context, obj types.ManagedObjectReference) *waitSub {
	s := &waitSub{obj: obj, wake: make(chan struct{}, 1)}
	h.mu.Lock()
	if h.closing {
		h.mu.Unlock()
		return nil
	}
	if !h.started {
		h.started = true
		lctx, stop := context.WithCancel(context.Background())
		h.stop = stop
		go h.run(lctx)
	}
	o := h.objs[obj]
	if o == nil {
		o = &waitObj{subs: map[*waitSub]struct{}{}}
		h.objs[obj] = o
	}
	o.subs[s] = struct{}{}
	needFilter := o.filter.Value == "" && !o.failed
	h.mu.Unlock()
	if needFilter {
		h.poke()
	}
	return s
}

// unsubscribe ends a wait. Its object's filter, when no other wait needs
// it, is destroyed at the loop's next turn (a notification, a new wait or
// the long poll's end). When no wait is left at all, the loop is woken
// now and the last wait returns only once the loop is idle (its poll
// ended, the filters destroyed; bounded by waitControlTimeout): an idle
// session keeps no filter and no request runs after the waits that caused
// it returned, which keeps a caller's request accounting its own.
func (h *waitHub) unsubscribe(s *waitSub) {
	if s == nil {
		return
	}
	h.mu.Lock()
	if o := h.objs[s.obj]; o != nil {
		delete(o.subs, s)
	}
	idle := !h.anySubsLocked()
	h.mu.Unlock()
	if !idle {
		return
	}
	h.poke()
	deadline := time.NewTimer(waitControlTimeout)
	defer deadline.Stop()
	for {
		h.mu.Lock()
		settled := h.loopIdle || h.closing || h.anySubsLocked()
		ch := h.progress
		h.mu.Unlock()
		if settled {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			return
		}
	}
}

// state returns whether s's filter is in place on a live collector, takes
// its dirty flag and copies its object's last reported values.
func (h *waitHub) state(s *waitSub) (live, dirty bool, vals map[string]any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	dirty, s.dirty = s.dirty, false
	o := h.objs[s.obj]
	if o == nil {
		return false, dirty, nil
	}
	live = h.live && o.filter.Value != ""
	vals = make(map[string]any, len(o.vals))
	for k, v := range o.vals {
		vals[k] = v
	}
	return live, dirty, vals
}

// poke wakes the loop; a long poll in flight is cancelled by the loop.
func (h *waitHub) poke() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// signal wakes every wait on o, marking them dirty when asked. The caller
// holds h.mu.
func (o *waitObj) signal(dirty bool) {
	for s := range o.subs {
		if dirty {
			s.dirty = true
		}
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// setLive records whether the collector works and wakes every wait when
// it is lost: they read again and poll until their filter is made on a
// new collector (a change meanwhile is not notified). A lost collector's
// filters are gone with it.
func (h *waitHub) setLive(live bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !live {
		for _, o := range h.objs {
			o.filter = types.ManagedObjectReference{}
			o.failed = false
			o.vals = nil
		}
	}
	if h.live == live {
		return
	}
	h.live = live
	if live {
		return // each wait is woken when its filter is made
	}
	for _, o := range h.objs {
		o.signal(true)
	}
}

// wantedLocked tells whether the loop has work: a filter to make for a
// wait (one whose CreateFilter failed polls instead) or one to destroy.
// The caller holds h.mu.
func (h *waitHub) wantedLocked() bool {
	for _, o := range h.objs {
		if o.filter.Value != "" || (len(o.subs) > 0 && !o.failed) {
			return true
		}
	}
	return false
}

// longPollSeconds is the long poll's MaxWaitSeconds.
func (h *waitHub) longPollSeconds() int32 {
	d := min(waitLongPollMax, h.c.cfg.RequestTimeout/2)
	return int32(max(d/time.Second, 1))
}

// run is the loop: it makes the collector (again after a loss), makes and
// destroys filters, long-polls, and hands the updates to the waits. It
// returns at close (or when ctx ends).
func (h *waitHub) run(ctx context.Context) {
	defer close(h.done)
	var (
		pc      types.ManagedObjectReference // zero: none
		gen     int64
		version string
		backoff = waitRebuildMin
		lost    bool // a collector was lost and not rebuilt yet (logged once)
	)
	wait := h.longPollSeconds()
	for ctx.Err() == nil {
		h.mu.Lock()
		closing := h.closing
		wanted := h.wantedLocked()
		h.broadcastLocked()
		h.mu.Unlock()
		if closing {
			h.destroyCollector(ctx, pc, gen)
			return
		}
		if pc.Value != "" && gen != h.c.rl.generation() {
			// The session changed: the collector died with the old one.
			pc = types.ManagedObjectReference{}
			h.setLive(false)
			lost = true
			h.log.Debug("vcenter wait collector lost with its session: waits poll until it is rebuilt")
		}
		if !wanted {
			// Idle: no filter, no poll in flight. The collector is kept
			// for the next wait (an idle one costs vCenter nothing).
			h.mu.Lock()
			h.loopIdle = true
			h.broadcastLocked()
			h.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-h.kick:
			}
			h.mu.Lock()
			h.loopIdle = false
			h.mu.Unlock()
			continue
		}
		if pc.Value == "" {
			ref, err := h.createCollector(ctx)
			if err != nil {
				h.setLive(false)
				// vCenter not answering is the outage's line
				// (Client.note), not one per attempt here.
				level := slog.LevelWarn
				if isTransport(err) {
					level = slog.LevelDebug
				}
				h.log.Log(ctx, level, "create vcenter wait collector: waits poll meanwhile", "retry_in", backoff, logkey.Err, err)
				select {
				case <-ctx.Done():
					return
				case <-time.After(backoff):
				}
				backoff = min(backoff*2, waitRebuildMax)
				continue
			}
			pc, gen, version, backoff = ref, h.c.rl.generation(), "", waitRebuildMin
			h.setLive(true)
			if lost {
				lost = false
				h.log.Debug("vcenter wait collector rebuilt", "collector", pc.Value)
			}
		}
		if err := h.syncFilters(ctx, pc); err != nil {
			if ctx.Err() != nil {
				return
			}
			pc = types.ManagedObjectReference{}
			h.setLive(false)
			lost = true
			h.log.Debug("vcenter wait collector lost: waits poll until it is rebuilt", logkey.Err, err)
			continue
		}

		h.mu.Lock()
		kicked := false
		select {
		case <-h.kick:
			kicked = true
		default:
		}
		filters := false
		for _, o := range h.objs {
			if o.filter.Value != "" {
				filters = true
				break
			}
		}
		if kicked || h.closing || !filters {
			h.mu.Unlock()
			continue // more to do before waiting, or nothing to wait for
		}
		h.mu.Unlock()
		res, err := h.longPoll(ctx, pc, version, wait)
		if err != nil {
			if fault.Is(err, &types.RequestCanceled{}) {
				continue // woken by poke
			}
			if ctx.Err() != nil {
				return
			}
			h.dropCollector(ctx, pc, gen, err)
			h.log.Debug("vcenter wait collector lost: waits poll until it is rebuilt", "collector", pc.Value, logkey.Err, err)
			pc = types.ManagedObjectReference{}
			h.setLive(false)
			lost = true
			continue
		}
		if res.Returnval == nil {
			continue // the long poll ended with no change
		}
		version = res.Returnval.Version
		h.deliver(res.Returnval)
	}
}

// longPoll runs one WaitForUpdatesEx on pc (in a goroutine it joins) and
// ends it early with CancelWaitForUpdates when the loop is poked (a new
// wait, a wait ended, close), once the poll is waitRestartMin old, sending
// the cancel again until the poll ends (waitCancelRetryMin doubling to
// waitCancelRetryMax).
func (h *waitHub) longPoll(ctx context.Context, pc types.ManagedObjectReference, version string, wait int32) (*types.WaitForUpdatesExResponse, error) {
	type answer struct {
		res *types.WaitForUpdatesExResponse
		err error
	}
	done := make(chan answer, 1)
	started := time.Now()
	go func() {
		res, err := methods.WaitForUpdatesEx(ctx, h.c.vim, &types.WaitForUpdatesEx{
			This:    pc,
			Version: version,
			Options: &types.WaitOptions{MaxWaitSeconds: &wait},
		})
		done <- answer{res, err}
	}()
	var retry *time.Timer
	delay := waitCancelRetryMin
	arm := func(d time.Duration) {
		if retry == nil {
			retry = time.NewTimer(d)
		} else {
			retry.Reset(d)
		}
	}
	cancel := func() {
		cctx, stop := context.WithTimeout(ctx, waitControlTimeout)
		defer stop()
		if _, err := methods.CancelWaitForUpdates(cctx, h.c.vim, &types.CancelWaitForUpdates{This: pc}); err != nil {
			h.log.Debug("cancel wait collector poll", "collector", pc.Value, logkey.Err, err)
		}
		arm(delay)
		delay = min(delay*2, waitCancelRetryMax)
	}
	kick := h.kick
	for {
		var again <-chan time.Time
		if retry != nil {
			again = retry.C
		}
		select {
		case a := <-done:
			if retry != nil {
				retry.Stop()
			}
			// The loop syncs its filters next, whatever woke it.
			return a.res, a.err
		case <-kick:
			kick = nil
			h.mu.Lock()
			last := !h.anySubsLocked()
			h.mu.Unlock()
			// The last wait ended: its caller waits for the teardown.
			if young := waitRestartMin - time.Since(started); young > 0 && !last {
				arm(young) // cancelled when old enough
				continue
			}
			cancel()
		case <-again:
			cancel()
		}
	}
}

// createCollector makes the wait collector (one request). Retired
// collectors of this session due for destruction are destroyed first.
func (h *waitHub) createCollector(ctx context.Context) (types.ManagedObjectReference, error) {
	h.c.destroyRetiredWatches(ctx)
	pc, err := h.c.pc.Create(ctx)
	if err != nil {
		return types.ManagedObjectReference{}, fmt.Errorf("create wait collector in datacenter %q: %w", h.c.dc.Name(), err)
	}
	h.mu.Lock()
	h.collectors++
	h.mu.Unlock()
	return pc.Reference(), nil
}

// syncFilters makes the filters waits need and destroys those no wait
// needs; it runs only between two WaitForUpdatesEx of the loop. An error
// means the collector is lost.
func (h *waitHub) syncFilters(ctx context.Context, pc types.ManagedObjectReference) error {
	var create, destroy []types.ManagedObjectReference
	h.mu.Lock()
	for ref, o := range h.objs {
		switch {
		case len(o.subs) == 0:
			if o.filter.Value != "" {
				destroy = append(destroy, o.filter)
			}
			delete(h.objs, ref)
		case o.filter.Value == "" && !o.failed:
			create = append(create, ref)
		}
	}
	h.mu.Unlock()
	for _, f := range destroy {
		_, err := methods.DestroyPropertyFilter(ctx, h.c.vim, &types.DestroyPropertyFilter{This: f})
		if err != nil {
			if isNotFound(err) {
				continue // gone already
			}
			return fmt.Errorf("destroy wait filter %s: %w", f.Value, err)
		}
		h.mu.Lock()
		h.filtersDestroyed++
		h.mu.Unlock()
	}
	for _, ref := range create {
		props, ok := waitProps[ref.Type]
		if !ok {
			props = []string{"name"}
		}
		res, err := methods.CreateFilter(ctx, h.c.vim, &types.CreateFilter{
			This: pc,
			Spec: types.PropertyFilterSpec{
				ObjectSet:                     []types.ObjectSpec{{Obj: ref, Skip: types.NewBool(false)}},
				PropSet:                       []types.PropertySpec{{Type: ref.Type, PathSet: props}},
				ReportMissingObjectsInResults: types.NewBool(true),
			},
		})
		if err != nil {
			if isNotFound(err) || isNotAuthenticated(err) {
				return fmt.Errorf("create wait filter for %s %s: %w", ref.Type, ref.Value, err)
			}
			h.log.Debug("create wait filter: its waits poll", "object", ref.Value, logkey.Err, err)
			h.mu.Lock()
			if o := h.objs[ref]; o != nil {
				o.failed = true
			}
			h.mu.Unlock()
			continue
		}
		h.mu.Lock()
		h.filtersMade++
		// Only this loop deletes objects: o is still there (with no wait
		// left, its filter goes at the next turn).
		o := h.objs[ref]
		o.filter = res.Returnval
		// A change between the wait's last read and now was not
		// notified: its waits read again.
		o.signal(true)
		h.mu.Unlock()
	}
	return nil
}

// deliver merges an update set into the objects' values and wakes their
// waits; an object that left (or is reported missing) marks them dirty, so
// that their read reports it.
func (h *waitHub) deliver(set *types.UpdateSet) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, fu := range set.FilterSet {
		for _, ou := range fu.ObjectSet {
			o := h.objs[ou.Obj]
			if o == nil {
				continue
			}
			if ou.Kind == types.ObjectUpdateKindLeave {
				o.signal(true)
				continue
			}
			if o.vals == nil {
				o.vals = map[string]any{}
			}
			for _, ch := range ou.ChangeSet {
				switch ch.Op {
				case types.PropertyChangeOpRemove, types.PropertyChangeOpIndirectRemove:
					delete(o.vals, ch.Name)
				default:
					o.vals[ch.Name] = ch.Val
				}
			}
			o.signal(false)
		}
		for _, miss := range fu.MissingSet {
			if o := h.objs[miss.Obj]; o != nil {
				o.signal(true)
			}
		}
	}
}

// dropCollector forgets a collector whose WaitForUpdatesEx failed: one
// that got no answer may still be waited on by the server and is retired
// (destroyed watchRetireDelay later, as the watch's: govmomi_watch.go);
// one that answered a fault is destroyed now unless it is gone with its
// session.
func (h *waitHub) dropCollector(ctx context.Context, pc types.ManagedObjectReference, gen int64, err error) {
	if isNotFound(err) || gen != h.c.rl.generation() {
		return
	}
	if at := h.c.abandonedAt(err); !at.IsZero() {
		h.c.watchMu.Lock()
		h.c.retired = append(h.c.retired, retiredWatch{ref: pc, gen: gen, at: at})
		h.c.watchMu.Unlock()
		return
	}
	h.destroyCollector(ctx, pc, gen)
}

// destroyCollector destroys the collector and its filters, best effort,
// when it belongs to the current session and no wait of it is in flight.
func (h *waitHub) destroyCollector(ctx context.Context, pc types.ManagedObjectReference, gen int64) {
	if pc.Value == "" || gen != h.c.rl.generation() {
		return
	}
	h.c.destroyWatchCollector(context.WithoutCancel(ctx), pc)
}

// close stops the loop and joins it, bounded by ctx: the loop cancels its
// long poll on the server (CancelWaitForUpdates) and destroys its
// collector with no poll running; past ctx the loop's own request is
// abandoned instead.
func (h *waitHub) close(ctx context.Context) {
	h.mu.Lock()
	h.closing = true
	started := h.started
	h.mu.Unlock()
	if !started {
		return
	}
	h.poke()
	select {
	case <-h.done:
	case <-ctx.Done():
		h.stop()
		<-h.done
	}
	h.stop()
}
