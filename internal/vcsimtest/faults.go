package vcsimtest

import (
	"github.com/vmware/govmomi/simulator"
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
