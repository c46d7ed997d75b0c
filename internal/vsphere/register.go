package vsphere

import (
	"context"
	"errors"
	"fmt"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/guest"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/internal/modelref"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
	"github.com/vmware/govmomi/vim25/types"
)

// tmpSuffix names the VM a V1 model's template is built in.
const tmpSuffix = "-tmp"

// registerModel builds the template of a V1 model (docs/design.md#v1-models): clone
// the model's base image as "<model>-tmp", run the worker in register mode
// followed by PostCmd (which shuts the VM down), wait for the shutdown,
// replace our previous template of the model, rename the VM to the model's
// name, record Model=true and the model's last modification, and mark it
// as a template. A failure is reported to the API as the model's spawn
// error and the tmp VM is powered off and marked for deletion.
func (h *HatcheryVSphere) registerModel(ctx context.Context, args spawn.Arguments) error {
	m := args.Model.ModelV1
	if m == nil {
		return fmt.Errorf("register model %q: v2 models cannot be registered", args.Model.GetName())
	}
	tmpName := modelref.BuiltName(m) + tmpSuffix
	var vm types.ManagedObjectReference
	var annot inventory.Annotation
	vmName := tmpName
	leasedIP := ""
	cloudInit := h.conf().BootstrapOf(args.Model) == config.BootstrapCloudInit
	fail := func(step string, err error) error {
		h.log.Warn("model registration failed", logkey.VM, vmName, logkey.Model, m.Path(), logkey.Detail, step)
		if vm.Value != "" {
			if cloudInit {
				h.scrubUserdata(ctx, vm, vmName, "registration failed")
			}
			h.abandonVM(ctx, vm, vmName, leasedIP)
			h.ips.Release(leasedIP, tmpName) // reserved under its first name
		}
		// The framework reports the returned error on the model (PUT
		// .../error), once per attempt.
		return fmt.Errorf("register model %q in vm %q: %s: %w", m.Path(), vmName, step, err)
	}

	ga, _, err := h.bootstrapAccess(ctx, args.Model)
	if err != nil {
		return fail("resolve guest credentials", err)
	}
	script, err := guest.Script(args, ga.PreStartScript, h.conf().WorkerTTLDuration())
	if err != nil {
		return fail("build register script", err)
	}
	boot := h.cloudInitBootOf(args.Model, cloudInit, script, args.WorkerConfig)
	vms, err := h.inv.VMs(ctx)
	if err != nil {
		return fail("list vms", err)
	}
	for _, v := range vms {
		if v.Name == tmpName {
			return fail("check name", fmt.Errorf("a vm named %q already exists", tmpName))
		}
	}
	base := modelref.BaseOf(args.Model) // the model's image
	image := base.Name
	annot = inventory.Annotation{
		HatcheryName:            h.Name(),
		WorkerName:              args.WorkerName,
		RegisterOnly:            true,
		WorkerModelPath:         m.Path(),
		VMwareModelPath:         image,
		WorkerModelLastModified: modelLastModified(m),
		Created:                 h.now().UTC(),
	}
	if annot.WorkerName == "" {
		annot.WorkerName = tmpName
	}
	vm, err = h.cloneVMBoot(ctx, base, tmpName, &annot, nil, boot)
	if err != nil {
		vm = types.ManagedObjectReference{} // cloneVM has cleaned up
		return fail("clone base image", metrics.MarkSpawnFailure(metrics.SpawnFailureClone, err))
	}
	leasedIP = annot.IPAddress
	h.recordCreated(annot.WorkerName, args.JobID)
	h.log.Info("model registration started", logkey.VM, tmpName, logkey.Model, m.Path(), logkey.IP, annot.IPAddress)

	if cloudInit {
		err = h.startCloudInitWorker(ctx, vm, tmpName, &annot, false)
	} else {
		err = h.startWorker(ctx, vm, tmpName, &annot, ga, script, args.WorkerConfig)
	}
	if err != nil {
		var se *guest.StepError
		if errors.As(err, &se) {
			return fail(se.Step, metrics.MarkSpawnFailure(guestFailure(se.Step), se.Err))
		}
		return fail("start register worker", err)
	}
	sctx, cancel := context.WithTimeout(ctx, guest.Readiness.RegisterShutdown)
	err = h.vs.WaitForVirtualMachineShutdown(sctx, vm)
	cancel()
	if err != nil {
		return fail("wait for shutdown", err)
	}
	if cloudInit {
		// Every clone would copy the guestinfo of its template: the token
		// and the tmp VM's identity go before it becomes one.
		if err := h.clearGuestinfo(ctx, vm, tmpName); err != nil {
			return fail("clear cloud-init guestinfo", err)
		}
	}

	vms, err = h.inv.VMs(ctx)
	if err != nil {
		return fail("list vms", err)
	}
	name := modelref.BuiltName(m)
	for _, v := range vms {
		if v.Name != name {
			continue
		}
		// Only our own template of this model is replaced; anything else
		// with that name is left alone and the registration fails.
		if !v.Template || !v.OwnedBy(h.Name()) || !v.Annotation.Model {
			return fail("replace template", fmt.Errorf("vm %q exists and is not this hatchery's template of the model", name))
		}
		if err := h.vs.DestroyVirtualMachine(ctx, v.Ref); err != nil {
			h.inv.Invalidate()
			return fail("destroy old template", fmt.Errorf("template %q: %w", name, err))
		}
		h.inv.Invalidate()
		h.log.Info("old model template destroyed", logkey.VM, name, logkey.Model, m.Path(), logkey.Detail, "replaced by a new registration")
	}
	if err := h.vs.RenameVirtualMachine(ctx, vm, name); err != nil {
		h.inv.Invalidate(vcenter.RefOf(vm.Reference()))
		return fail("rename", fmt.Errorf("rename %q to %q: %w", tmpName, name, err))
	}
	vmName = name
	h.inv.Invalidate(vcenter.RefOf(vm.Reference()))
	annot.WorkerName = name
	annot.Model = true
	annot.RegisterOnly = false
	annot.JobID = ""
	// A template holds no IP and no worker: its clones get their own.
	annot.IPAddress = ""
	annot.WorkerStarted = nil
	if err := h.writeAnnotation(ctx, vm, &annot); err != nil {
		return fail("write template annotation", err)
	}
	if err := h.vs.MarkVirtualMachineAsTemplate(ctx, vm); err != nil {
		h.inv.Invalidate(vcenter.RefOf(vm.Reference()))
		return fail("mark as template", fmt.Errorf("template %q: %w", name, err))
	}
	// Named: a watch may not report the template flag (vcsim does not).
	h.inv.Invalidate(vcenter.RefOf(vm.Reference()))
	h.ips.Release(leasedIP, tmpName)
	h.log.Info("model registered", logkey.VM, name, logkey.Model, m.Path())
	return nil
}
