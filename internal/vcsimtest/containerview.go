package vcsimtest

import (
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// The simulator's container views, made to report VMs entering and
// leaving as vCenter does: the vSphere API reference describes a
// ContainerView's `view` as the objects currently in the container, kept
// current as objects are added, removed or moved, and a property filter on
// `view` reports each such change.
//
// Govmomi's simulator v0.56.0 falls short in three ways, all on folder
// views of VMs (the hatchery's scope, docs/inventory-watch.md):
//   - a VM leaving the view (destroyed) is dropped from `view` without an
//     update, so no filter hears of it;
//   - a VM moved into another folder is added to the views of its new
//     folder, never dropped from those of its old one;
//   - the update of a VM entering carries the view's own slice, which a
//     later removal shifts in place while a poll serialises it (a data
//     race).
//
// reportingContainerView takes the simulator's view's place as the
// registry's handler of objects put and removed (the view itself stays in
// the session's registry, where the property collection reads it). It
// changes `view` under the view's lock, always into a new slice (a slice
// once published is never written again), and tells the filters after
// releasing the lock, with a copy. Only views of a folder or a datacenter
// whose types include the object's are handled so; any other object or
// view is left to the simulator's own code.
type reportingContainerView struct {
	*simulator.ContainerView
}

// handles tells whether v reports ref itself (see the type).
func (v *reportingContainerView) handles(ref types.ManagedObjectReference) bool {
	switch v.Container.Type {
	case "Folder", "Datacenter":
	default:
		return false
	}
	return len(v.Type) == 0 || slices.Contains(v.Type, ref.Type)
}

// under tells whether obj is in v's container now: its parent, or with a
// recursive view any ancestor, is the container.
func (v *reportingContainerView) under(ctx *simulator.Context, obj mo.Reference) bool {
	e, ok := obj.(mo.Entity)
	if !ok {
		return false
	}
	parent := e.Entity().Parent
	for depth := 0; parent != nil && depth < 64; depth++ {
		if *parent == v.Container {
			return true
		}
		if !v.Recursive {
			return false
		}
		p, ok := ctx.Map.Get(*parent).(mo.Entity)
		if !ok {
			return false
		}
		parent = p.Entity().Parent
	}
	return false
}

// PutObject is told of every object put in the registry, which the
// simulator does when an object is made and when it is moved into a
// folder: the object enters the view when it is now in the container and
// leaves it when it is not any more.
func (v *reportingContainerView) PutObject(ctx *simulator.Context, obj mo.Reference) {
	ref := obj.Reference()
	if !v.handles(ref) {
		v.ContainerView.PutObject(ctx, obj)
		return
	}
	in := v.under(ctx, obj)
	v.change(ctx, func(view []types.ManagedObjectReference) []types.ManagedObjectReference {
		has := slices.Contains(view, ref)
		switch {
		case in && !has:
			return append(slices.Clone(view), ref)
		case !in && has:
			return without(view, ref)
		}
		return nil
	})
}

// RemoveObject is told of every object removed from the registry
// (destroyed): it leaves the view.
func (v *reportingContainerView) RemoveObject(ctx *simulator.Context, ref types.ManagedObjectReference) {
	if !v.handles(ref) {
		v.ContainerView.RemoveObject(ctx, ref)
		return
	}
	v.change(ctx, func(view []types.ManagedObjectReference) []types.ManagedObjectReference {
		if !slices.Contains(view, ref) {
			return nil
		}
		return without(view, ref)
	})
}

// change sets `view` to what next returns from it (nil: unchanged) under
// the view's lock, then reports the new contents to the property
// collectors, holding no lock. The report is applied to a copy of the view
// bearing its reference: the registry writes the value into the object it
// is given, and the filters look only at the reference and the change.
func (v *reportingContainerView) change(ctx *simulator.Context, next func([]types.ManagedObjectReference) []types.ManagedObjectReference) {
	var sent []types.ManagedObjectReference
	ctx.WithLock(v.ContainerView, func() {
		if view := next(v.View); view != nil {
			v.View = view
			sent = slices.Clone(view)
		}
	})
	if sent == nil {
		return
	}
	shadow := &simulator.ContainerView{}
	shadow.Self = v.Self
	ctx.Update(shadow, []types.PropertyChange{{Name: "view", Val: sent}})
}

// without returns a new slice of view's references but ref.
func without(view []types.ManagedObjectReference, ref types.ManagedObjectReference) []types.ManagedObjectReference {
	out := make([]types.ManagedObjectReference, 0, len(view))
	for _, r := range view {
		if r != ref {
			out = append(out, r)
		}
	}
	return out
}

// containerViews is the method hook that answers CreateContainerView: the
// simulator's view manager makes the view, then a reportingContainerView
// takes its place among the registry's handlers (the registry keys them by
// reference; DestroyView removes it so).
type containerViews struct{ next atomic.Int64 }

func (h *containerViews) handle(ctx *simulator.Context, m *simulator.Method) (mo.Reference, types.BaseMethodFault) {
	if ctx.Session == nil || m.Name != "CreateContainerView" {
		return nil, nil
	}
	vm, ok := ctx.Map.Get(m.This).(*simulator.ViewManager)
	if !ok {
		return nil, nil
	}
	maker := &containerViewMaker{
		Self: types.ManagedObjectReference{Type: "VcsimtestContainerViews", Value: fmt.Sprintf("container-views-%d", h.next.Add(1))},
		vm:   vm,
	}
	// A reference no registry knows leaves the call to the maker (as
	// clonePowerOn does).
	m.This = maker.Self
	return maker, nil
}

// containerViewMaker answers one CreateContainerView for containerViews.
// It opts out of the dispatch's locking (sync.Locker) and takes the view
// manager's lock itself, as the dispatch would have.
type containerViewMaker struct {
	Self types.ManagedObjectReference
	vm   *simulator.ViewManager
}

// Reference implements mo.Reference.
func (m *containerViewMaker) Reference() types.ManagedObjectReference { return m.Self }

// Lock implements sync.Locker: nothing to lock (see the type).
func (m *containerViewMaker) Lock() {}

// Unlock implements sync.Locker.
func (m *containerViewMaker) Unlock() {}

// CreateContainerView makes the view with the simulator's view manager and
// puts a reportingContainerView in its place among the registry's handlers.
func (m *containerViewMaker) CreateContainerView(ctx *simulator.Context, req *types.CreateContainerView) soap.HasFault {
	var body soap.HasFault
	ctx.WithLock(m.vm, func() { body = m.vm.CreateContainerView(ctx, req) })
	res, ok := body.(*methods.CreateContainerViewBody)
	if !ok || res.Res == nil {
		return body
	}
	if cv, ok := ctx.Session.Get(res.Res.Returnval).(*simulator.ContainerView); ok {
		ctx.Map.AddHandler(&reportingContainerView{ContainerView: cv})
	}
	return body
}
