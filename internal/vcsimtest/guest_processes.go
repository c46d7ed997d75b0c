package vcsimtest

import (
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// SetExitCode makes the programs the fake started exit with the code
// exit returns for their call (nil: 0), as ListProcessesInGuest reports
// it. The fake's programs end as soon as they start (with a Runner, the
// listing still says what exit returns).
func (f *FakeGuest) SetExitCode(exit func(GuestCall) int32) {
	f.mu.Lock()
	f.exitCode = exit
	f.mu.Unlock()
}

// ListProcessesInGuest is the simulator method the fake overrides: as a
// guest does, it refuses a VM not powered on or not ready and wrong
// credentials, then lists the programs the fake started in that VM
// (those of req.Pids, every one when none), ended, with their exit code
// (SetExitCode).
func (f *FakeGuest) ListProcessesInGuest(ctx *simulator.Context, req *types.ListProcessesInGuest) soap.HasFault {
	body := new(methods.ListProcessesInGuestBody)
	var fault types.BaseMethodFault
	name := ""
	vm, ok := ctx.Map.Get(req.Vm).(*simulator.VirtualMachine)
	if !ok {
		fault = &types.ManagedObjectNotFound{Obj: req.Vm}
	} else {
		var state types.VirtualMachinePowerState
		ready := false
		ctx.WithLock(vm, func() {
			name = vm.Name
			state = vm.Runtime.PowerState
			ready = vm.Guest != nil && vm.Guest.GuestOperationsReady != nil && *vm.Guest.GuestOperationsReady
		})
		fault = guestOpsFault(state, ready)
	}
	f.mu.Lock()
	auth, _ := req.Auth.(*types.NamePasswordAuthentication)
	if fault == nil && (auth == nil || auth.Username != f.user || auth.Password != f.password) {
		fault = new(types.InvalidGuestLogin)
	}
	exit := f.exitCode
	f.mu.Unlock()
	if fault != nil {
		body.Fault_ = simulator.Fault("", fault)
		return body
	}
	want := map[int64]bool{}
	for _, p := range req.Pids {
		want[p] = true
	}
	now := time.Now()
	res := &types.ListProcessesInGuestResponse{}
	for _, c := range f.CallsFor(name) {
		if c.Pid == 0 || (len(want) > 0 && !want[c.Pid]) {
			continue
		}
		code := int32(0)
		if exit != nil {
			code = exit(c)
		}
		res.Returnval = append(res.Returnval, types.GuestProcessInfo{
			Name: c.ProgramPath, Pid: c.Pid, Owner: c.User, CmdLine: c.ProgramPath + " " + c.Arguments,
			StartTime: now, EndTime: &now, ExitCode: code,
		})
	}
	body.Res = res
	return body
}
