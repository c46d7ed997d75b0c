package vim

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/types"
)

// The wait collector's loop (waits.go holds the waits' subscriptions and
// the objects' state): the session's collector, view and filter made and
// made again after a loss, the view kept to what the waits need, the long
// poll kept in flight and its updates handed to the waits, and the
// collector destroyed at close.
// longPollSeconds is the long poll's MaxWaitSeconds.
func (h *waitHub) longPollSeconds() int32 {
	d := min(waitLongPollMax, h.c.requestTimeout/2)
	return int32(max(d/time.Second, 1))
}

// run is the loop: while some wait is open it makes the collector (again
// after a loss, with a back-off when vCenter refuses it), adds the waits'
// objects to the view, keeps one long poll in flight and hands its
// updates to the waits. It returns at close (or when ctx ends), after
// destroying the collector and its view.
func (h *waitHub) run(ctx context.Context) {
	defer close(h.done)
	var (
		s        waitSession
		answers  = make(chan waitAnswer, 1)
		inflight int  // long polls not answered yet (an old collector's among them)
		polling  bool // a long poll of s is in flight
		frozen   bool // no poll since the last one answered (waitHub.freezes)
		retry    *time.Timer
		backoff  = h.rebuildMin
	)
	for {
		h.mu.Lock()
		closing, open := h.closing, h.anySubsLocked()
		h.mu.Unlock()
		if closing || ctx.Err() != nil {
			h.closeSession(ctx, s, inflight, answers)
			return
		}
		if s.pc.Value != "" && s.gen != h.c.gen() {
			// The session changed: the collector died with the old one.
			s, polling = h.lose(ctx, s, nil), false
		}
		if open && s.pc.Value == "" && retry == nil {
			var err error
			if s, err = h.build(ctx); err != nil {
				// vCenter not answering is the outage's line
				// (internal/vcenter's Client.note), not one per attempt here.
				level := slog.LevelWarn
				if IsTransport(err) {
					level = slog.LevelDebug
				}
				h.log.Log(ctx, level, "make vcenter wait collector: waits poll meanwhile", "retry_in", backoff, logkey.Err, err)
				h.mu.Lock()
				h.retries = append(h.retries, backoff)
				h.mu.Unlock()
				retry = time.NewTimer(backoff)
				backoff = min(backoff*2, h.rebuildMax)
			} else {
				backoff = h.rebuildMin
			}
		}
		if open && s.pc.Value != "" {
			if err := h.syncView(ctx, s); err != nil {
				s, polling = h.lose(ctx, s, err), false
				continue
			}
			if !polling {
				polling, inflight = true, inflight+1
				frozen = false
				h.mu.Lock()
				h.frozen = false
				h.mu.Unlock()
				pctx, cancel := context.WithCancel(ctx)
				s.endPoll = cancel
				go h.poll(pctx, s, answers)
			}
		}
		if !polling && !frozen {
			// No poll from now on until a wait opens: the values
			// reported so far may go stale.
			frozen = true
			h.mu.Lock()
			h.freezes++
			h.frozen = true
			h.mu.Unlock()
		}
		var again <-chan time.Time
		if retry != nil {
			again = retry.C
		}
		select {
		case <-ctx.Done():
		case <-h.kick:
		case <-again:
			retry = nil
		case a := <-answers:
			inflight--
			if a.pc != s.pc {
				continue // a lost collector's last answer
			}
			polling = false
			s.stopPoll() // answered: release its context
			s = h.answered(ctx, s, a)
		}
	}
}

// poll runs one long poll of s and hands its answer to the loop.
func (h *waitHub) poll(ctx context.Context, s waitSession, answers chan<- waitAnswer) {
	wait := h.longPollSeconds()
	res, err := methods.WaitForUpdatesEx(ctx, h.c.vim, &types.WaitForUpdatesEx{
		This:    s.pc,
		Version: s.version,
		Options: &types.WaitOptions{MaxWaitSeconds: &wait},
	})
	answers <- waitAnswer{pc: s.pc, res: res, err: err}
}

// answered takes a long poll's answer: updates go to the waits; a failed
// poll loses the collector.
func (h *waitHub) answered(ctx context.Context, s waitSession, a waitAnswer) waitSession {
	switch {
	case a.err == nil:
		if set := a.res.Returnval; set != nil {
			s.version = set.Version
			h.deliver(set)
		}
		return s
	case ctx.Err() != nil, IsRequestCanceled(a.err):
		return s // closing; or cancelled by someone else: poll again
	default:
		return h.lose(ctx, s, a.err)
	}
}

// lose forgets the collector s after err (nil: its session ended) and
// wakes every wait to poll until the loop rebuilds it. A poll of s still
// in flight is cancelled: the loop ignores its answer, and nothing else
// would end it before the request timeout (vCenter ends a poll when its
// collector is destroyed, and a retired one is destroyed only
// WatchRetireDelay later).
func (h *waitHub) lose(ctx context.Context, s waitSession, err error) waitSession {
	s.stopPoll()
	h.setLive(false)
	if err != nil {
		h.dropCollector(ctx, s, err)
	}
	h.log.Debug("vcenter wait collector lost: waits poll until it is rebuilt", "collector", s.pc.Value, logkey.Err, err)
	return waitSession{}
}

// build makes the session's collector, its (empty) view and the filter
// over the view: three requests, once per session. Retired collectors of
// this session due for destruction are destroyed first.
func (h *waitHub) build(ctx context.Context) (waitSession, error) {
	h.c.destroyRetiredWatches(ctx)
	s := waitSession{gen: h.c.gen()}
	cctx, cancel := context.WithTimeout(ctx, waitControlTimeout)
	defer cancel()
	pc, err := h.c.pc.Create(cctx)
	if err != nil {
		return waitSession{}, fmt.Errorf("create wait collector in datacenter %q: %w", h.c.dc, err)
	}
	s.pc = pc.Reference()
	view, err := methods.CreateListView(cctx, h.c.vim, &types.CreateListView{This: *h.c.vim.ServiceContent.ViewManager})
	if err != nil {
		h.destroyCollector(ctx, s)
		return waitSession{}, fmt.Errorf("create wait view in datacenter %q: %w", h.c.dc, err)
	}
	s.view = view.Returnval
	if _, err := methods.CreateFilter(cctx, h.c.vim, &types.CreateFilter{This: s.pc, Spec: waitFilterSpec(s.view)}); err != nil {
		h.destroyCollector(ctx, s)
		return waitSession{}, fmt.Errorf("create wait filter on view %s: %w", s.view.Value, err)
	}
	h.mu.Lock()
	h.collectors++
	h.views++
	h.mu.Unlock()
	h.setLive(true)
	return s, nil
}

// waitFilterSpec is the wait filter: waitProps of every object in view,
// not the view itself; objects that vanish are reported missing.
func waitFilterSpec(view types.ManagedObjectReference) types.PropertyFilterSpec {
	spec := types.PropertyFilterSpec{
		ObjectSet: []types.ObjectSpec{{
			Obj:       view,
			Skip:      types.NewBool(true),
			SelectSet: []types.BaseSelectionSpec{&types.TraversalSpec{Type: "ListView", Path: "view", Skip: types.NewBool(false)}},
		}},
		ReportMissingObjectsInResults: types.NewBool(true),
	}
	for _, typ := range []string{"Task", "VirtualMachine"} {
		spec.PropSet = append(spec.PropSet, types.PropertySpec{Type: typ, PathSet: waitProps[typ]})
	}
	return spec
}

// syncView adds the objects waits need to the view, taking out with them
// those no wait needs any more once they are staleMax (one
// ModifyListView), and forgets objects no wait needs that are not in the
// view. With nothing to add it sends
// nothing. An error means the collector is lost.
func (h *waitHub) syncView(ctx context.Context, s waitSession) error {
	var add, remove []types.ManagedObjectReference
	h.mu.Lock()
	for ref, o := range h.objs {
		needed := len(o.subs) > 0 || o.kept
		switch {
		case needed && !o.inView && !o.failed:
			if _, ok := waitProps[ref.Type]; ok { // the filter reports no other type: its waits poll
				add = append(add, ref)
				for s := range o.subs {
					s.adding = true
				}
			}
		case needed || o.acting > 0:
		case o.inView:
			remove = append(remove, ref)
		default:
			delete(h.objs, ref)
		}
	}
	h.mu.Unlock()
	if len(add) == 0 {
		return nil
	}
	if len(remove) < h.staleMax {
		remove = nil
	}
	cctx, cancel := context.WithTimeout(ctx, waitControlTimeout)
	defer cancel()
	res, err := methods.ModifyListView(cctx, h.c.vim, &types.ModifyListView{This: s.view, Add: add, Remove: remove})
	if err != nil {
		return fmt.Errorf("modify wait view %s: %w", s.view.Value, err)
	}
	unresolved := map[types.ManagedObjectReference]bool{}
	for _, ref := range res.Returnval {
		unresolved[ref] = true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.viewChanges++
	for _, ref := range remove {
		if o := h.objs[ref]; len(o.subs) == 0 && !o.kept && o.acting == 0 {
			delete(h.objs, ref)
		} else {
			o.inView, o.vals = false, nil // a new wait: added at the next turn
		}
	}
	// Only this loop deletes objects: each added one is still there.
	for _, ref := range add {
		o := h.objs[ref]
		o.kept = false
		if unresolved[ref] {
			o.failed = true // its waits read (and learn it is gone) and poll
			o.signal(true)
			continue
		}
		// Live from now: its waits stop polling; the filter reports its
		// values as it enters the view. Those that asked for it take
		// them as they are.
		o.inView = true
		// The values it enters with are read after this addition: as
		// new as any change of the client that ended before it.
		o.known, o.knownAt = o.acting == 0, h.freezes
		for s := range o.subs {
			s.entered, s.adding = s.adding, false
		}
		o.signal(false)
	}
	return nil
}

// deliver merges an update set into the objects' values and wakes the
// waits of each object whose values changed (or were reported for the
// first time); an object that left (or is reported missing) marks them
// dirty, so that their read reports it.
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
				o.vals = nil
				o.signal(true)
				continue
			}
			changed := o.vals == nil
			if o.vals == nil {
				o.vals = map[string]any{}
			}
			for _, ch := range ou.ChangeSet {
				old, had := o.vals[ch.Name]
				switch ch.Op {
				case types.PropertyChangeOpRemove, types.PropertyChangeOpIndirectRemove:
					delete(o.vals, ch.Name)
					changed = changed || had
				default:
					o.vals[ch.Name] = ch.Val
					changed = changed || !had || !reflect.DeepEqual(old, ch.Val)
				}
			}
			if changed {
				o.signal(false)
			}
		}
		for _, miss := range fu.MissingSet {
			if o := h.objs[miss.Obj]; o != nil {
				o.signal(true)
			}
		}
	}
}

// dropCollector forgets a collector whose request failed, with its view:
// one whose poll got no answer may still be waited on by the server and
// is retired (destroyed WatchRetireDelay later, as the watch's:
// watch.go); one that answered a fault is destroyed now unless it
// is gone with its session.
func (h *waitHub) dropCollector(ctx context.Context, s waitSession, err error) {
	if s.gen != h.c.gen() || IsNotAuthenticated(err) {
		return
	}
	if at := h.c.abandonedAt(err); !at.IsZero() {
		h.c.watchMu.Lock()
		h.c.retired = append(h.c.retired, retiredWatch{ref: s.pc, gen: s.gen, at: at})
		h.c.watchMu.Unlock()
		h.destroyView(ctx, s)
		return
	}
	h.destroyCollector(ctx, s)
}

// destroyCollector destroys the collector (and so its filter, and any poll
// of it in flight) and the view, best effort, when they belong to the
// current session.
func (h *waitHub) destroyCollector(ctx context.Context, s waitSession) {
	if s.gen != h.c.gen() {
		return
	}
	if s.pc.Value != "" {
		h.c.destroyWatchCollector(context.WithoutCancel(ctx), s.pc)
	}
	h.destroyView(ctx, s)
}

// destroyView destroys the collector's view, best effort.
func (h *waitHub) destroyView(ctx context.Context, s waitSession) {
	if s.view.Value == "" {
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), waitControlTimeout)
	defer cancel()
	if _, err := methods.DestroyView(dctx, h.c.vim, &types.DestroyView{This: s.view}); err != nil {
		h.log.Debug("destroy wait view", "view", s.view.Value, logkey.Err, err)
	}
}

// closeSession destroys the collector (vCenter ends its poll in flight)
// and the view at close, cancels that poll's request (it is still in
// flight when the destroy failed or the collector went with an older
// session), then joins the polls in flight: each returns at once, as a
// lost or retired collector's poll was cancelled when it was lost (lose).
func (h *waitHub) closeSession(ctx context.Context, s waitSession, inflight int, answers <-chan waitAnswer) {
	if s.pc.Value != "" {
		h.destroyCollector(ctx, s)
	}
	s.stopPoll()
	for ; inflight > 0; inflight-- {
		<-answers
	}
}

// close stops the loop and joins it, bounded by ctx: the loop destroys its
// collector and view, which ends its long poll on the server, and cancels
// the requests of its polls still in flight; past ctx the loop's own
// request is abandoned instead.
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
