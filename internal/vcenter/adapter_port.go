package vcenter

import (
	"context"
	"fmt"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// This file is the adapter's face: the Port's methods in the project's
// terms (internal/vctypes). Each converts its arguments (vocabulary.go),
// calls the govmomi-typed implementation beside it (govmomi_*.go) and
// returns its error classified (Classify), so that a caller tests a fault
// with errors.Is(err, vctypes.FaultX) and never imports govmomi.

// LoadFolder returns the folder new VMs go to (folderString, else the
// datacenter's VM folder).
func (c *Client) LoadFolder(ctx context.Context) (vctypes.Ref, error) {
	ref, err := c.loadFolder(ctx)
	return vim.RefOf(ref), Classify(err)
}

// LoadResourcePool returns the pool new VMs go to.
func (c *Client) LoadResourcePool(ctx context.Context) (vctypes.Ref, error) {
	ref, err := c.loadResourcePool(ctx)
	return vim.RefOf(ref), Classify(err)
}

// ResourcePoolRuntime reads the figures of pool's runtime.
func (c *Client) ResourcePoolRuntime(ctx context.Context, pool vctypes.Ref) (*vctypes.PoolRuntime, error) {
	rt, err := c.resourcePoolRuntime(ctx, vim.MORef(pool))
	return vim.PoolRuntimeOf(rt), Classify(err)
}

// LoadDatastore finds a datastore by name ("" = the default datastore).
func (c *Client) LoadDatastore(ctx context.Context, name string) (vctypes.Ref, error) {
	ref, err := c.loadDatastore(ctx, name)
	return vim.RefOf(ref), Classify(err)
}

// FolderAt returns the VM folder at path ("" is LoadFolder's).
func (c *Client) FolderAt(ctx context.Context, path string) (vctypes.Ref, error) {
	ref, err := c.folderAt(ctx, path)
	return vim.RefOf(ref), Classify(err)
}

// ResourcePoolAt returns the resource pool at path, a pool's or a
// cluster's ("" is LoadResourcePool's).
func (c *Client) ResourcePoolAt(ctx context.Context, path string) (vctypes.Ref, error) {
	ref, err := c.resourcePoolAt(ctx, path)
	return vim.RefOf(ref), Classify(err)
}

// DatastoreSpace reads a datastore's name, free space, capacity and
// accessibility in one request.
func (c *Client) DatastoreSpace(ctx context.Context, ds vctypes.Ref) (*vctypes.DatastoreSpace, error) {
	sum, err := c.datastoreSpace(ctx, vim.MORef(ds))
	if err != nil {
		return nil, Classify(err)
	}
	return &vctypes.DatastoreSpace{Ref: ds, Name: sum.Name, FreeBytes: sum.FreeSpace,
		CapacityBytes: sum.Capacity, Accessible: sum.Accessible}, nil
}

// PoolRuntimeAt reads the runtime of the resource pool at path (a pool's
// or a cluster's path; "" the configured pool): a placement's pool.
func (c *Client) PoolRuntimeAt(ctx context.Context, path string) (*vctypes.PoolRuntime, error) {
	pool, err := c.ResourcePoolAt(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("resource pool %q: %w", path, err)
	}
	rt, err := c.ResourcePoolRuntime(ctx, pool)
	if err != nil {
		return nil, fmt.Errorf("resource pool %q runtime: %w", path, err)
	}
	return rt, nil
}

// DatastoreSpaceOf reads the space of the datastore named name.
func (c *Client) DatastoreSpaceOf(ctx context.Context, name string) (*vctypes.DatastoreSpace, error) {
	ds, err := c.LoadDatastore(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("datastore %q: %w", name, err)
	}
	sp, err := c.DatastoreSpace(ctx, ds)
	if err != nil {
		return nil, fmt.Errorf("datastore %q space: %w", name, err)
	}
	return sp, nil
}

// CreateLock creates the lock object name; vctypes.ErrLockTaken (wrapped)
// when it exists.
func (c *Client) CreateLock(ctx context.Context, name string) (vctypes.Ref, error) {
	ref, err := c.createLock(ctx, name)
	return vim.RefOf(ref), Classify(err)
}

// ListLocks returns the lock objects whose name starts with prefix, by name.
func (c *Client) ListLocks(ctx context.Context, prefix string) (map[string]vctypes.Ref, error) {
	locks, err := c.listLocks(ctx, prefix)
	if err != nil {
		return nil, Classify(err)
	}
	out := make(map[string]vctypes.Ref, len(locks))
	for name, ref := range locks {
		out[name] = vim.RefOf(ref)
	}
	return out, nil
}

// DeleteLock deletes the lock object lock; already gone is success.
func (c *Client) DeleteLock(ctx context.Context, lock vctypes.Ref) error {
	return Classify(c.deleteLock(ctx, vim.MORef(lock)))
}

// LoadVirtualMachine finds a VM or template by name (or inventory path)
// and returns its reference.
func (c *Client) LoadVirtualMachine(ctx context.Context, name string) (vctypes.Ref, error) {
	ref, err := c.loadVirtualMachine(ctx, name)
	return vim.RefOf(ref), Classify(err)
}

// StartVirtualMachine powers the VM on; already on is success.
func (c *Client) StartVirtualMachine(ctx context.Context, vm vctypes.Ref) error {
	return Classify(c.startVirtualMachine(ctx, vim.MORef(vm)))
}

// ShutdownVirtualMachine powers the VM off; already off is success.
func (c *Client) ShutdownVirtualMachine(ctx context.Context, vm vctypes.Ref) error {
	return Classify(c.shutdownVirtualMachine(ctx, vim.MORef(vm)))
}

// SuspendVirtualMachine suspends a powered-on VM; already suspended is
// success, a powered-off VM is vctypes.ErrPoweredOff.
func (c *Client) SuspendVirtualMachine(ctx context.Context, vm vctypes.Ref) error {
	return Classify(c.suspendVirtualMachine(ctx, vim.MORef(vm)))
}

// DestroyVirtualMachine destroys a powered-off VM; already gone is success.
func (c *Client) DestroyVirtualMachine(ctx context.Context, vm vctypes.Ref) error {
	return Classify(c.destroyVirtualMachine(ctx, vim.MORef(vm)))
}

// RenameVirtualMachine renames the VM and waits for the task.
func (c *Client) RenameVirtualMachine(ctx context.Context, vm vctypes.Ref, newName string) error {
	return Classify(c.renameVirtualMachine(ctx, vim.MORef(vm), newName))
}

// MarkVirtualMachineAsTemplate turns a powered-off VM into a template.
func (c *Client) MarkVirtualMachineAsTemplate(ctx context.Context, vm vctypes.Ref) error {
	return Classify(c.markVirtualMachineAsTemplate(ctx, vim.MORef(vm)))
}

// WaitForVirtualMachineShutdown blocks until the VM is powered off or ctx
// ends.
func (c *Client) WaitForVirtualMachineShutdown(ctx context.Context, vm vctypes.Ref) error {
	if err := c.notConnected(); err != nil {
		return err
	}
	return Classify(c.col.WaitForShutdown(ctx, vim.MORef(vm)))
}

// WaitForGuestOperationsReady blocks until the guest of vm runs programs
// or ctx ends.
func (c *Client) WaitForGuestOperationsReady(ctx context.Context, vm vctypes.Ref) error {
	if err := c.notConnected(); err != nil {
		return err
	}
	return Classify(c.col.WaitForGuestOperations(ctx, vim.MORef(vm)))
}

// WaitForVirtualMachineIP blocks until the guest of vm reports an IPv4
// address (expectedIP when not empty) or ctx ends, and returns it.
func (c *Client) WaitForVirtualMachineIP(ctx context.Context, vm vctypes.Ref, expectedIP string) (string, error) {
	if err := c.notConnected(); err != nil {
		return "", err
	}
	ip, err := c.col.WaitForIP(ctx, vim.MORef(vm), expectedIP)
	return ip, Classify(err)
}

// StartProgramInGuest starts prog in the guest of vm with auth and
// returns its pid; a refused account is a vctypes.FaultInvalidGuestLogin.
func (c *Client) StartProgramInGuest(ctx context.Context, vm vctypes.Ref, auth *vctypes.GuestAuth, prog vctypes.GuestProgram) (int64, error) {
	pid, err := c.startProgramInGuest(ctx, vim.MORef(vm), vim.GuestAuthOf(auth), vim.GuestProgramSpec(prog))
	return pid, Classify(err)
}

// LoadVirtualMachineEvents returns the VM's events of the given types (all
// types when none), oldest first, at most the last maxEvents.
func (c *Client) LoadVirtualMachineEvents(ctx context.Context, vm vctypes.Ref, eventTypes ...string) ([]vctypes.Event, error) {
	events, err := c.loadVirtualMachineEvents(ctx, vim.MORef(vm), eventTypes...)
	if err != nil {
		return nil, Classify(err)
	}
	out := make([]vctypes.Event, 0, len(events))
	for _, e := range events {
		out = append(out, vim.EventOf(e))
	}
	return out, nil
}

// ListVirtualMachines returns every VM and template of the inventory's
// scope, VMProperties read.
func (c *Client) ListVirtualMachines(ctx context.Context) ([]vctypes.VMInfo, error) {
	objs, err := c.listVirtualMachines(ctx)
	if err != nil {
		return nil, Classify(err)
	}
	return vim.VMInfosOf(objs), nil
}

// ProbeInventory reads the references of every VM and template of the
// scope and, when pool is not nil, the pool's runtime, in one request.
func (c *Client) ProbeInventory(ctx context.Context, pool *vctypes.Ref) ([]vctypes.Ref, *vctypes.PoolRuntime, error) {
	if err := c.notConnected(); err != nil {
		return nil, nil, err
	}
	var p *types.ManagedObjectReference
	if pool != nil {
		ref := vim.MORef(*pool)
		p = &ref
	}
	refs, rt, err := c.col.ProbeInventory(ctx, p)
	if err != nil {
		return nil, nil, Classify(err)
	}
	return vim.RefsOf(refs), vim.PoolRuntimeOf(rt), nil
}

// RetrieveVirtualMachines reads VMProperties of the given VMs; VMs that no
// longer exist are left out.
func (c *Client) RetrieveVirtualMachines(ctx context.Context, refs []vctypes.Ref) ([]vctypes.VMInfo, error) {
	objs, err := c.retrieveVirtualMachines(ctx, vim.MORefs(refs))
	if err != nil {
		return nil, Classify(err)
	}
	return vim.VMInfosOf(objs), nil
}

// WatchVirtualMachines adds VMs to the change watch.
func (c *Client) WatchVirtualMachines(ctx context.Context, refs []vctypes.Ref) error {
	if err := c.notConnected(); err != nil {
		return err
	}
	return Classify(c.col.WatchVirtualMachines(ctx, vim.MORefs(refs)))
}

// UnwatchVirtualMachines takes VMs out of the change watch.
func (c *Client) UnwatchVirtualMachines(ctx context.Context, refs []vctypes.Ref) error {
	if err := c.notConnected(); err != nil {
		return err
	}
	return Classify(c.col.UnwatchVirtualMachines(ctx, vim.MORefs(refs)))
}

// VirtualMachineChanges returns the watched VMs' updates since the
// previous call, at once.
func (c *Client) VirtualMachineChanges(ctx context.Context) ([]vctypes.VMUpdate, error) {
	if err := c.notConnected(); err != nil {
		return nil, err
	}
	ups, err := c.col.VirtualMachineChanges(ctx)
	if err != nil {
		return nil, Classify(err)
	}
	out := make([]vctypes.VMUpdate, len(ups))
	for i, u := range ups {
		out[i] = vim.VMUpdateOf(u)
	}
	return out, nil
}

// InstantCloneVirtualMachine forks req.Name from the running parent into
// req.Folder with req.Options and returns the child's reference (zero when
// vCenter's task named none).
func (c *Client) InstantCloneVirtualMachine(ctx context.Context, parent vctypes.Ref, req vctypes.InstantClone) (vctypes.Ref, error) {
	ref, err := c.instantCloneVirtualMachine(ctx, vim.MORef(parent), vim.InstantCloneSpecOf(req))
	if err != nil || ref == nil {
		return vctypes.Ref{}, Classify(err)
	}
	return vim.RefOf(*ref), nil
}

// ReconfigureVirtualMachine applies change to vm in one task: the
// specification is vim.ConfigSpecOf's, with the growth to a flavor
// (vim.ApplyGrowth) after reading vm's devices when the growth sets a disk
// size. A *vctypes.PrepError when the specification could not be built
// (nothing sent); otherwise vCenter's answer, classified.
func (c *Client) ReconfigureVirtualMachine(ctx context.Context, vm vctypes.Ref, change vctypes.ConfigChange) error {
	spec := vim.ConfigSpecOf(change)
	if g := change.Growth; g != nil {
		var devices object.VirtualDeviceList
		if g.DiskSizeGB > 0 {
			var err error
			if devices, err = c.loadVirtualMachineDevices(ctx, vim.MORef(vm)); err != nil {
				return &vctypes.PrepError{Step: "load devices", Err: Classify(err)}
			}
		}
		if err := vim.ApplyGrowth(&spec, g, devices); err != nil {
			return &vctypes.PrepError{Step: fmt.Sprintf("apply flavor %q", g.Flavor), Err: err}
		}
	}
	return Classify(c.reconfigureVirtualMachine(ctx, vim.MORef(vm), spec))
}
