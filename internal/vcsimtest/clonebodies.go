package vcsimtest

import (
	"sync"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// cloneBodies keeps the bodies of the simulator's clone tasks from
// running beside one another where the pinned simulator would crash, on
// every Env. Only the task's work is gated: the latency model's task delay
// (simulator.TaskDelay) runs before the body, outside the gate, so that
// clones still overlap in time as on vCenter.
//
// This is a workaround for a defect of govmomi v0.56.0's simulator, not a
// vCenter behaviour. Its clone task (CloneVM_Task) first checks that no
// child of the destination folder already has the clone's name
// (Registry.FindByName over the folder's children), reading each child's
// name without the folder's lock. The VM a clone creates is added to that
// folder before it is given its name (NewVirtualMachine registers the
// child, the name comes with the configuration a moment later). A clone
// from another template into the same folder whose check runs in that
// moment finds a child without a name, and the simulator panics ("does
// not have a Name"), which ends the test binary. Clones of one template
// are already one at a time (the task holds the template's lock); clones
// of two templates are not. On vCenter a VM appears in its folder with
// its name.
//
// So the simulator's clone body runs alone (exclusive): no other clone
// body, its or the instant clone's, registers a VM while its check reads.
// The instant clone's body (instantclone.go, ours) checks names with
// childNamed, which passes over a child not yet named, so instant clones
// run beside each other (shared) and only wait for, and hold off, the
// simulator's clones. Instant clones of one parent are one at a time
// anyway (the task holds the parent's lock).
//
// How: the gate is a handler of the simulator's registry
// (Registry.AddHandler), told of every object put. A clone task is put
// (Task.Run) before its goroutine starts, so the gate wraps its Execute
// function there, in the goroutine that will start the task's, and the
// wrapper holds the gate while the body runs. The VM creation a clone
// body starts (Folder.createVm) runs inside that body and is not gated
// itself, or the body would wait for itself. The simulator's CreateVM_Task
// called directly is not gated either: only the fixtures call it, before
// any clone. What the client sees is unchanged: the same tasks, results
// and faults.
//
// Options.SerialTasks (serialtasks.go) goes further, for tests under the
// race detector: whole calls of more kinds one at a time, delays
// included. The two work together: a call holds SerialTasks' gate from
// its dispatch, the body this one inside it.
type cloneBodies struct {
	self types.ManagedObjectReference // as a registry handler
	run  sync.RWMutex                 // written by an exclusive body, read by shared ones

	mu        sync.Mutex
	wrapped   map[types.ManagedObjectReference]bool // tasks whose Execute is wrapped, until removed
	exclusive int                                   // exclusive bodies running now
	shared    int                                   // shared bodies running now
	overlaps  int                                   // bodies that began beside an exclusive one, or exclusive beside any
	ran       int                                   // bodies run to their end
}

// bodyMode says how a gated body runs beside the others.
type bodyMode int

const (
	exclusiveBody bodyMode = iota + 1 // alone
	sharedBody                        // beside other shared bodies
)

// gatedBodies are the DescriptionIds of the tasks whose bodies the gate
// runs, with their mode: the clone tasks, which read a folder's children
// and create a VM in it.
var gatedBodies = map[string]bodyMode{
	"VirtualMachine.cloneVm":      exclusiveBody, // the simulator's: its name check cannot meet a nameless child
	"VirtualMachine.instantClone": sharedBody,    // ours: its name check passes over one (childNamed)
}

// newCloneBodies makes the gate and registers it with the model's registry.
func newCloneBodies(m *simulator.Model) *cloneBodies {
	g := &cloneBodies{
		self:    types.ManagedObjectReference{Type: "VcsimtestCloneBodies", Value: "vcsimtest-clone-bodies"},
		wrapped: map[types.ManagedObjectReference]bool{},
	}
	m.Map().AddHandler(g)
	return g
}

// Reference names the gate as a registry handler.
func (g *cloneBodies) Reference() types.ManagedObjectReference { return g.self }

// PutObject wraps the body of a clone task as it is put. A task with no
// body (one a hook completes itself, clonepoweron.go) is left alone.
func (g *cloneBodies) PutObject(_ *simulator.Context, obj mo.Reference) {
	t, ok := obj.(*simulator.Task)
	if !ok || t.Execute == nil {
		return
	}
	mode := gatedBodies[t.Info.DescriptionId]
	if mode == 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.wrapped[t.Self] {
		return
	}
	g.wrapped[t.Self] = true
	body := t.Execute
	t.Execute = func(t *simulator.Task) (types.AnyType, types.BaseMethodFault) {
		if mode == exclusiveBody {
			g.run.Lock()
			defer g.run.Unlock()
		} else {
			g.run.RLock()
			defer g.run.RUnlock()
		}
		g.enter(mode)
		defer g.leave(mode)
		return body(t)
	}
}

// enter and leave count the bodies running, for the gate's test.
func (g *cloneBodies) enter(mode bodyMode) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.exclusive > 0 || (mode == exclusiveBody && g.shared > 0) {
		g.overlaps++
	}
	if mode == exclusiveBody {
		g.exclusive++
	} else {
		g.shared++
	}
}

func (g *cloneBodies) leave(mode bodyMode) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if mode == exclusiveBody {
		g.exclusive--
	} else {
		g.shared--
	}
	g.ran++
}

// CloneBodies reports how many clone task bodies (the simulator's clones
// and the instant clones) ran to their end on this Env, and how many
// began beside a body they must not run beside (cloneBodies,
// clonebodies.go): 0 unless the gate failed.
func (e *Env) CloneBodies() (ran, overlaps int) {
	g := e.bodies
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ran, g.overlaps
}

// childNamed returns the child of folder named name, passing over a child
// not yet named (one a clone is creating: see cloneBodies); nil when none.
// The caller holds the folder's lock.
func childNamed(ctx *simulator.Context, folder *simulator.Folder, name string) mo.Entity {
	for _, ref := range folder.ChildEntity {
		e, ok := ctx.Map.Get(ref).(mo.Entity)
		if ok && e.Entity().Name != "" && e.Entity().Name == name {
			return e
		}
	}
	return nil
}

// UpdateObject: nothing to do; the body's wrapper gives the gate back.
func (g *cloneBodies) UpdateObject(*simulator.Context, mo.Reference, []types.PropertyChange) {}

// RemoveObject forgets a removed task.
func (g *cloneBodies) RemoveObject(_ *simulator.Context, ref types.ManagedObjectReference) {
	if ref.Type != "Task" {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.wrapped, ref)
}
