package vcsimtest

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// GuestCall is one StartProgramInGuest the fake accepted or refused.
type GuestCall struct {
	VM               string
	User             string
	ProgramPath      string
	Arguments        string
	EnvVariables     []string
	WorkingDirectory string
	// Pid is the pid returned (0 when the call failed).
	Pid int64
	// Fault is the fault returned (nil on success).
	Fault types.BaseMethodFault
	// Windows tells that the VM's guest family is Windows's: the call
	// was checked as a Windows guest does (checkWindows, guestwin.go).
	Windows bool
}

// FakeGuest replaces the simulator's guest process manager, whose
// StartProgramInGuest needs Docker. Like a real guest it refuses
// a VM that is not powered on (InvalidPowerState), whose tools are not
// ready (GuestOperationsUnavailable), or wrong credentials
// (InvalidGuestLogin). A VM whose guest family is Windows's plays a
// Windows guest (guestwin.go): PowerShell only, a launch's config and
// script in its environment, none on its command line. It records every
// call. Safe for concurrent use.
type FakeGuest struct {
	*simulator.GuestProcessManager

	mu       sync.Mutex
	user     string
	password string
	calls    record[GuestCall]
	nextPid  int64
	failures []types.BaseMethodFault
	runner   *GuestRunner // Options.Runner; nil: nothing runs
	// exitCode is the exit code of a started program (SetExitCode).
	exitCode func(GuestCall) int32

	// winLaunches are the worker launches Windows guests accepted.
	winLaunches record[WindowsLaunch]
	// files are the files its programs wrote (guest_files.go).
	files guestFiles
}

func installFakeGuest(e *Env, user, password string) (*FakeGuest, error) {
	m := e.Model.Map()
	pms := m.AllReference("GuestProcessManager")
	if len(pms) != 1 {
		return nil, fmt.Errorf("install fake guest: simulator has %d guest process managers, want 1", len(pms))
	}
	orig, ok := pms[0].(*simulator.GuestProcessManager)
	if !ok {
		return nil, fmt.Errorf("install fake guest: guest process manager is a %T", pms[0])
	}
	f := &FakeGuest{GuestProcessManager: orig, user: user, password: password, nextPid: 1000}
	m.Put(f)
	return f, nil
}

// SetCredentials changes the guest account the fake accepts.
func (f *FakeGuest) SetCredentials(user, password string) {
	f.mu.Lock()
	f.user, f.password = user, password
	f.mu.Unlock()
}

// FailNext makes the next calls fail with these faults, in order (after
// the power and credential checks pass).
func (f *FakeGuest) FailNext(faults ...types.BaseMethodFault) {
	f.mu.Lock()
	f.failures = append(f.failures, faults...)
	f.mu.Unlock()
}

// Calls returns a copy of every call so far, oldest first.
func (f *FakeGuest) Calls() []GuestCall { return f.calls.all() }

// CallsFor returns the calls made for one VM.
func (f *FakeGuest) CallsFor(vm string) []GuestCall {
	var out []GuestCall
	for _, c := range f.Calls() {
		if c.VM == vm {
			out = append(out, c)
		}
	}
	return out
}

// WaitForCalls blocks until at least n calls were made or ctx ends, and
// returns the calls; no polling.
func (f *FakeGuest) WaitForCalls(ctx context.Context, n int) ([]GuestCall, error) {
	return f.calls.wait(ctx, n)
}

// StartProgramInGuest is the simulator method the fake overrides.
func (f *FakeGuest) StartProgramInGuest(ctx *simulator.Context, req *types.StartProgramInGuest) soap.HasFault {
	body := new(methods.StartProgramInGuestBody)
	call := GuestCall{}
	if spec, ok := req.Spec.(*types.GuestProgramSpec); ok {
		call.ProgramPath = spec.ProgramPath
		call.Arguments = spec.Arguments
		call.EnvVariables = slices.Clone(spec.EnvVariables)
		call.WorkingDirectory = spec.WorkingDirectory
	}
	var pass string
	if auth, ok := req.Auth.(*types.NamePasswordAuthentication); ok {
		call.User, pass = auth.Username, auth.Password
	}

	var fault types.BaseMethodFault
	vm, ok := ctx.Map.Get(req.Vm).(*simulator.VirtualMachine)
	if !ok {
		fault = &types.ManagedObjectNotFound{Obj: req.Vm}
	} else {
		var state types.VirtualMachinePowerState
		ready := false
		ctx.WithLock(vm, func() {
			call.VM = vm.Name
			state = vm.Runtime.PowerState
			ready = vm.Guest != nil && vm.Guest.GuestOperationsReady != nil && *vm.Guest.GuestOperationsReady
			call.Windows = vm.Guest != nil && vm.Guest.GuestFamily == WindowsGuestFamily
		})
		fault = guestOpsFault(state, ready)
	}

	f.mu.Lock()
	if fault == nil && (call.User != f.user || pass != f.password) {
		fault = new(types.InvalidGuestLogin)
	}
	if fault == nil && len(f.failures) > 0 {
		fault, f.failures = f.failures[0], f.failures[1:]
	}
	var winLaunch *WindowsLaunch
	if fault == nil && call.Windows {
		spec, _ := req.Spec.(*types.GuestProgramSpec)
		winLaunch, fault = checkWindows(call.VM, spec)
	}
	if fault == nil {
		f.nextPid++
		call.Pid = f.nextPid
	}
	call.Fault = fault
	f.mu.Unlock()
	f.calls.add(call)
	if fault == nil {
		f.files.write(call)
	}
	if winLaunch != nil {
		f.winLaunches.add(*winLaunch)
	}

	// The runner plays Linux guests only: this machine runs no PowerShell.
	if fault == nil && !call.Windows {
		if spec, ok := req.Spec.(*types.GuestProgramSpec); ok {
			if err := f.runnerLaunch(req.Vm, call.VM, spec); err != nil {
				fault = &types.SystemError{Reason: err.Error()}
			}
		}
	}
	if fault != nil {
		body.Fault_ = simulator.Fault("", fault)
		return body
	}
	body.Res = &types.StartProgramInGuestResponse{Returnval: call.Pid}
	return body
}

// newFinder is a finder over every object of c's inventory.
func newFinder(c *vim25.Client) *find.Finder { return find.NewFinder(c, true) }

// guestOpsFault is vCenter's answer to a guest operation on a VM in state
// whose guest operations are ready or not: InvalidPowerState when it is
// not powered on, GuestOperationsUnavailable when its Tools are not
// ready, nil when the operation may run. The fake guest's processes and
// files answer by it.
func guestOpsFault(state types.VirtualMachinePowerState, ready bool) types.BaseMethodFault {
	switch {
	case state != types.VirtualMachinePowerStatePoweredOn:
		return &types.InvalidPowerState{RequestedState: types.VirtualMachinePowerStatePoweredOn, ExistingState: state}
	case !ready:
		return new(types.GuestOperationsUnavailable)
	}
	return nil
}
