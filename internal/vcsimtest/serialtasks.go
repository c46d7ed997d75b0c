package vcsimtest

import (
	"slices"
	"sync"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// taskGate runs the simulator's virtual machine tasks that change its
// folders and its datastore one at a time (Options.SerialTasks): clone,
// destroy, reconfigure, rename and the instant clone (instantclone.go),
// and the destroy of an empty folder (a lock, handleFolder).
//
// This is a workaround for races inside govmomi v0.56.0's simulator, not
// a vCenter behaviour (vCenter runs these tasks concurrently). With two
// such tasks of the simulator running at once, the race detector reports,
// with no frame of this repository:
//
//   - a clone's duplicate-name check (Registry.FindByName over the
//     destination folder's children, reading each child's name) runs
//     without the folder's lock, while another clone or a destroy changes
//     that folder's children, and a reconfigure or a rename changes a
//     child's name (the panic it can cause, a child registered and not
//     yet named, is prevented on every Env by cloneBodies, clonebodies.go);
//   - (*Datastore).resolve copies the datastore without its lock, from a
//     clone, a reconfigure and a destroy, and from the file removal a
//     destroy starts and does not wait for, while another of those tasks
//     writes the same datastore under its lock (its VM list, its free
//     space).
//
// How: a method hook (installHooks) takes the gate before the simulator
// dispatches a gated call. It holds none of the simulator's locks then,
// so a call waiting for the gate never holds a lock the running task
// needs. The gate is also a handler of the simulator's registry
// (Registry.AddHandler), told of every object put and every property
// change: it learns of the task the call starts (the first task put on
// the call's VM with the call's task name) and, for a destroy, of the
// file removal tasks it starts, and gives the gate back when the last of
// them has ended. The simulator would replace a handler object a hook
// returns by the session's own lookup, hence the registry's notices.
//
// A call must start its task for the gate to come back, so the hook lets
// through ungated the calls the simulator answers without one: no
// session, a method the VM disables, a clone into something that is not
// a folder. Faults injected on these methods would do the same: Env
// refuses them with SerialTasks. What the client sees is unchanged: the
// same task, result and faults; only the order of these tasks is serial.
type taskGate struct {
	self types.ManagedObjectReference // as a registry handler
	fm   types.ManagedObjectReference // the simulator's file manager
	sem  chan struct{}                // one token: held by the call in progress

	mu      sync.Mutex
	pending *gatedCall // the call holding the gate; nil when it is free
}

// gatedCall is the gated call in progress and the tasks it started.
type gatedCall struct {
	vm      types.ManagedObjectReference
	task    string                                // the task's DescriptionId
	files   bool                                  // a destroy: its file removals count too
	started bool                                  // its task was put
	running map[types.ManagedObjectReference]bool // its tasks put, not ended
}

// gatedTasks are the gated calls by SOAP method name, with the
// DescriptionId of the task the simulator starts for each.
var gatedTasks = map[string]string{
	"CloneVM_Task":    "VirtualMachine.cloneVm",
	"Destroy_Task":    "VirtualMachine.destroy",
	"ReconfigVM_Task": "VirtualMachine.reconfigVm",
	"Rename_Task":     "VirtualMachine.rename",
	// instantclone.go: it creates a VM in a folder as a clone does.
	"InstantClone_Task": "VirtualMachine.instantClone",
}

// newTaskGate makes a gate and registers it with the model's registry.
func newTaskGate(m *simulator.Model) *taskGate {
	g := &taskGate{
		self: types.ManagedObjectReference{Type: "VcsimtestTaskGate", Value: "vcsimtest-task-gate"},
		fm:   m.Map().FileManager().Reference(),
		sem:  make(chan struct{}, 1),
	}
	m.Map().AddHandler(g)
	return g
}

// Reference names the gate as a registry handler.
func (g *taskGate) Reference() types.ManagedObjectReference { return g.self }

// handle is a method hook: for a gated call that will start its task it
// waits for the gate and takes it; every other call goes through at once.
func (g *taskGate) handle(ctx *simulator.Context, method *simulator.Method) (mo.Reference, types.BaseMethodFault) {
	descr, gated := gatedTasks[method.Name]
	if !gated || ctx.Session == nil {
		return nil, nil
	}
	vm, ok := ctx.Map.Get(method.This).(*simulator.VirtualMachine)
	if !ok {
		return g.handleFolder(ctx, method)
	}
	if req, ok := method.Body.(*types.CloneVM_Task); ok {
		if _, ok := ctx.Map.Get(req.Folder).(*simulator.Folder); !ok {
			return nil, nil // refused at once: "Invalid folder"
		}
	}
	disabled := false
	ctx.WithLock(vm, func() {
		// The simulator compares the Go name (CloneVMTask); vCenter lists
		// the SOAP one (CloneVM_Task).
		disabled = slices.Contains(vm.DisabledMethod, method.Name) || slices.Contains(vm.DisabledMethod, goMethodName(method.Name))
	})
	if disabled {
		return nil, nil
	}
	g.sem <- struct{}{}
	g.mu.Lock()
	g.pending = &gatedCall{vm: method.This, task: descr, files: method.Name == "Destroy_Task", running: map[types.ManagedObjectReference]bool{}}
	g.mu.Unlock()
	return nil, nil
}

// folderDestroyTask is the DescriptionId of a folder's destroy task.
const folderDestroyTask = "Folder.destroy"

// handleFolder gates a folder's destroy (a lock folder's deletion,
// Client.DeleteLock): it removes the folder from its parent's children
// while a clone's creation walks the container views over those children
// without the parent's lock (a race the detector reported with no frame of
// this repository, in TestTwoInstancesOneStoppedHard). Only empty folders
// are gated: a folder holding VMs would start their destroys, which wait
// for the gate this call holds.
func (g *taskGate) handleFolder(ctx *simulator.Context, method *simulator.Method) (mo.Reference, types.BaseMethodFault) {
	f, ok := ctx.Map.Get(method.This).(*simulator.Folder)
	if !ok || method.Name != "Destroy_Task" || f.Parent == nil {
		return nil, nil
	}
	empty := false
	ctx.WithLock(f, func() { empty = len(f.ChildEntity) == 0 })
	if !empty {
		return nil, nil
	}
	g.sem <- struct{}{}
	g.mu.Lock()
	g.pending = &gatedCall{vm: method.This, task: folderDestroyTask, running: map[types.ManagedObjectReference]bool{}}
	g.mu.Unlock()
	return nil, nil
}

// goMethodName is the simulator's Go name of a SOAP method
// (CloneVM_Task -> CloneVMTask).
func goMethodName(soapName string) string {
	const suffix = "_Task"
	if n := len(soapName) - len(suffix); n > 0 && soapName[n:] == suffix {
		return soapName[:n] + "Task"
	}
	return soapName
}

// PutObject is told of every object the registry adds: it counts the
// tasks of the call in progress.
func (g *taskGate) PutObject(_ *simulator.Context, obj mo.Reference) {
	t, ok := obj.(*simulator.Task)
	if !ok {
		return
	}
	// Entity and DescriptionId are set before the task is put, never
	// changed afterwards.
	if t.Info.Entity == nil {
		return
	}
	entity, descr := *t.Info.Entity, t.Info.DescriptionId
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.pending
	switch {
	case c == nil:
	case !c.started && entity == c.vm && descr == c.task:
		c.started = true
		c.running[t.Self] = true
	case c.started && c.files && entity == g.fm:
		c.running[t.Self] = true
	}
}

// UpdateObject is told of every property change: when a task of the call
// in progress ends and none is left, the gate is free.
func (g *taskGate) UpdateObject(_ *simulator.Context, obj mo.Reference, _ []types.PropertyChange) {
	t, ok := obj.(*mo.Task)
	if !ok {
		return
	}
	// The registry tells its handlers holding the task's lock, after it
	// applied the change.
	if t.Info.State != types.TaskInfoStateSuccess && t.Info.State != types.TaskInfoStateError {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.pending
	if c == nil || !c.running[t.Self] {
		return
	}
	delete(c.running, t.Self)
	if len(c.running) == 0 {
		g.pending = nil
		<-g.sem
	}
}

// RemoveObject: nothing to do; a task is removed after it ended.
func (g *taskGate) RemoveObject(*simulator.Context, types.ManagedObjectReference) {}
