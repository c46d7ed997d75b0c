package vcsimtest

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// clonePowerOn extends the simulator to vCenter's behaviour for a clone
// that powers its new VM on (CloneVM_Task with spec.powerOn): vCenter
// powers the new VM on as part of the clone task, but the power-on of one
// clone does not wait for the clones of the same template, nor hold them
// up. vcsim v0.56.0 runs that power-on (its task delay and its 10 ms
// polls) inside the clone task's body, which holds the source template's
// lock, so the clones of one template power on one after the other.
//
// The hook answers such a call itself: it runs the simulator's own clone
// with powerOn unset (the template's lock held for the copy only, as
// before), then powers the new VM on with the simulator's own PowerOnVM,
// as one task the client waits on. That task is the clone's: its entity
// is the template, its name and description the simulator's clone task's,
// its result the new VM's reference, its fault the clone's or the
// power-on's (DuplicateName, InvalidArgument, ...); only no lock is held
// while it waits. A customization the simulator would refuse at power-on
// (NicSettingMismatch) is refused at the clone already, by the same check.
//
// It is opt-in (Options.ClonePowerOnUnlocked, which LatencyOptions sets):
// the other tests keep the simulator as it is.
type clonePowerOn struct {
	env  *Env
	next atomic.Int64
}

// handle is a method hook (installHooks): it takes a clone that powers on
// a VM (not a template) and lets every other call through (nil, nil).
func (c *clonePowerOn) handle(ctx *simulator.Context, method *simulator.Method) (mo.Reference, types.BaseMethodFault) {
	if method.Name != "CloneVM_Task" {
		return nil, nil
	}
	req, ok := method.Body.(*types.CloneVM_Task)
	if !ok || !req.Spec.PowerOn || req.Spec.Template {
		return nil, nil
	}
	src, ok := ctx.Map.Get(method.This).(*simulator.VirtualMachine)
	if !ok {
		return nil, nil
	}
	h := &clonePowerOnHandler{
		Self: types.ManagedObjectReference{Type: "VcsimtestClonePowerOn", Value: fmt.Sprintf("clone-power-on-%d", c.next.Add(1))},
		env:  c.env,
		src:  src,
	}
	// The dispatch prefers the session's view of method.This to a handler
	// object a hook returns; a reference no registry knows leaves it ours
	// (the simulator itself rewrites This for Fetch the same way).
	method.This = h.Self
	return h, nil
}

// clonePowerOnHandler answers one CloneVM_Task for clonePowerOn. It opts
// out of the dispatch's locking (sync.Locker): CloneVMTask takes the source
// VM's lock itself, as the dispatch would have.
type clonePowerOnHandler struct {
	Self types.ManagedObjectReference
	env  *Env
	src  *simulator.VirtualMachine
}

// Reference implements mo.Reference.
func (h *clonePowerOnHandler) Reference() types.ManagedObjectReference { return h.Self }

// Lock implements sync.Locker: nothing to lock (see the type).
func (h *clonePowerOnHandler) Lock() {}

// Unlock implements sync.Locker.
func (h *clonePowerOnHandler) Unlock() {}

// clonePollInterval is how often the clone task checks the tasks it waits
// for: the simulator's own nested waits poll every 10 ms; this is shorter
// so that the extension adds less than the simulator's own polls.
const clonePollInterval = 2 * time.Millisecond

// CloneVMTask is the simulator's CloneVM_Task handler with the power-on
// moved out of the template's lock (see clonePowerOn).
func (h *clonePowerOnHandler) CloneVMTask(ctx *simulator.Context, req *types.CloneVM_Task) soap.HasFault {
	inner := *req
	inner.This = h.src.Self
	inner.Spec.PowerOn = false
	var body soap.HasFault
	ctx.WithLock(h.src, func() { body = h.src.CloneVMTask(ctx, &inner) })
	res, ok := body.(*methods.CloneVM_TaskBody)
	if !ok || res.Fault() != nil || res.Res == nil {
		return body
	}
	cloneTask, ok := ctx.Map.Get(res.Res.Returnval).(*simulator.Task)
	if !ok {
		return body
	}

	// The task the client waits on, registered as Task.Run does but
	// without taking its entity's (the template's) lock and without a
	// second clone delay: the simulator's clone task carries that.
	var task *simulator.Task
	ctx.WithLock(h.src, func() { task = simulator.CreateTask(h.src, "cloneVm", nil) })
	ctx.Map.Put(task)
	ctx.Map.AtomicUpdate(ctx, task, []types.PropertyChange{
		{Name: "info.key", Val: task.Self.Value},
		{Name: "info.task", Val: task.Self},
		{Name: "info.startTime", Val: time.Now()},
		{Name: "info.state", Val: types.TaskInfoStateRunning},
	})
	if h.env.ctx.Err() != nil {
		h.complete(ctx, task, nil, &types.RequestCanceled{})
	} else {
		h.env.wg.Add(1)
		go func() {
			defer h.env.wg.Done()
			result, fault := h.cloneThenPowerOn(ctx, cloneTask)
			h.complete(ctx, task, result, fault)
		}()
	}
	return &methods.CloneVM_TaskBody{Res: &types.CloneVM_TaskResponse{Returnval: task.Self}}
}

// cloneThenPowerOn waits for the simulator's clone, then powers the new VM
// on and waits for that; it returns the clone task's result or the first
// fault.
func (h *clonePowerOnHandler) cloneThenPowerOn(ctx *simulator.Context, cloneTask *simulator.Task) (types.AnyType, types.BaseMethodFault) {
	info, ok := h.wait(ctx, cloneTask)
	if !ok {
		return nil, &types.RequestCanceled{}
	}
	if info.Error != nil {
		return nil, info.Error.Fault
	}
	ref, ok := info.Result.(types.ManagedObjectReference)
	if !ok {
		return nil, &types.RuntimeFault{}
	}
	vm, ok := ctx.Map.Get(ref).(*simulator.VirtualMachine)
	if !ok {
		return nil, &types.ManagedObjectNotFound{Obj: ref}
	}
	var body soap.HasFault
	ctx.WithLock(vm, func() { body = vm.PowerOnVMTask(ctx, &types.PowerOnVM_Task{This: ref}) })
	if f := body.Fault(); f != nil {
		if mf, ok := f.VimFault().(types.BaseMethodFault); ok {
			return nil, mf
		}
		return nil, &types.RuntimeFault{}
	}
	power, ok := ctx.Map.Get(body.(*methods.PowerOnVM_TaskBody).Res.Returnval).(*simulator.Task)
	if !ok {
		return nil, &types.RuntimeFault{}
	}
	pinfo, ok := h.wait(ctx, power)
	if !ok {
		return nil, &types.RequestCanceled{}
	}
	if pinfo.Error != nil {
		return nil, pinfo.Error.Fault
	}
	return ref, nil
}

// wait returns t's info once t has succeeded or failed (false when the
// Env closes first). It reads the task under the task's lock, as the
// simulator's Task.Wait does, on behalf of a context of its own.
func (h *clonePowerOnHandler) wait(ctx *simulator.Context, t *simulator.Task) (types.TaskInfo, bool) {
	own := &simulator.Context{}
	ticker := time.NewTicker(clonePollInterval)
	defer ticker.Stop()
	for {
		var info types.TaskInfo
		done := false
		ctx.Map.WithLock(own, t, func() {
			info = t.Info
			done = info.State == types.TaskInfoStateSuccess || info.State == types.TaskInfoStateError
		})
		if done {
			return info, true
		}
		select {
		case <-h.env.ctx.Done():
			return types.TaskInfo{}, false
		case <-ticker.C:
		}
	}
}

// complete ends task with result or fault, as Task.Run ends a task.
func (h *clonePowerOnHandler) complete(ctx *simulator.Context, task *simulator.Task, result types.AnyType, fault types.BaseMethodFault) {
	state := types.TaskInfoStateSuccess
	var ferr any
	if fault != nil {
		state = types.TaskInfoStateError
		ferr = types.LocalizedMethodFault{Fault: fault, LocalizedMessage: fmt.Sprintf("%T", fault)}
	}
	ctx.Map.AtomicUpdate(ctx, task, []types.PropertyChange{
		{Name: "info.completeTime", Val: time.Now()},
		{Name: "info.state", Val: state},
		{Name: "info.result", Val: result},
		{Name: "info.error", Val: ferr},
	})
}
