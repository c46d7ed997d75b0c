package vcsimtest

import (
	"sync"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// The simulator's property collectors, made to destroy as vCenter does:
// a collector destroyed while one of its WaitForUpdatesEx calls runs ends
// that call, and the call never reads a filter the destroy removed.
//
// Govmomi's simulator v0.56.0 does not: DestroyPropertyCollector cancels
// the running wait and removes the collector's filters from the session
// at once, while the wait, woken by a change just before, may be ranging
// over the collector's filter list, unlocked; it then looks a removed
// filter up and panics ("interface conversion: mo.Reference is nil, not
// *simulator.PropertyFilter", in WaitForUpdatesEx), which the HTTP server
// logs and turns into a broken connection. A client destroys a collector
// under its own wait whenever it gives up on that wait: govmomi's
// property.Wait (task.Wait, WaitForResult) destroys its collector when
// its context ends mid-wait, which the tests and the demo's driver do at
// shutdown, and the hatchery retires an abandoned collector
// (vcenter's watchRetireDelay) and destroys it later. On a loaded machine
// the wait is descheduled mid-range long enough for the destroy to land.
//
// guardCollectors wraps each session's collector at its first call with
// guardedCollector, whose DestroyPropertyCollector cancels the collector's
// waits and lets them return before it destroys anything; a wait called
// once the destroy began finds the collector gone (ManagedObjectNotFound). Filters
// destroyed one by one (DestroyPropertyFilter) are not guarded: a client
// destroying a filter while its own long poll runs would need the
// simulator to lock the range; the hatchery destroys its watch filters
// only between two polls of their collector (internal/vcenter/
// internal/vcenter/vim/watch.go), and its wait filter only with its collector
// (internal/vcenter/vim/waits.go).

// collectorDrainMax bounds how long a destroy waits for the collector's
// waits to return. A wait the destroy's cancel reaches returns at the end
// of the simulator's pass over the changes in hand (a 20 ms tick; seconds
// under -race on a loaded machine with many filters); one it cannot
// reach (an older wait of the same collector, whose cancel the simulator
// forgot when a newer one began) returns at its MaxWaitSeconds, which the
// hatchery keeps at 10 s at most. Past the bound the destroy goes ahead,
// as the simulator alone would.
const collectorDrainMax = 2 * time.Minute

// guardedCollector is a session's property collector whose destroy waits
// for its running waits.
type guardedCollector struct {
	*simulator.PropertyCollector

	mu       sync.Mutex
	inflight int
	idle     chan struct{} // closed (and replaced) when inflight drops to 0
	// destroyed: a destroy began; a wait called since finds the
	// collector gone (ManagedObjectNotFound), as on vCenter, instead of
	// ranging over filters the destroy is removing.
	destroyed bool
	// polling holds a token while one of the collector's long polls
	// computes: the simulator keeps a poll's state (its pending update
	// set, its cancel func) on the collector itself, unlocked, so two
	// polls at once race on it (see serialPoll).
	polling chan struct{}
	// scope is what the collector's filters list, which changes its polls
	// hear of (pollscope.go); nil for a collector of the service instance,
	// which sessions share.
	scope *pollScope
}

func newGuardedCollector(pc *simulator.PropertyCollector, scoped bool, listed *listedRefs) *guardedCollector {
	g := &guardedCollector{PropertyCollector: pc, idle: make(chan struct{}), polling: make(chan struct{}, 1)}
	if scoped {
		g.scope = &pollScope{objs: map[types.ManagedObjectReference]bool{}, listed: listed}
	}
	return g
}

// serialPoll runs poll, one long poll of the collector at a time. A poll
// that finds an older one still running ends it first (CancelWaitForUpdates,
// again at each tick: the older may not have set its cancel func yet),
// then computes: the newer poll is the one its client waits for. An older
// poll is still running when its client gave up on it (the hatchery's
// bounded request, under load), and the client polls the same collector
// again; vCenter answers each poll from the collector's own consistent
// state, while the simulator v0.56.0 reads and writes the collector's
// pending update set from both calls unlocked (a data race under -race,
// seen in internal/vsphere's instant-clone tests on a loaded machine).
func (g *guardedCollector) serialPoll(this types.ManagedObjectReference, poll func() soap.HasFault) soap.HasFault {
	select {
	case g.polling <- struct{}{}:
	default:
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for taken := false; !taken; {
			g.PropertyCollector.CancelWaitForUpdates(&types.CancelWaitForUpdates{This: this})
			select {
			case g.polling <- struct{}{}:
				taken = true
			case <-tick.C:
			}
		}
	}
	defer func() { <-g.polling }()
	return poll()
}

// WaitForUpdatesEx is the simulator's, counted in flight, one at a time
// (serialPoll); once a destroy began, ManagedObjectNotFound.
func (g *guardedCollector) WaitForUpdatesEx(ctx *simulator.Context, r *types.WaitForUpdatesEx) soap.HasFault {
	if !g.begin() {
		return &methods.WaitForUpdatesExBody{Fault_: simulator.Fault("", &types.ManagedObjectNotFound{Obj: r.This})}
	}
	defer g.end()
	if r.Version == "" {
		defer g.listen(ctx)
	}
	return g.serialPoll(r.This, func() soap.HasFault { return g.PropertyCollector.WaitForUpdatesEx(ctx, r) })
}

// WaitForUpdates is the simulator's (the deprecated long poll), counted
// in flight; once a destroy began, ManagedObjectNotFound.
func (g *guardedCollector) WaitForUpdates(ctx *simulator.Context, r *types.WaitForUpdates) soap.HasFault {
	if !g.begin() {
		return &methods.WaitForUpdatesBody{Fault_: simulator.Fault("", &types.ManagedObjectNotFound{Obj: r.This})}
	}
	defer g.end()
	if r.Version == "" {
		defer g.listen(ctx)
	}
	return g.serialPoll(r.This, func() soap.HasFault { return g.PropertyCollector.WaitForUpdates(ctx, r) })
}

// CreateFilter is the simulator's, followed by a change of nothing any
// filter lists, queued on the collector: vCenter reports a new filter's
// objects at the collector's next poll, while the simulator v0.56.0
// computes them only when some inventory change reaches the collector (a
// quiet inventory never reports them). The queued change is such a change;
// no filter reports it (it names the new filter, which no filter lists).
// The filter's objects join the collector's scope first (pollscope.go).
func (g *guardedCollector) CreateFilter(ctx *simulator.Context, r *types.CreateFilter) soap.HasFault {
	if g.scope != nil {
		g.scope.add(r.Spec)
	}
	body := g.PropertyCollector.CreateFilter(ctx, r)
	if res, ok := body.(*methods.CreateFilterBody); ok && res.Res != nil {
		g.PropertyCollector.UpdateObject(ctx, res.Res.Returnval, nil)
	}
	return body
}

// DestroyPropertyCollector cancels the collector's running waits and
// waits for them to return (collectorDrainMax at most), then destroys it
// as the simulator does.
func (g *guardedCollector) DestroyPropertyCollector(ctx *simulator.Context, c *types.DestroyPropertyCollector) soap.HasFault {
	g.mu.Lock()
	g.destroyed = true
	g.mu.Unlock()
	deadline := time.NewTimer(collectorDrainMax)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		g.mu.Lock()
		busy, idle := g.inflight > 0, g.idle
		g.mu.Unlock()
		if !busy {
			break
		}
		// Again at every tick: a wait that began after the last cancel
		// replaced the simulator's cancel func with its own.
		g.PropertyCollector.CancelWaitForUpdates(&types.CancelWaitForUpdates{This: c.This})
		select {
		case <-idle:
		case <-tick.C:
			continue
		case <-deadline.C:
		}
		break
	}
	return g.PropertyCollector.DestroyPropertyCollector(ctx, c)
}

// begin counts a wait in flight; false once a destroy began.
func (g *guardedCollector) begin() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.destroyed {
		return false
	}
	g.inflight++
	return true
}

func (g *guardedCollector) end() {
	g.mu.Lock()
	if g.inflight--; g.inflight == 0 {
		close(g.idle)
		g.idle = make(chan struct{})
	}
	g.mu.Unlock()
}

// collectorGuard is the method hook that puts a guardedCollector in place
// of a session's property collector before the call reaches it (the
// session's registry is where the simulator looks the collector up). It
// never answers a call itself.
type collectorGuard struct {
	mu     sync.Mutex
	listed *listedRefs // the list views' objects (pollscope.go)
}

func (cg *collectorGuard) handle(ctx *simulator.Context, m *simulator.Method) (mo.Reference, types.BaseMethodFault) {
	if ctx.Session == nil || m.This.Type != "PropertyCollector" {
		return nil, nil
	}
	cg.mu.Lock()
	defer cg.mu.Unlock()
	if pc, ok := ctx.Session.Get(m.This).(*simulator.PropertyCollector); ok {
		// A collector the session made lives in its registry only; the
		// service instance's, in the model's, is shared by the sessions
		// (each wraps it): its polls hear of every change, as before.
		ctx.Session.Registry.Put(newGuardedCollector(pc, ctx.Map.Get(m.This) == nil, cg.listed))
	}
	return nil, nil
}
