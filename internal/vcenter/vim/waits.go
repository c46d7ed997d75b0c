package vim

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/vmware/govmomi/vim25/types"
)

// The wait collector (docs/architecture.md, "Waits from change
// notifications"): every task, power, guest IP and guest readiness wait of
// a Collector learns of its object's changes from one property collector of
// the session, long-polled with WaitForUpdatesEx by one goroutine (the
// hub's loop), instead of re-reading the object every PollInterval.
//
// The collector has one filter, made once per session and never changed:
// it reports a few scalar properties (waitProps) of every object in a
// ListView of the session (the view, through a traversal of its "view"
// property). A wait registers its object and the loop adds it to the view
// (ModifyListView: the filter then reports the object entering, with its
// values); objects no wait needs any more leave the view together with
// an addition once they are waitViewStaleMax (one request for both), so
// an ended wait costs nothing. No filter is made or destroyed per wait and no long poll is
// cancelled: the view changes while the poll runs, which vCenter allows
// (govmomi's simulator v0.56.0 deadlocks on it; the tests' simulator is
// taught it: internal/vcsimtest/listview.go).
//
// A notification wakes a wait: when the reported values say it may be
// over, the wait ends on them if they are fresh (as new as this client's
// last change of the object: waitHub.state), and reads what it needs
// otherwise (the guest's addresses, or a confirmation), with
// RetrieveProperties, as before; a task's wait takes its result or fault
// from the values reported with its final state (await.go,
// taskOutcome). A VM a task of the client changes joins the view with the
// task (runTaskOn, keep), so the waits on it that follow find it watched.
// A wait on an object already in the view skips its first read: the
// values reported, and every change since, tell it when to read. A wait
// never relies on notifications alone: while its object is in the view it still
// re-reads every WaitFallbackFactor × PollInterval (a missed notification
// costs at most that), and while it is not (being added, or the collector
// lost with its session and being rebuilt) it polls as it did before the
// collector existed.
//
// The inventory's VM change watch (watch.go) has a collector of
// its own, which never waits on the server; this one is separate.

const (
	// waitLongPollMax bounds one WaitForUpdatesEx of the wait collector
	// (its MaxWaitSeconds; also at most half the request timeout, so the
	// server's answer always comes inside the request's bound). While
	// some wait is open and nothing changes, the collector costs one
	// request per this period; with no wait open, none once the poll in
	// flight ended.
	waitLongPollMax = 10 * time.Second

	// WaitFallbackFactor × PollInterval is how often a wait whose object
	// is in the view re-reads it anyway: a notification vCenter never
	// sends (or that is lost) delays the wait by at most that. Ten
	// seconds with the default poll interval: ten times fewer reads than
	// the poll it replaces.
	WaitFallbackFactor = 10

	// waitControlTimeout bounds the wait collector's small requests
	// (making the collector, its view and its filter, ModifyListView,
	// DestroyView): vCenter answers them at once, and a stuck one must
	// not hold the loop (and so every new wait's registration) for a
	// whole request timeout.
	waitControlTimeout = 5 * time.Second

	// waitRebuildMin and waitRebuildMax bound the back-off between two
	// failed attempts to make the wait collector (vCenter refusing it):
	// meanwhile every wait polls.
	waitRebuildMin = time.Second
	waitRebuildMax = 30 * time.Second

	// waitViewStaleMax is how many objects no wait needs any more the
	// view keeps: they leave it with the addition that finds that many.
	// Taking them out costs no request of its own, but a change of the
	// view that removes objects makes the pinned simulator report every
	// object of the view again (vCenter reports the removed ones
	// leaving), which in a burst of waits it would do at every addition.
	waitViewStaleMax = 16

	// taskPollMin is the first delay when a task is polled (before it is
	// in the wait collector's view, or without the collector); it doubles
	// up to the poll interval, so quick tasks finish quickly and long ones
	// cost one request per interval.
	taskPollMin = 25 * time.Millisecond
)

// waitProps are the properties the wait filter reports, by object type:
// scalars, and a task's result and fault, which are set once as it ends
// and never changed in place (the simulator hands a slice to a queued
// update live, so a property changed in place would race; see
// docs/inventory-watch.md). A change of any of them wakes the object's
// waits; a task's wait takes its outcome from them (taskOutcome). An
// object of another type is never put in the view: its waits poll.
var waitProps = map[string][]string{
	"VirtualMachine": {"runtime.powerState", "guest.ipAddress", "guest.guestOperationsReady"},
	"Task":           {"info.state", "info.result", "info.error"},
}

// waitHub owns the wait collector of a Collector: its loop goroutine (started
// at the first wait, stopped and joined by close), the collector, its view
// and filter (waitSession, the loop's own), and the waits subscribed to
// each object.
type waitHub struct {
	c   *Collector
	log *slog.Logger

	// kick wakes the loop: an object to add to the view, or close.
	kick chan struct{}
	done chan struct{} // closed when the loop returned
	// rebuildMin and rebuildMax: the rebuild back-off (waitRebuildMin,
	// waitRebuildMax; tests shorten them before the first wait).
	rebuildMin, rebuildMax time.Duration
	// taskPollFirst is a task wait's first poll while its task is not in
	// the view (taskPollMin; tests lengthen it).
	taskPollFirst time.Duration
	// staleMax: waitViewStaleMax (tests lower it).
	staleMax int

	mu      sync.Mutex
	objs    map[types.ManagedObjectReference]*waitObj
	started bool
	closing bool
	stop    context.CancelFunc // cancels the loop's context (last resort at close)
	// live: the collector of the current session answers; an object in
	// its view is notified.
	live bool
	// freezes counts the times the loop stopped polling (no wait open, the
	// last poll answered): the values reported before may miss any change
	// since (waitObj.known).
	freezes int
	frozen  bool // the loop polls no more (for tests)
	// stats, for tests: collectors and views made, ModifyListView calls,
	// and the back-off before each retry of a failed rebuild.
	collectors, views, viewChanges int
	retries                        []time.Duration
}

// waitObj is one object that a wait waits on, or waited on and that is
// still in the view.
type waitObj struct {
	inView bool // in the session's view: its changes are notified
	failed bool // vCenter refused it in the view: its waits poll
	// kept: to be added to the view with the next addition although no
	// wait needs it yet (keep): a VM a task of the spawn is about to
	// change, which its next waits then find watched.
	kept bool
	// acting: tasks of this client on the object under way (touch);
	// known: the values reported are at least as new as the effects of
	// the last of them: its outcome came from a notification (settle;
	// vCenter reports an object's changes no later than the end of the
	// task that made them), or the object entered the view after it
	// ended. Then a wait may take them as they are (state's fresh).
	acting int
	known  bool
	// touchedAt, knownAt: waitHub.freezes when the last task began and
	// when known was set; known holds only while no freeze came since.
	touchedAt, knownAt int
	vals               map[string]any
	subs               map[*waitSub]struct{}
}

// waitSub is one wait's subscription to its object's notifications.
type waitSub struct {
	obj types.ManagedObjectReference
	// wake is signalled (never blocking) when the object changed, entered
	// the view, or the collector was lost.
	wake chan struct{}
	// dirty (under waitHub.mu): read again whatever the values say: the
	// collector was lost, or the object left or is missing.
	dirty bool
	// adding (under waitHub.mu): the object is being added to the view
	// for this wait (it subscribed before the ModifyListView was sent);
	// entered: it entered the view so, and its values were reported
	// since. Every value reported from then on was read by vCenter after
	// the wait began: the wait may take them as they are (state's
	// fresh). The values of an object already in the view when the wait
	// began may predate it (no poll runs while no wait is open).
	adding, entered bool
}

// waitSession is the collector of one session: zero when there is none.
type waitSession struct {
	pc, view types.ManagedObjectReference
	gen      int64
	version  string
	// endPoll cancels the request of pc's long poll in flight; nil when
	// none is.
	endPoll context.CancelFunc
}

// stopPoll cancels s's long poll in flight, if any: once the collector is
// lost, or at close, its answer no longer matters.
func (s *waitSession) stopPoll() {
	if s.endPoll != nil {
		s.endPoll()
		s.endPoll = nil
	}
}

// waitAnswer is a long poll's answer, with the collector it polled.
type waitAnswer struct {
	pc  types.ManagedObjectReference
	res *types.WaitForUpdatesExResponse
	err error
}

func newWaitHub(c *Collector) *waitHub {
	return &waitHub{
		c:             c,
		log:           c.log,
		kick:          make(chan struct{}, 1),
		done:          make(chan struct{}),
		rebuildMin:    waitRebuildMin,
		rebuildMax:    waitRebuildMax,
		taskPollFirst: taskPollMin,
		staleMax:      waitViewStaleMax,
		objs:          map[types.ManagedObjectReference]*waitObj{},
	}
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
// wakes it (to add obj to the view, and to long-poll). A wait on an object
// whose values the filter reported already is woken at once to look at
// them. nil after close: the wait polls.
func (h *waitHub) subscribe(obj types.ManagedObjectReference) *waitSub {
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
	if o.inView && o.vals != nil {
		s.signal(false)
	}
	h.mu.Unlock()
	h.poke()
	return s
}

// keep asks for obj to join the view with the next addition, without a
// wait on it: the caller is about to start a task that changes it and
// then to wait on it (a VM about to be claimed or powered on), and its
// entering the view then shares the task's ModifyListView and long
// poll. Until a wait needs it, it counts as one no wait needs (it leaves
// the view with the stale ones). Nothing after close.
func (h *waitHub) keep(obj types.ManagedObjectReference) {
	if _, ok := waitProps[obj.Type]; !ok {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closing {
		return
	}
	o := h.objs[obj]
	if o == nil {
		o = &waitObj{subs: map[*waitSub]struct{}{}}
		h.objs[obj] = o
	}
	if !o.inView {
		o.kept = true
	}
}

// touch records that a task of this client that changes obj starts: until
// it ended (settle), obj's reported values may predate its effects.
func (h *waitHub) touch(obj types.ManagedObjectReference) {
	h.mu.Lock()
	defer h.mu.Unlock()
	o := h.objs[obj]
	if o == nil {
		o = &waitObj{subs: map[*waitSub]struct{}{}}
		h.objs[obj] = o
	}
	o.acting++
	o.known, o.touchedAt = false, h.freezes
}

// settle records that a task touch announced ended; notified: its outcome
// came from the notification of its end, so obj's values, reported in
// the same or an earlier update, are as new as its effects.
func (h *waitHub) settle(obj types.ManagedObjectReference, notified bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	o := h.objs[obj]
	if o == nil || o.acting == 0 {
		return
	}
	o.acting--
	// A freeze since the task began: its end may have been reported
	// before changes that no poll reported since.
	o.known, o.knownAt = notified && o.acting == 0 && o.touchedAt == h.freezes, h.freezes
}

// isLive tells whether the collector of the current session answers: an
// object added to its view is reported with its current values.
func (h *waitHub) isLive() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.live && !h.closing
}

// reported returns obj's last reported value of prop when obj is in the
// view of a live collector and the value was reported. It may predate the
// caller's last change of obj by a notification's delay: a hint, never
// the proof that something happened.
func (h *waitHub) reported(obj types.ManagedObjectReference, prop string) (any, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	o := h.objs[obj]
	if !h.live || o == nil || !o.inView || o.vals == nil {
		return nil, false
	}
	v, ok := o.vals[prop]
	return v, ok
}

// watched tells whether obj is in the view of a live collector with its
// values reported: a wait on it learns of every change from them on.
func (h *waitHub) watched(obj types.ManagedObjectReference) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	o := h.objs[obj]
	return h.live && o != nil && o.inView && o.vals != nil
}

// unsubscribe ends a wait. Its object stays in the view until the next
// addition takes it out (or a new wait on it keeps it): ending a wait
// sends no request.
func (h *waitHub) unsubscribe(s *waitSub) {
	if s == nil {
		return
	}
	h.mu.Lock()
	if o := h.objs[s.obj]; o != nil {
		delete(o.subs, s)
	}
	h.mu.Unlock()
}

// state returns whether s's object is in the view of a live collector,
// takes its dirty flag and copies its object's last reported values (nil
// when the filter has not reported it yet); fresh: the values are as new
// as this client's last change of the object, so a wait may take them as
// they are: the object entered the view for this wait, so every value
// reported was read after it began (waitSub.entered), or no task of the
// client on it is under way and the last one's end was notified
// (waitObj.known).
func (h *waitHub) state(s *waitSub) (live, dirty, fresh bool, vals map[string]any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	dirty, s.dirty = s.dirty, false
	o := h.objs[s.obj]
	if o == nil {
		return false, dirty, false, nil
	}
	live = h.live && o.inView
	fresh = live && o.vals != nil && (s.entered || (o.acting == 0 && o.known && o.knownAt == h.freezes))
	if o.vals != nil {
		vals = make(map[string]any, len(o.vals))
		for k, v := range o.vals {
			vals[k] = v
		}
	}
	return live, dirty, fresh, vals
}

// poke wakes the loop.
func (h *waitHub) poke() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// signal wakes the wait, marking it dirty when asked. The caller holds
// waitHub.mu.
func (s *waitSub) signal(dirty bool) {
	if dirty {
		s.dirty = true
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// signal wakes every wait on o. The caller holds waitHub.mu.
func (o *waitObj) signal(dirty bool) {
	for s := range o.subs {
		s.signal(dirty)
	}
}

// setLive records whether the collector works. When it is lost every
// object is out of the view (it went with the collector's session, or is
// rebuilt) and every wait is woken: they read again and poll until their
// object is in a new view (a change meanwhile is not notified).
func (h *waitHub) setLive(live bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	was := h.live
	h.live = live
	if live {
		return // each wait is woken when its object enters the view
	}
	for _, o := range h.objs {
		o.inView, o.vals, o.failed, o.kept = false, nil, false, false
		for s := range o.subs {
			s.adding, s.entered = false, false
		}
		if was {
			o.signal(true)
		}
	}
}

// WaitCounts are the wait collector's counters, for tests and
// diagnostics: Collectors and Views made, ModifyListView calls so far;
// Objects waited on now, InView the objects in the view now (those of
// ended waits stay until the next addition); Live: the collector of the
// current session answers; Frozen: no poll in flight nor to come until a
// wait opens; Retries: the back-off before each retry of a failed
// rebuild.
type WaitCounts struct {
	Collectors, Views, ViewChanges, Objects, InView int
	Live, Frozen                                    bool
	Retries                                         []time.Duration
}

// WaitCounts returns the wait collector's counters.
func (c *Collector) WaitCounts() WaitCounts {
	h := c.waits
	h.mu.Lock()
	defer h.mu.Unlock()
	n := WaitCounts{Collectors: h.collectors, Views: h.views, ViewChanges: h.viewChanges, Live: h.live, Frozen: h.frozen, Retries: append([]time.Duration(nil), h.retries...)}
	for _, o := range h.objs {
		if len(o.subs) > 0 {
			n.Objects++
		}
		if o.inView {
			n.InView++
		}
	}
	return n
}

// SetWaitTuning replaces the wait collector's rebuild back-off
// (waitRebuildMin doubling to waitRebuildMax), a task wait's first poll
// while its task is not in the view (taskPollMin) and how many objects no
// wait needs the view keeps (waitViewStaleMax); a zero value keeps the
// current one. Tests use it, before the first wait.
func (c *Collector) SetWaitTuning(rebuildMin, rebuildMax, taskPollFirst time.Duration, staleMax int) {
	h := c.waits
	h.mu.Lock()
	defer h.mu.Unlock()
	if rebuildMin > 0 {
		h.rebuildMin = rebuildMin
	}
	if rebuildMax > 0 {
		h.rebuildMax = rebuildMax
	}
	if taskPollFirst > 0 {
		h.taskPollFirst = taskPollFirst
	}
	if staleMax > 0 {
		h.staleMax = staleMax
	}
}
