package vcenter

import (
	"context"
	"errors"
	"fmt"
	"path"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// loadVirtualMachine finds a VM or template by name (or inventory path) in
// the inventory's scope (vim.Collector.FindInScope); templateFolders unset, one not in
// it is looked for by name in the datacenter's folders and its folder
// joins the scope (vim.Collector.Discover); set, it is ErrOutOfScope.
func (c *Client) loadVirtualMachine(ctx context.Context, name string) (types.ManagedObjectReference, error) {
	if err := c.notConnected(); err != nil {
		return types.ManagedObjectReference{}, err
	}
	ref, err := c.col.FindInScope(ctx, name)
	if errors.Is(err, ErrOutOfScope) && !c.TemplateFoldersSet() {
		ref, err = c.col.Discover(ctx, name)
	}
	if err != nil {
		return types.ManagedObjectReference{}, fmt.Errorf("find virtual machine %q: %w", name, err)
	}
	c.col.LearnName(ref, path.Base(name))
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
	if v, ok := c.col.Reported(vm, "runtime.powerState"); !ok || fmt.Sprint(v) == string(types.VirtualMachinePowerStatePoweredOn) {
		state, err := c.powerState(ctx, vm)
		if err != nil {
			return err
		}
		if state == types.VirtualMachinePowerStatePoweredOn {
			return nil
		}
	}
	_, err := c.runTaskOn(ctx, powerTaskTimeout, vm, true, c.vm(vm).PowerOn)
	if existing, ok := vim.InvalidPowerStateOf(err); ok && existing == types.VirtualMachinePowerStatePoweredOn {
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
	if existing, ok := vim.InvalidPowerStateOf(err); ok && existing == types.VirtualMachinePowerStatePoweredOff {
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
	if existing, ok := vim.InvalidPowerStateOf(err); ok && existing == types.VirtualMachinePowerStateSuspended {
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
	if err != nil && vim.IsNotFound(err) {
		c.col.LearnName(vm, "")
		return nil
	}
	if err != nil {
		return fmt.Errorf("destroy %q: %w", c.vmName(vm), err)
	}
	c.log.Debug("destroyed", logkey.VM, c.vmName(vm))
	c.col.LearnName(vm, "")
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
	c.col.LearnName(ref, name)
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
	c.col.LearnName(vm, newName)
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

// vmName names a VM in errors and logs without a round trip
// (vim.Collector.Name); only called once connected.
func (c *Client) vmName(vm types.ManagedObjectReference) string { return c.col.Name(vm) }
