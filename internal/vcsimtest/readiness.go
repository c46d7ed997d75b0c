package vcsimtest

import (
	"sync"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
)

// readiness is a registry handler: when a VM powers on it reports VMware
// Tools running and guest operations ready (at once, or after delay counted
// from that power-on: a VM powered off and on again meanwhile waits for the
// delay of its last power-on); when it powers off, not running and not
// ready. The simulator never does this for VMs without a container. The
// fixed IP of a customized clone is set by the simulator itself
// (guest.ipAddress, guest.net), a DHCP card's lease by customLeases when
// the guest is ready (customization.go); a VM booting with cloud-init
// guestinfo is handed to FakeCloudInit.
//
// Resume: the simulator suspends and powers on a suspended VM (SuspendVM,
// PowerOnVM) but models no guest: it would report tools running at once,
// or after ReadyDelay as a boot. On vCenter a power on of a suspended VM
// resumes the guest from its saved memory: no boot, no first-boot
// cloud-init, tools answering again within seconds and the guest keeping
// its address. The handler plays that: after a resume the guest is ready
// after resumeDelay, cloud-init is not run again, and guest.net is left
// as it was. FailResume makes a VM's next resume leave the guest dead.
//
// Instant clone (instantclone.go): the child of an instant clone is
// created running, a fork of its parent's memory. Its guest does not boot:
// it re-identifies (new hostname, network, worker config, read from the
// child's own guestinfo), after which VMware Tools answer for the child.
// The handler plays that as a boot whose delay is instantDelay
// (Options.InstantReadyDelay) and whose cloud-init reads the child's
// ExtraConfig: the child never reports its parent's address.
type readiness struct {
	self  types.ManagedObjectReference
	env   *Env
	delay time.Duration
	// jitter is the coefficient of variation of delay (Options.ReadyJitter).
	jitter float64
	// resumeDelay is Options.ResumeDelay.
	resumeDelay time.Duration
	// instantDelay is Options.InstantReadyDelay.
	instantDelay time.Duration

	mu sync.Mutex
	// suspended holds the VMs suspended now.
	suspended map[types.ManagedObjectReference]bool
	// failResume names VMs whose next resume leaves the guest dead.
	failResume map[string]bool
	// powerChanges counts each VM's power state changes: a delayed
	// readiness applies only to the power-on that started it, not to a
	// later one of a VM powered off and on again meanwhile.
	powerChanges map[types.ManagedObjectReference]uint64
	// instant holds the children of instant clones not yet running: their
	// first power state change is the fork's (markInstant).
	instant map[types.ManagedObjectReference]bool

	// neverMu guards never: templates (or V1 model paths) whose VMs'
	// guests never become ready (SetGuestNeverReady).
	neverMu sync.Mutex
	never   map[string]bool

	// leases gives a customized clone's DHCP card its address.
	leases customLeases
}

// FailResume makes the next resume of the VM named name (a power on from
// suspended) leave its guest without tools: guest operations never become
// ready, as for a guest that crashed while suspended.
func (e *Env) FailResume(name string) {
	e.ready.mu.Lock()
	defer e.ready.mu.Unlock()
	e.ready.failResume[name] = true
}

// resumed records a power state change of vm and tells whether it is a
// power on resuming a suspended VM, and if so whether that resume fails.
func (r *readiness) resumed(vm *simulator.VirtualMachine, state types.VirtualMachinePowerState) (resume, fail bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ref := vm.Reference()
	r.powerChanges[ref]++
	was := r.suspended[ref]
	switch state {
	case types.VirtualMachinePowerStateSuspended:
		r.suspended[ref] = true
		return false, false
	case types.VirtualMachinePowerStatePoweredOn:
		delete(r.suspended, ref)
		if was {
			fail = r.failResume[vm.Name]
			delete(r.failResume, vm.Name)
		}
		return was, fail
	default:
		delete(r.suspended, ref)
		return false, false
	}
}

// markInstant records that ref is the child of an instant clone about to
// be set running: its guest re-identifies after instantDelay instead of
// booting.
func (r *readiness) markInstant(ref types.ManagedObjectReference) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.instant[ref] = true
}

// forked tells whether this power state change of ref is an instant
// clone's fork (and forgets it: a later power-on is a boot).
func (r *readiness) forked(ref types.ManagedObjectReference) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.instant[ref]
	delete(r.instant, ref)
	return f
}

// powerChange returns how many power state changes of ref resumed has
// recorded.
func (r *readiness) powerChange(ref types.ManagedObjectReference) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.powerChanges[ref]
}

// SetGuestNeverReady makes the guest of every VM made from template (a
// template name, or a V1 model path, as the VM's annotation records it)
// never report tools running nor guest operations ready once it powers on,
// as a template that stopped booting would; false restores it for the VMs
// powered on afterwards. The simulator has no such failure of its own.
func (e *Env) SetGuestNeverReady(template string, never bool) {
	r := e.ready
	r.neverMu.Lock()
	defer r.neverMu.Unlock()
	if r.never == nil {
		r.never = map[string]bool{}
	}
	if never {
		r.never[template] = true
	} else {
		delete(r.never, template)
	}
}

// neverReady tells whether vm is made from a template set by
// SetGuestNeverReady; the caller holds vm's lock.
func (r *readiness) neverReady(vm *simulator.VirtualMachine) bool {
	if vm.Config == nil {
		return false
	}
	// The simulator's clone copies the spec's ExtraConfig, not its
	// annotation: the record is read from its mirror then.
	a, err := inventory.ParseAnnotation(vm.Config.Annotation)
	for _, ov := range vm.Config.ExtraConfig {
		if x := ov.GetOptionValue(); err != nil && x != nil && x.Key == inventory.AnnotationMirrorKey {
			s, _ := x.Value.(string)
			a, err = inventory.ParseAnnotation(s)
		}
	}
	if err != nil {
		return false
	}
	r.neverMu.Lock()
	defer r.neverMu.Unlock()
	return r.never[a.VMwareModelPath] || r.never[a.WorkerModelPath]
}

func installReadiness(e *Env, delay time.Duration) *readiness {
	r := &readiness{
		self:  types.ManagedObjectReference{Type: "VcsimtestReadiness", Value: "readiness"},
		env:   e,
		delay: delay,

		suspended:    map[types.ManagedObjectReference]bool{},
		failResume:   map[string]bool{},
		powerChanges: map[types.ManagedObjectReference]uint64{},
		instant:      map[types.ManagedObjectReference]bool{},
	}
	e.Model.Map().AddHandler(r)
	return r
}

// Reference implements mo.Reference.
func (r *readiness) Reference() types.ManagedObjectReference { return r.self }

// PutObject implements simulator.RegisterObject.
func (r *readiness) PutObject(*simulator.Context, mo.Reference) {}

// RemoveObject implements simulator.RegisterObject: a destroyed VM's
// guest processes (Options.Runner) end with it.
func (r *readiness) RemoveObject(_ *simulator.Context, ref types.ManagedObjectReference) {
	if ref.Type == "VirtualMachine" {
		r.env.runnerVMStopped(ref)
		r.leases.forget(ref)
	}
}

// UpdateObject implements simulator.RegisterObject. It runs inside the
// power task, which holds the VM's lock on behalf of ctx.
func (r *readiness) UpdateObject(ctx *simulator.Context, obj mo.Reference, changes []types.PropertyChange) {
	if obj.Reference().Type != "VirtualMachine" {
		return
	}
	r.leases.note(obj.Reference(), changes)
	var state types.VirtualMachinePowerState
	found := false
	for _, ch := range changes {
		if ch.Name == "runtime.powerState" {
			if s, ok := ch.Val.(types.VirtualMachinePowerState); ok {
				state, found = s, true
			}
		}
	}
	if !found {
		return
	}
	vm, ok := ctx.Map.Get(obj.Reference()).(*simulator.VirtualMachine)
	if !ok {
		return
	}
	resume, failResume := r.resumed(vm, state)
	fork := r.forked(vm.Reference())
	if state != types.VirtualMachinePowerStatePoweredOn {
		r.env.runnerVMStopped(vm.Reference()) // a power-off ends the guest's processes
	}
	if state != types.VirtualMachinePowerStatePoweredOn || failResume {
		ctx.WithLock(vm, func() { setGuest(ctx, vm, false) })
		return
	}
	// Powered on, the guest's VMware Tools are installed but not yet
	// running (guest.toolsStatus toolsNotRunning) until its readiness
	// below, as vCenter reports a booting guest; the simulator's own VM
	// says toolsNotInstalled, which is a template without Tools.
	ctx.WithLock(vm, func() { setGuest(ctx, vm, false) })
	delay := r.delay
	switch {
	case resume:
		delay = r.resumeDelay
	case fork:
		delay = r.instantDelay
	}
	if delay <= 0 {
		ctx.WithLock(vm, func() {
			if r.neverReady(vm) {
				return
			}
			setGuest(ctx, vm, true)
			if !resume {
				r.leases.ready(ctx, vm)
				r.env.CloudInit.powerOn(ctx, vm, fork)
			}
		})
		return
	}
	if r.env.ctx.Err() != nil {
		return // the test is over: start nothing
	}
	change := r.powerChange(vm.Reference())
	r.env.wg.Add(1)
	go func() {
		defer r.env.wg.Done()
		timer := time.NewTimer(jittered(delay, r.jitter))
		defer timer.Stop()
		select {
		case <-r.env.ctx.Done():
			return
		case <-timer.C:
		}
		sctx := r.env.SimContext()
		sctx.WithLock(vm, func() {
			// Powered off and on again since: that power-on's own
			// delay decides.
			if r.powerChange(vm.Reference()) != change {
				return
			}
			if vm.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn && !r.neverReady(vm) {
				setGuest(sctx, vm, true)
				if !resume {
					r.leases.ready(sctx, vm)
					r.env.CloudInit.powerOn(sctx, vm, fork)
				}
			}
		})
	}()
}

// setGuest reports tools running (or not) on vm; the caller holds vm's
// lock. The *bool fields are set directly (mo.ApplyPropertyChange cannot
// assign a *bool) and guest.guestOperationsReady is announced, as a plain
// bool, with the other changes, so that a property collector watching it
// reports the change as vCenter does.
func setGuest(ctx *simulator.Context, vm *simulator.VirtualMachine, running bool) {
	if vm.Guest == nil {
		vm.Guest = &types.GuestInfo{}
	}
	vm.Guest.GuestOperationsReady = types.NewBool(running)
	vm.Guest.InteractiveGuestOperationsReady = types.NewBool(running)
	ctx.Update(vm, append(guestChanges(running), types.PropertyChange{Name: "guest.guestOperationsReady", Val: running}))
}

// guestChanges are the guest properties of a VM whose tools run (or not).
func guestChanges(running bool) []types.PropertyChange {
	status := string(types.VirtualMachineToolsRunningStatusGuestToolsNotRunning)
	tools := types.VirtualMachineToolsStatusToolsNotRunning
	state := "notRunning"
	if running {
		status = string(types.VirtualMachineToolsRunningStatusGuestToolsRunning)
		tools = types.VirtualMachineToolsStatusToolsOk
		state = "running"
	}
	return []types.PropertyChange{
		{Name: "guest.toolsRunningStatus", Val: status},
		{Name: "guest.toolsStatus", Val: tools},
		{Name: "guest.guestState", Val: state},
		{Name: "summary.guest.toolsRunningStatus", Val: status},
		{Name: "summary.guest.toolsStatus", Val: tools},
	}
}
