package vcsimtest

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// hostReads counts the property reads that start at the datacenter's host
// folder, a host's compute resource or a cluster: what a finder walking
// the hosts and clusters sends (a resource pool lookup by path, or the
// default pool's). Nothing else the hatchery does reads them, so a test
// counts its pool lookups with it (Env.HostReads).
type hostReads struct {
	n atomic.Int64
}

// handle is a method hook (installHooks): it counts and lets every call
// through.
func (h *hostReads) handle(ctx *simulator.Context, method *simulator.Method) (mo.Reference, types.BaseMethodFault) {
	var specs []types.PropertyFilterSpec
	switch req := method.Body.(type) {
	case *types.RetrieveProperties:
		specs = req.SpecSet
	case *types.RetrievePropertiesEx:
		specs = req.SpecSet
	default:
		return nil, nil
	}
	for _, s := range specs {
		for _, o := range s.ObjectSet {
			if o.Obj.Type == "ComputeResource" || o.Obj.Type == "ClusterComputeResource" || isHostFolder(ctx, o.Obj) {
				h.n.Add(1)
				return nil, nil
			}
		}
	}
	return nil, nil
}

// isHostFolder tells whether ref is a folder of hosts and clusters (a
// datacenter's host folder or one of its subfolders).
func isHostFolder(ctx *simulator.Context, ref types.ManagedObjectReference) bool {
	if ref.Type != "Folder" {
		return false
	}
	f, ok := ctx.Map.Get(ref).(*simulator.Folder)
	if !ok {
		return false
	}
	return slices.Contains(f.ChildType, "ComputeResource")
}

// HostReads is how many property reads started at the host folder, a
// compute resource or a cluster since the Env started: the walks of the
// hosts and clusters that a resource pool lookup makes (see hostReads).
func (e *Env) HostReads() int64 { return e.hostReads.n.Load() }

// privileges makes the simulator's AuthorizationManager answer
// HasPrivilegeOnEntities as vCenter does for a user lacking some
// privileges: vcsim v0.56.0 grants every privilege on every entity; a
// privilege denied here (Env.DenyPrivileges) is answered IsGranted false
// on every entity, the others true.
type privileges struct {
	mu     sync.Mutex
	denied map[string]bool
	next   atomic.Int64
}

// DenyPrivileges makes the session lack the privileges ids on every
// entity, as HasPrivilegeOnEntities reports it.
func (e *Env) DenyPrivileges(ids ...string) {
	e.privileges.mu.Lock()
	defer e.privileges.mu.Unlock()
	for _, id := range ids {
		e.privileges.denied[id] = true
	}
}

// handle is a method hook (installHooks): it answers HasPrivilegeOnEntities
// when a privilege is denied and lets every other call through.
func (p *privileges) handle(_ *simulator.Context, method *simulator.Method) (mo.Reference, types.BaseMethodFault) {
	if method.Name != "HasPrivilegeOnEntities" {
		return nil, nil
	}
	p.mu.Lock()
	denied := len(p.denied) > 0
	p.mu.Unlock()
	if !denied {
		return nil, nil
	}
	h := &privilegeHandler{Self: types.ManagedObjectReference{Type: "VcsimtestPrivileges", Value: fmt.Sprintf("privileges-%d", p.next.Add(1))}, p: p}
	// As clonePowerOn does: a reference no registry knows leaves the
	// handler ours.
	method.This = h.Self
	return h, nil
}

// privilegeHandler answers one HasPrivilegeOnEntities for privileges.
type privilegeHandler struct {
	Self types.ManagedObjectReference
	p    *privileges
}

// Reference implements mo.Reference.
func (h *privilegeHandler) Reference() types.ManagedObjectReference { return h.Self }

// Lock implements sync.Locker: nothing to lock.
func (h *privilegeHandler) Lock() {}

// Unlock implements sync.Locker.
func (h *privilegeHandler) Unlock() {}

// HasPrivilegeOnEntities answers each entity's privileges, the denied ones
// not granted.
func (h *privilegeHandler) HasPrivilegeOnEntities(req *types.HasPrivilegeOnEntities) soap.HasFault {
	h.p.mu.Lock()
	defer h.p.mu.Unlock()
	var out []types.EntityPrivilege
	for _, e := range req.Entity {
		ep := types.EntityPrivilege{Entity: e}
		for _, id := range req.PrivId {
			ep.PrivAvailability = append(ep.PrivAvailability, types.PrivilegeAvailability{PrivId: id, IsGranted: !h.p.denied[id]})
		}
		out = append(out, ep)
	}
	return &methods.HasPrivilegeOnEntitiesBody{Res: &types.HasPrivilegeOnEntitiesResponse{Returnval: out}}
}
