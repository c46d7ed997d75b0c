package clonespec

import (
	"context"
	"errors"
	"fmt"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/cloudinit"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// Change is one reconfigure of an existing VM in the project's terms: the
// warm pool's claims (internal/warmpool) say what they change, VMPort
// turns it into vCenter's config specification. The zero value changes
// nothing.
type Change struct {
	// ChangeVersion, when set, makes the reconfigure a compare-and-swap:
	// vCenter refuses it (vctypes.FaultConcurrentAccess) when the VM
	// changed since that config.changeVersion was read.
	ChangeVersion string
	// Name renames the VM (the rename rides on the reconfigure: one task).
	Name string
	// Record is the ownership record written (Notes and mirror); nil
	// leaves it.
	Record *inventory.Annotation
	// Resize grows the VM to the flavor (CPU, memory, first disk; reads
	// the VM's devices first); nil leaves the hardware.
	Resize *config.Flavor
	// Boot adds the cloud-init guestinfo of the worker Name at the
	// Record's IP address (a new instance id, the userdata); nil adds none.
	Boot *cloudinit.Boot
}

// PrepError is a Change that could not be made into a specification:
// nothing was sent to vCenter. Step names what failed ("load devices",
// "apply flavor …", "cloud-init guestinfo").
type PrepError struct {
	Step string
	Err  error
}

// Error is "step: cause".
func (e *PrepError) Error() string { return e.Step + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *PrepError) Unwrap() error { return e.Err }

// VMPort adapts a vcenter.Port to the warm pool's port (warmpool.Port)
// and to the custody's (custody.Port), in the project's vocabulary: power,
// destroy, readiness waits and reconfigures (a Change, an ownership
// record, the userdata scrub) of one VM by its vctypes.Ref. Every error is classified
// (vcenter.Classify): the pool tells faults apart by their kind.
type VMPort struct {
	// Port reaches vCenter.
	Port vcenter.Port
	// Builder gives the cloud-init guestinfo of a Change with Boot.
	Builder *Builder
}

// StartVirtualMachine powers vm on (resumes a suspended one).
func (v VMPort) StartVirtualMachine(ctx context.Context, vm vctypes.Ref) error {
	return v.Port.StartVirtualMachine(ctx, vm)
}

// ShutdownVirtualMachine powers vm off.
func (v VMPort) ShutdownVirtualMachine(ctx context.Context, vm vctypes.Ref) error {
	return v.Port.ShutdownVirtualMachine(ctx, vm)
}

// SuspendVirtualMachine suspends a powered-on vm.
func (v VMPort) SuspendVirtualMachine(ctx context.Context, vm vctypes.Ref) error {
	return v.Port.SuspendVirtualMachine(ctx, vm)
}

// DestroyVirtualMachine destroys vm, powered off (already gone is success).
func (v VMPort) DestroyVirtualMachine(ctx context.Context, vm vctypes.Ref) error {
	return v.Port.DestroyVirtualMachine(ctx, vm)
}

// WriteRecord writes annot, vm's ownership record, in its Notes and their
// ExtraConfig mirror (inventory.Annotation.Record), in one reconfigure.
func (v VMPort) WriteRecord(ctx context.Context, vm vctypes.Ref, annot *inventory.Annotation) error {
	var spec types.VirtualMachineConfigSpec
	vcenter.ApplyRecord(&spec, annot.Record())
	return vcenter.Classify(v.Port.ReconfigureVirtualMachine(ctx, vcenter.MORef(vm), spec))
}

// ScrubUserdata removes the cloud-init userdata from vm's guestinfo
// (cloudinit.ScrubOptions), in one reconfigure.
func (v VMPort) ScrubUserdata(ctx context.Context, vm vctypes.Ref) error {
	spec := types.VirtualMachineConfigSpec{ExtraConfig: vcenter.OptionValues(cloudinit.ScrubOptions())}
	return vcenter.Classify(v.Port.ReconfigureVirtualMachine(ctx, vcenter.MORef(vm), spec))
}

// WaitForGuestOperationsReady blocks until the guest of vm runs programs
// or ctx ends.
func (v VMPort) WaitForGuestOperationsReady(ctx context.Context, vm vctypes.Ref) error {
	return v.Port.WaitForGuestOperationsReady(ctx, vm)
}

// WaitForVirtualMachineIP blocks until the guest of vm reports an IPv4
// address (expectedIP when not empty) or ctx ends.
func (v VMPort) WaitForVirtualMachineIP(ctx context.Context, vm vctypes.Ref, expectedIP string) (string, error) {
	return v.Port.WaitForVirtualMachineIP(ctx, vm, expectedIP)
}

// ReconfigureVirtualMachine applies c to vm in one reconfigure task. A
// *PrepError when the specification could not be built (nothing sent);
// otherwise vCenter's answer, classified.
func (v VMPort) ReconfigureVirtualMachine(ctx context.Context, vm vctypes.Ref, c Change) error {
	spec := types.VirtualMachineConfigSpec{ChangeVersion: c.ChangeVersion, Name: c.Name}
	if c.Record != nil {
		vcenter.ApplyRecord(&spec, c.Record.Record())
	}
	if c.Resize != nil {
		devices, err := v.Port.LoadVirtualMachineDevices(ctx, vcenter.MORef(vm))
		if err != nil {
			return &PrepError{Step: "load devices", Err: vcenter.Classify(err)}
		}
		if err := ApplyFlavor(&spec, c.Resize, devices); err != nil {
			return &PrepError{Step: fmt.Sprintf("apply flavor %q", c.Resize.Name), Err: err}
		}
	}
	if c.Boot != nil {
		if v.Builder == nil {
			return &PrepError{Step: "cloud-init guestinfo", Err: errors.New("no clone spec builder")}
		}
		ip := ""
		if c.Record != nil {
			ip = c.Record.IPAddress
		}
		opts, err := v.Builder.CloudInitOptions(c.Name, ip, *c.Boot)
		if err != nil {
			return &PrepError{Step: "cloud-init guestinfo", Err: err}
		}
		spec.ExtraConfig = append(spec.ExtraConfig, vcenter.OptionValues(opts)...)
	}
	return vcenter.Classify(v.Port.ReconfigureVirtualMachine(ctx, vcenter.MORef(vm), spec))
}
