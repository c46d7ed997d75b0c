package vcsimtest

import (
	"net/http"
	"sync"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// Fault describes calls of one vCenter method that the simulator makes
// fail, through its fault injector.
type Fault struct {
	// Method is the SOAP method name, e.g. "CloneVM_Task".
	Method string
	// Probability that a matching call fails; 0 means every call.
	Probability float64
	// Skip is how many matching calls pass before the first failure.
	Skip int
	// Max is how many calls fail at most; 0 means no limit.
	Max int
	// Err is the fault answered; nil answers a SystemError naming the
	// method.
	Err types.BaseMethodFault
	// Network, when set, fails the call as a broken connection instead of
	// answering a fault (Err is then ignored).
	Network bool
}

// InjectFault adds f to the simulator's rules. Rules are tried in the
// order they were added and the first that matches a call answers it.
// Not with Options.SerialTasks, whose queue needs each queued call to
// start its task: the test fails.
func (e *Env) InjectFault(f Fault) {
	if e.gate != nil {
		e.t.Fatalf("vcsimtest: InjectFault(%s) on an Env with SerialTasks", f.Method)
		return
	}
	p := f.Probability
	if p == 0 {
		p = 1
	}
	kind, err := simulator.FaultTypeCustom, f.Err
	if err == nil {
		err = &types.SystemError{Reason: "injected " + f.Method + " fault"}
	}
	if f.Network {
		kind, err = simulator.FaultTypeNetworkFailure, nil
	}
	e.Model.Service.FaultInjector().AddRule(&simulator.FaultInjectionRule{
		MethodName:  f.Method,
		ObjectType:  "*",
		ObjectName:  "*",
		Probability: p,
		FaultType:   kind,
		Fault:       err,
		Message:     "injected " + f.Method + " fault",
		MaxCount:    f.Max,
		SkipCount:   f.Skip,
		Enabled:     true,
	})
}

// InjectedFaults is how many calls the injected faults have failed so far.
func (e *Env) InjectedFaults() int64 {
	n, _ := e.Model.Service.FaultInjector().GetStats()["total_injections"].(int64)
	return n
}

// callRules is a method hook that refuses or holds the next calls of a
// method (Env.RefuseCalls, Env.HoldCalls), for tests whose other calls run
// meanwhile: the simulator's fault injector counts a rule's matches under
// a read lock (govmomi v0.56.0, FaultInjector.ShouldInjectFault), a data
// race once two calls are checked at once.
type callRules struct {
	mu    sync.Mutex
	rules []*callRule
}

// callRule is one rule: the next left calls of method are held for hold
// (or until release is closed), then answered err (nil: let through to
// the simulator), or have their connection dropped (drop).
type callRule struct {
	method  string
	left    int
	hold    time.Duration
	release <-chan struct{}
	err     types.BaseMethodFault
	drop    bool
}

func (r *callRules) add(c *callRule) {
	r.mu.Lock()
	r.rules = append(r.rules, c)
	r.mu.Unlock()
}

func (r *callRules) handle(_ *simulator.Context, m *simulator.Method) (mo.Reference, types.BaseMethodFault) {
	var hit *callRule
	r.mu.Lock()
	for _, c := range r.rules {
		if c.method == m.Name && c.left > 0 {
			c.left--
			hit = c
			break
		}
	}
	r.mu.Unlock()
	if hit == nil {
		return nil, nil
	}
	if hit.hold > 0 {
		// The server's delay being simulated, not a synchronisation.
		time.Sleep(hit.hold)
	}
	if hit.release != nil {
		<-hit.release
	}
	if hit.drop {
		// net/http closes the connection without a response; nothing of
		// the call ran and no lock is held here (installHooks runs the
		// hooks before the simulator's method).
		panic(http.ErrAbortHandler)
	}
	return nil, hit.err
}

// RefuseCalls makes the next n calls of method (e.g.
// "CreatePropertyCollector") fail with f, a SystemError naming the method
// when nil. Unlike InjectFault it is safe while other calls run.
func (e *Env) RefuseCalls(method string, n int, f types.BaseMethodFault) {
	if f == nil {
		f = &types.SystemError{Reason: "refused " + method}
	}
	e.calls.add(&callRule{method: method, left: n, err: f})
}

// HoldCalls holds the next n calls of method for d before the simulator
// runs them: a client whose request timeout is shorter gets no answer
// while the server still runs the call, as from a vCenter that answers
// too late.
func (e *Env) HoldCalls(method string, n int, d time.Duration) {
	e.calls.add(&callRule{method: method, left: n, hold: d})
}

// HoldCallsUntil holds the next n calls of method until release is
// closed, then answers them ManagedObjectNotFound: a call vCenter
// keeps running (a long poll within its wait) until its
// object is gone (its session logged out). Close release before the Env
// closes (a t.Cleanup registered after Start runs first).
func (e *Env) HoldCallsUntil(method string, n int, release <-chan struct{}) {
	e.calls.add(&callRule{method: method, left: n, release: release, err: &types.ManagedObjectNotFound{}})
}

// DropCalls closes the connection of the next n calls of method without
// an answer, before the simulator runs them: a connection broken in the
// middle of a call (a proxy or firewall resetting it), which the client
// sees as a transport failure while its other connections carry on.
func (e *Env) DropCalls(method string, n int) {
	e.calls.add(&callRule{method: method, left: n, drop: true})
}
