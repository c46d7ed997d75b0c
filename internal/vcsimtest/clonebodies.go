package vcsimtest

import (
	"sync"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// cloneBodies runs the bodies of the simulator's clone tasks (the full
// clone's CloneVM_Task and the instant clone of instantclone.go) one at a
// time, on every Env. Only the task's work is serialised: the latency
// model's task delay (simulator.TaskDelay) runs before the body, outside
// the gate, so that clones still overlap in time as on vCenter.
//
// This is a workaround for a defect of govmomi v0.56.0's simulator, not a
// vCenter behaviour. Its clone task first checks that no child of the
// destination folder already has the clone's name (Registry.FindByName
// over the folder's children), reading each child's name without the
// folder's lock. The VM a clone creates is added to that folder before
// it is given its name (NewVirtualMachine registers the child, the name
// comes with the configuration a moment later). A clone from another
// template into the same folder whose check runs in that moment finds a
// child without a name, and the simulator panics ("does not have a
// Name"), which ends the test binary. Clones of one template are already
// one at a time (the task holds the template's lock); clones of two
// templates are not. On vCenter a VM appears in its folder with its name.
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
	run  sync.Mutex                   // held by the clone body running

	mu      sync.Mutex
	wrapped map[types.ManagedObjectReference]bool // tasks whose Execute is wrapped, until removed
	running int                                   // bodies running now (0 or 1)
	most    int                                   // the most bodies ever running at once
	ran     int                                   // bodies run to their end
}

// gatedBodies are the DescriptionIds of the tasks whose bodies the gate
// runs one at a time: the clone tasks, which read a folder's children and
// create a VM in it.
var gatedBodies = map[string]bool{
	"VirtualMachine.cloneVm":      true,
	"VirtualMachine.instantClone": true,
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
	if !ok || t.Execute == nil || !gatedBodies[t.Info.DescriptionId] {
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
		g.run.Lock()
		defer g.run.Unlock()
		g.enter()
		defer g.leave()
		return body(t)
	}
}

// enter and leave count the bodies running, for the gate's test.
func (g *cloneBodies) enter() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.running++
	g.most = max(g.most, g.running)
}

func (g *cloneBodies) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.running--
	g.ran++
}

// counts returns how many clone bodies ran to their end and the most that
// ever ran at once.
func (g *cloneBodies) counts() (ran, most int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ran, g.most
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
