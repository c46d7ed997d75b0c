package vsphere

import (
	"context"
	"errors"
	"fmt"

	"github.com/cds-contrib/hatchery-vsphere/internal/cloudinit"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/guest"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/internal/modelref"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
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
	r := &registration{h: h, m: m, tmpName: tmpName, vmName: tmpName,
		cloudInit: h.conf().BootstrapOf(args.Model) == config.BootstrapCloudInit}

	ga, _, err := h.bootstrapAccess(ctx, args.Model)
	if err != nil {
		return r.fail(ctx, "resolve guest credentials", err)
	}
	script, err := guest.Script(args, ga.PreStartScript, h.conf().WorkerTTLDuration())
	if err != nil {
		return r.fail(ctx, "build register script", err)
	}
	if err := r.clone(ctx, args, h.cloudInitBootOf(args.Model, r.cloudInit, script, args.WorkerConfig)); err != nil {
		return err
	}
	if err := r.run(ctx, args, ga, script); err != nil {
		return err
	}
	return r.promote(ctx)
}

// registration is one registerModel: the model, its tmp VM (vm, its
// current name vmName, the address leased for it) and the record written
// on it, which the steps share.
type registration struct {
	h         *HatcheryVSphere
	m         *sdk.Model
	tmpName   string
	vm        vctypes.Ref
	annot     inventory.Annotation
	vmName    string
	leasedIP  string
	cloudInit bool
}

// fail ends a registration that failed at step: the tmp VM, if any, is
// scrubbed (cloud-init), powered off and marked for deletion, and its
// address released. It returns the error the framework reports on the
// model (PUT .../error), once per attempt.
func (r *registration) fail(ctx context.Context, step string, err error) error {
	h, m := r.h, r.m
	h.log.Warn("model registration failed", logkey.VM, r.vmName, logkey.Model, m.Path(), logkey.Detail, step)
	if r.vm.Value != "" {
		if r.cloudInit {
			h.scrubUserdata(ctx, r.vm, r.vmName, "registration failed")
		}
		h.abandonVM(ctx, r.vm, r.vmName, r.leasedIP)
		h.ips.Release(r.leasedIP, r.tmpName) // reserved under its first name
	}
	return fmt.Errorf("register model %q in vm %q: %s: %w", m.Path(), r.vmName, step, err)
}

// clone checks that no VM bears the tmp name, then clones the model's base
// image as the tmp VM with its record (a registration's) and boot.
func (r *registration) clone(ctx context.Context, args spawn.Arguments, boot *cloudinit.Boot) error {
	h, m, tmpName := r.h, r.m, r.tmpName
	vms, err := h.inv.VMs(ctx)
	if err != nil {
		return r.fail(ctx, "list vms", err)
	}
	for _, v := range vms {
		if v.Name == tmpName {
			return r.fail(ctx, "check name", fmt.Errorf("a vm named %q already exists", tmpName))
		}
	}
	base := modelref.BaseOf(args.Model) // the model's image
	image := base.Name
	r.annot = inventory.Annotation{
		HatcheryName:            h.Name(),
		WorkerName:              args.WorkerName,
		RegisterOnly:            true,
		WorkerModelPath:         m.Path(),
		VMwareModelPath:         image,
		WorkerModelLastModified: modelLastModified(m),
		Created:                 h.now().UTC(),
	}
	if r.annot.WorkerName == "" {
		r.annot.WorkerName = tmpName
	}
	vm, err := h.cloneVMBoot(ctx, base, tmpName, &r.annot, nil, boot)
	if err != nil {
		// cloneVM has cleaned up: r.vm stays empty.
		return r.fail(ctx, "clone base image", metrics.MarkSpawnFailure(metrics.SpawnFailureClone, err))
	}
	r.vm = vm
	r.leasedIP = r.annot.IPAddress
	h.recordCreated(r.annot.WorkerName, args.JobID)
	h.log.Info("model registration started", logkey.VM, tmpName, logkey.Model, m.Path(), logkey.IP, r.annot.IPAddress)
	return nil
}

// run starts the register worker in the tmp VM and waits for the VM to
// shut down (the model's PostCmd), then, for cloud-init, clears the
// guestinfo every clone of the template would copy.
func (r *registration) run(ctx context.Context, args spawn.Arguments, ga guest.Access, script string) error {
	h, vm, tmpName := r.h, r.vm, r.tmpName
	var err error
	if r.cloudInit {
		err = h.startCloudInitWorker(ctx, vm, tmpName, &r.annot, false)
	} else {
		err = h.startWorker(ctx, vm, tmpName, &r.annot, ga, script, args.WorkerConfig)
	}
	if err != nil {
		var se *guest.StepError
		if errors.As(err, &se) {
			return r.fail(ctx, se.Step, metrics.MarkSpawnFailure(guestFailure(se.Step), se.Err))
		}
		return r.fail(ctx, "start register worker", err)
	}
	sctx, cancel := context.WithTimeout(ctx, guest.Readiness.RegisterShutdown)
	err = h.vs.WaitForVirtualMachineShutdown(sctx, vm)
	cancel()
	if err != nil {
		return r.fail(ctx, "wait for shutdown", err)
	}
	if r.cloudInit {
		// Every clone would copy the guestinfo of its template: the token
		// and the tmp VM's identity go before it becomes one.
		if err := h.clearGuestinfo(ctx, vm, tmpName); err != nil {
			return r.fail(ctx, "clear cloud-init guestinfo", err)
		}
	}
	return nil
}

// promote makes the shut-down tmp VM the model's template: our previous
// template of the model destroyed (anything else of that name fails the
// registration), the VM renamed, its record rewritten as a template's,
// and marked as a template.
func (r *registration) promote(ctx context.Context) error {
	h, m, vm, tmpName := r.h, r.m, r.vm, r.tmpName
	vms, err := h.inv.VMs(ctx)
	if err != nil {
		return r.fail(ctx, "list vms", err)
	}
	name := modelref.BuiltName(m)
	for _, v := range vms {
		if v.Name != name {
			continue
		}
		// Only our own template of this model is replaced; anything else
		// with that name is left alone and the registration fails.
		if !v.Template || !v.OwnedBy(h.Name()) || !v.Annotation.Model {
			return r.fail(ctx, "replace template", fmt.Errorf("vm %q exists and is not this hatchery's template of the model", name))
		}
		if err := h.vs.DestroyVirtualMachine(ctx, v.ObjectRef()); err != nil {
			h.inv.Invalidate()
			return r.fail(ctx, "destroy old template", fmt.Errorf("template %q: %w", name, err))
		}
		h.inv.Invalidate()
		h.log.Info("old model template destroyed", logkey.VM, name, logkey.Model, m.Path(), logkey.Detail, "replaced by a new registration")
	}
	if err := h.vs.RenameVirtualMachine(ctx, vm, name); err != nil {
		h.inv.Invalidate(vm)
		return r.fail(ctx, "rename", fmt.Errorf("rename %q to %q: %w", tmpName, name, err))
	}
	r.vmName = name
	h.inv.Invalidate(vm)
	annot := &r.annot
	annot.WorkerName = name
	annot.Model = true
	annot.RegisterOnly = false
	annot.JobID = ""
	// A template holds no IP and no worker: its clones get their own.
	annot.IPAddress = ""
	annot.WorkerStarted = nil
	if err := h.writeAnnotation(ctx, vm, annot); err != nil {
		return r.fail(ctx, "write template annotation", err)
	}
	if err := h.vs.MarkVirtualMachineAsTemplate(ctx, vm); err != nil {
		h.inv.Invalidate(vm)
		return r.fail(ctx, "mark as template", fmt.Errorf("template %q: %w", name, err))
	}
	// Named: a watch may not report the template flag (vcsim does not).
	h.inv.Invalidate(vm)
	h.ips.Release(r.leasedIP, tmpName)
	h.log.Info("model registered", logkey.VM, name, logkey.Model, m.Path())
	return nil
}
