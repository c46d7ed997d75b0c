package vcenter

import (
	"context"
	"errors"
	"fmt"
	"path"

	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// vmView is the reused set of ContainerViews over the inventory's scope
// (govmomi_scope.go: the datacenter's VM folder, or the hatchery's folder
// and templateFolders), valid for the session generation it was created in
// (views are session-scoped: a re-login loses them).
type vmView struct {
	views []*view.ContainerView
	gen   int64
	found int // len(Client.found) when the views were made: the scope they cover
}

// listVirtualMachines lists every VM and template of the inventory's scope
// (the datacenter's VM folder unless templateFolders is set) through the
// reused ContainerViews, retrieving only VMProperties. Cost: one
// RetrieveProperties per call (plus a CreateContainerView per scope folder
// after a login).
func (c *Client) listVirtualMachines(ctx context.Context) ([]mo.VirtualMachine, error) {
	if err := c.notConnected(); err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		v, err := c.vmContainerView(ctx)
		if err != nil {
			return nil, err
		}
		vms, err := c.retrieveScope(ctx, v, VMProperties)
		if err == nil {
			c.learnNames(vms)
			return vms, nil
		}
		if attempt == 0 && isNotFound(err) {
			// The view vanished with its session: build a new one once.
			c.dropView(v)
			continue
		}
		return nil, fmt.Errorf("list virtual machines of datacenter %q: %w", c.dc.Name(), err)
	}
}

// vmContainerView returns the current views, creating them when none exist
// for this session. The mutex is never held across a round trip.
func (c *Client) vmContainerView(ctx context.Context) (*vmView, error) {
	gen := c.rl.generation()
	c.vmsMu.Lock()
	v, found := c.vmsView, len(c.found)
	c.vmsMu.Unlock()
	if v != nil && v.gen == gen && v.found == found {
		return v, nil
	}
	// found before the views: a template folder found meanwhile makes
	// them stale, and the next call makes them again.
	views, err := c.newScopeViews(ctx)
	if err != nil {
		return nil, err
	}
	nv := &vmView{views: views, gen: gen, found: found}
	c.vmsMu.Lock()
	if cur := c.vmsView; cur != nil && cur.gen == gen && cur.found == found {
		c.vmsMu.Unlock()
		// Lost a race with another caller: use its views, which other
		// callers may be reading through, and destroy ours, which nobody
		// else has seen.
		destroyViews(ctx, views)
		return cur, nil
	}
	c.vmsView = nv
	c.vmsMu.Unlock()
	return nv, nil
}

// dropView forgets v if it is still the current view.
func (c *Client) dropView(v *vmView) {
	c.vmsMu.Lock()
	if c.vmsView == v {
		c.vmsView = nil
	}
	c.vmsMu.Unlock()
}

// loadVirtualMachine finds a VM or template by name (or inventory path) in
// the inventory's scope (findInScope); templateFolders unset, one not in
// it is looked for by name in the datacenter's folders and its folder
// joins the scope (discoverVM); set, it is ErrOutOfScope.
func (c *Client) loadVirtualMachine(ctx context.Context, name string) (types.ManagedObjectReference, error) {
	if err := c.notConnected(); err != nil {
		return types.ManagedObjectReference{}, err
	}
	ref, err := c.findInScope(ctx, name)
	if errors.Is(err, ErrOutOfScope) && !c.TemplateFoldersSet() {
		ref, err = c.discoverVM(ctx, name)
	}
	if err != nil {
		return types.ManagedObjectReference{}, fmt.Errorf("find virtual machine %q: %w", name, err)
	}
	c.learnName(ref, path.Base(name))
	return ref, nil
}

// vm binds a reference to this client's connection (no round trip): the
// handle stays inside the adapter.
func (c *Client) vm(ref types.ManagedObjectReference) *object.VirtualMachine {
	return object.NewVirtualMachine(c.vim, ref)
}

// loadVirtualMachineDevices returns the VM's device list (a reconfigure's
// growth of the first disk reads it).
func (c *Client) loadVirtualMachineDevices(ctx context.Context, vm types.ManagedObjectReference) (object.VirtualDeviceList, error) {
	if err := c.notConnected(); err != nil {
		return nil, err
	}
	devices, err := c.vm(vm).Device(ctx)
	if err != nil {
		return nil, fmt.Errorf("read devices of %q: %w", c.vmName(vm), err)
	}
	return devices, nil
}

// readTemplate reads config.hardware.device and snapshot of a template in
// one RetrievePropertiesEx.
func (c *Client) readTemplate(ctx context.Context, template types.ManagedObjectReference) (mo.VirtualMachine, error) {
	if err := c.notConnected(); err != nil {
		return mo.VirtualMachine{}, err
	}
	var o mo.VirtualMachine
	if err := c.pc.RetrieveOne(ctx, template, []string{"config.hardware.device", "snapshot"}, &o); err != nil {
		return mo.VirtualMachine{}, fmt.Errorf("read devices and snapshots of template %q: %w", c.vmName(template), err)
	}
	return o, nil
}

// powerState reads runtime.powerState.
func (c *Client) powerState(ctx context.Context, vm types.ManagedObjectReference) (types.VirtualMachinePowerState, error) {
	var o mo.VirtualMachine
	if err := c.pc.RetrieveOne(ctx, vm, []string{"runtime.powerState"}, &o); err != nil {
		return "", fmt.Errorf("read power state of %q: %w", c.vmName(vm), err)
	}
	return o.Runtime.PowerState, nil
}

// startVirtualMachine powers the VM on; already on is success (checked
// first, and InvalidPowerState with an existing powered-on state too).
// The check is the state the wait collector reported when the VM is in
// its view and that state is not on (a claimed VM: its claim's
// reconfigure put it there): if it is on after all, the power-on's
// InvalidPowerState says so. A reported "on" is read again, as a VM
// outside the view is: a notification's delay could hide a power-off.
func (c *Client) startVirtualMachine(ctx context.Context, vm types.ManagedObjectReference) error {
	if err := c.notConnected(); err != nil {
		return err
	}
	if v, ok := c.waits.reported(vm, "runtime.powerState"); !ok || fmt.Sprint(v) == string(types.VirtualMachinePowerStatePoweredOn) {
		state, err := c.powerState(ctx, vm)
		if err != nil {
			return err
		}
		if state == types.VirtualMachinePowerStatePoweredOn {
			return nil
		}
	}
	_, err := c.runTaskOn(ctx, powerTaskTimeout, vm, true, c.vm(vm).PowerOn)
	if existing, ok := invalidPowerState(err); ok && existing == types.VirtualMachinePowerStatePoweredOn {
		return nil
	}
	if err != nil {
		return fmt.Errorf("power on %q: %w", c.vmName(vm), err)
	}
	c.log.Debug("powered on", logkey.VM, c.vmName(vm))
	return nil
}

// shutdownVirtualMachine powers the VM off (hard power off); already off
// is success.
func (c *Client) shutdownVirtualMachine(ctx context.Context, vm types.ManagedObjectReference) error {
	if err := c.notConnected(); err != nil {
		return err
	}
	state, err := c.powerState(ctx, vm)
	if err != nil {
		return err
	}
	if state == types.VirtualMachinePowerStatePoweredOff {
		return nil
	}
	_, err = c.runTaskOn(ctx, powerTaskTimeout, vm, false, c.vm(vm).PowerOff)
	if existing, ok := invalidPowerState(err); ok && existing == types.VirtualMachinePowerStatePoweredOff {
		return nil
	}
	if err != nil {
		return fmt.Errorf("power off %q: %w", c.vmName(vm), err)
	}
	c.log.Debug("powered off", logkey.VM, c.vmName(vm))
	return nil
}

// suspendVirtualMachine suspends a powered-on VM, bounded by
// suspendTaskTimeout; already suspended is success (checked first, and
// InvalidPowerState with an existing suspended state too). A powered-off
// VM cannot be suspended: that is an error naming the VM.
func (c *Client) suspendVirtualMachine(ctx context.Context, vm types.ManagedObjectReference) error {
	if err := c.notConnected(); err != nil {
		return err
	}
	state, err := c.powerState(ctx, vm)
	if err != nil {
		return err
	}
	switch state {
	case types.VirtualMachinePowerStateSuspended:
		return nil
	case types.VirtualMachinePowerStatePoweredOff:
		return fmt.Errorf("suspend %q: %w", c.vmName(vm), vctypes.ErrPoweredOff)
	}
	_, err = c.runTaskOn(ctx, suspendTaskTimeout, vm, false, c.vm(vm).Suspend)
	if existing, ok := invalidPowerState(err); ok && existing == types.VirtualMachinePowerStateSuspended {
		return nil
	}
	if err != nil {
		return fmt.Errorf("suspend %q: %w", c.vmName(vm), err)
	}
	c.log.Debug("suspended", logkey.VM, c.vmName(vm))
	return nil
}

// destroyVirtualMachine destroys a powered-off VM; a VM already gone
// (ManagedObjectNotFound) is success.
func (c *Client) destroyVirtualMachine(ctx context.Context, vm types.ManagedObjectReference) error {
	if err := c.notConnected(); err != nil {
		return err
	}
	_, err := c.runTask(ctx, destroyTaskTimeout, c.vm(vm).Destroy)
	if err != nil && isNotFound(err) {
		c.learnName(vm, "")
		return nil
	}
	if err != nil {
		return fmt.Errorf("destroy %q: %w", c.vmName(vm), err)
	}
	c.log.Debug("destroyed", logkey.VM, c.vmName(vm))
	c.learnName(vm, "")
	return nil
}

// cloneVirtualMachine clones vm into folder under name and waits for the
// task (cloneTaskTimeout); it returns the new VM's reference.
func (c *Client) cloneVirtualMachine(ctx context.Context, vm types.ManagedObjectReference, folder types.ManagedObjectReference, name string, spec *types.VirtualMachineCloneSpec) (*types.ManagedObjectReference, error) {
	if err := c.notConnected(); err != nil {
		return nil, err
	}
	if spec == nil {
		return nil, fmt.Errorf("clone %q from template %q: nil clone spec", name, c.vmName(vm))
	}
	res, err := c.runTask(ctx, cloneTaskTimeout, func(ctx context.Context) (*object.Task, error) {
		return c.vm(vm).Clone(ctx, object.NewFolder(c.vim, folder), name, *spec)
	})
	if err != nil {
		return nil, fmt.Errorf("clone %q from template %q: %w", name, c.vmName(vm), err)
	}
	ref, ok := res.(types.ManagedObjectReference)
	if !ok {
		return nil, fmt.Errorf("clone %q from template %q: task result is %T, not a reference", name, c.vmName(vm), res)
	}
	c.learnName(ref, name)
	c.log.Debug("cloned", logkey.VM, name, "template", c.vmName(vm))
	return &ref, nil
}

// renameVirtualMachine renames the VM and waits for the task.
func (c *Client) renameVirtualMachine(ctx context.Context, vm types.ManagedObjectReference, newName string) error {
	if err := c.notConnected(); err != nil {
		return err
	}
	_, err := c.runTaskOn(ctx, reconfigureTaskTimeout, vm, false, func(ctx context.Context) (*object.Task, error) {
		return c.vm(vm).Rename(ctx, newName)
	})
	if err != nil {
		return fmt.Errorf("rename %q to %q: %w", c.vmName(vm), newName, err)
	}
	c.learnName(vm, newName)
	return nil
}

// reconfigureVirtualMachine applies spec and waits for the task.
func (c *Client) reconfigureVirtualMachine(ctx context.Context, vm types.ManagedObjectReference, spec types.VirtualMachineConfigSpec) error {
	if err := c.notConnected(); err != nil {
		return err
	}
	_, err := c.runTaskOn(ctx, reconfigureTaskTimeout, vm, true, func(ctx context.Context) (*object.Task, error) {
		return c.vm(vm).Reconfigure(ctx, spec)
	})
	if err != nil {
		return fmt.Errorf("reconfigure %q: %w", c.vmName(vm), err)
	}
	return nil
}

// markVirtualMachineAsTemplate turns a powered-off VM into a template (a
// single request, not a task).
func (c *Client) markVirtualMachineAsTemplate(ctx context.Context, vm types.ManagedObjectReference) error {
	if err := c.notConnected(); err != nil {
		return err
	}
	release, err := c.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	if err := c.vm(vm).MarkAsTemplate(ctx); err != nil {
		return fmt.Errorf("mark %q as template: %w", c.vmName(vm), err)
	}
	return nil
}

// vmName names a VM in errors and logs without a round trip: the name
// this client last saw it under (loaded by name, cloned, renamed, listed,
// retrieved), else its reference.
func (c *Client) vmName(vm types.ManagedObjectReference) string {
	c.namesMu.Lock()
	n, ok := c.names[vm]
	c.namesMu.Unlock()
	if ok {
		return n
	}
	return vm.Value
}

// learnNames records the names of VMs read from vCenter, for vmName.
func (c *Client) learnNames(vms []mo.VirtualMachine) {
	c.namesMu.Lock()
	defer c.namesMu.Unlock()
	for _, o := range vms {
		if o.Name != "" {
			c.names[o.Self] = o.Name
		}
	}
}

// learnName records one VM's name (empty: forget it), for vmName.
func (c *Client) learnName(vm types.ManagedObjectReference, name string) {
	c.namesMu.Lock()
	defer c.namesMu.Unlock()
	if name == "" {
		delete(c.names, vm)
		return
	}
	c.names[vm] = name
}
