package vsphere

import (
	"context"
	"errors"
	"fmt"

	"github.com/cds-contrib/hatchery-vsphere/internal/clonespec"
	"github.com/cds-contrib/hatchery-vsphere/internal/cloudinit"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/internal/modelref"
	"github.com/cds-contrib/hatchery-vsphere/internal/spawnfault"
	"github.com/cds-contrib/hatchery-vsphere/internal/spawntiming"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// cloneVM clones template (modelref's rule, docs/design.md#which-template)
// into a new VM vmName carrying annot (IP allocated and recorded in annot
// when a range is configured) with the flavor applied, powered on. On failure a half-made VM is marked for
// deletion (a warm-pool slot's by its provisioning, which owns its entry); the IP reservation is released at once when no clone was
// started or vCenter answered a fault, and kept until it expires (or the
// inventory shows the IP) when the clone's outcome is unknown: vCenter may
// still create the VM holding that IP.
func (h *HatcheryVSphere) cloneVM(ctx context.Context, template modelref.Template, vmName string, annot *inventory.Annotation, flavor *config.Flavor) (vctypes.Ref, error) {
	return h.cloneVMBoot(ctx, template, vmName, annot, flavor, nil)
}

// cloneVMBoot is cloneVM; a non-nil boot makes a cloud-init clone
// (clonespec.Builder.Spec).
func (h *HatcheryVSphere) cloneVMBoot(ctx context.Context, tpl modelref.Template, vmName string, annot *inventory.Annotation, flavor *config.Flavor, boot *cloudinit.Boot) (vctypes.Ref, error) {
	if annot == nil {
		return vctypes.Ref{}, fmt.Errorf("clone %q from template %q: no annotation", vmName, tpl.Name)
	}
	cfg := h.conf() // one snapshot: where it goes, its guest OS
	to := cloneTo{w: h.whereIn(cfg, annot), windows: cfg.OSOfRecord(annot.WorkerModelPath, annot.VMwareModelPath) == config.OSWindows}
	return h.cloneVMTo(ctx, tpl, vmName, annot, flavor, boot, to)
}

// cloneTo is what a clone takes of a plan (a job's: admission.Plan) or
// of the configuration (cloneVMBoot): where it goes (nil without
// [[placements]]) and whether its guest runs Windows (sysprep).
type cloneTo struct {
	w       *where
	windows bool
}

// cloneVMTo is cloneVMBoot sent where to says.
func (h *HatcheryVSphere) cloneVMTo(ctx context.Context, tpl modelref.Template, vmName string, annot *inventory.Annotation, flavor *config.Flavor, boot *cloudinit.Boot, to cloneTo) (vctypes.Ref, error) {
	templateName := tpl.Name
	if annot == nil {
		return vctypes.Ref{}, fmt.Errorf("clone %q from template %q: no annotation", vmName, templateName)
	}
	// With [[placements]], where its admission sent it (placements.go):
	// the record names the placement, and a copy of the template the
	// placement names (templateCopies) is cloned instead, found as a
	// template is.
	w := to.w
	if w != nil {
		annot.Placement = w.placement.Name
		if c := w.placement.CopyOf(tpl.Name); c != tpl.Name && !tpl.Built {
			tpl = modelref.Template{Name: c}
			templateName = c
		}
	}
	// Cleanup leaves a name being cloned alone: the VM may not be in the
	// inventory yet. A warm-pool VM is already Provisioning: it stays so
	// (its provisioning moves it on). A name destroyed earlier (a V1
	// model's registration VM) is used again.
	cloning := false
	switch prev, err := h.life.MoveFrom(vmName, []lifecycle.Phase{lifecycle.Gone, lifecycle.Destroyed}, lifecycle.Cloning); {
	case err == nil:
		cloning = true
	case prev != lifecycle.Provisioning:
		h.log.Debug("clone not recorded in the lifecycle table", logkey.VM, vmName, logkey.Err, err)
	}
	marked := false
	defer func() {
		if cloning && !marked {
			h.life.Must(vmName, lifecycle.Cloning, lifecycle.Gone)
		}
	}()
	if annot.Created.IsZero() {
		annot.Created = h.now().UTC()
	}
	vms, leased, err := h.cloneReads(ctx, tpl, vmName, annot)
	if err != nil {
		return vctypes.Ref{}, fmt.Errorf("clone %q from template %q: %w", vmName, templateName, err)
	}
	// fail cleans up after a failed step. created: a VM of that name may
	// exist (marked for deletion when the entry is the clone's own);
	// unknown: vCenter may still create it, so its IP stays reserved.
	fail := func(step string, err error, created, unknown bool) (vctypes.Ref, error) {
		switch {
		case leased != "" && unknown:
			h.log.Info("ip kept reserved", logkey.VM, vmName, logkey.IP, leased, logkey.Detail, "clone outcome unknown: "+step)
		case leased != "":
			h.ips.Release(leased, vmName)
			annot.IPAddress = ""
		}
		if w != nil && step != "clone" {
			// No clone reached the placement: a probe lets the next go.
			h.capacity.Book.Ended(w.placement.Name, w.key)
		}
		if created && cloning {
			// The clone's own entry leaves Cloning for Marked. An entry
			// it did not record is the loop's that did: a warm-pool
			// slot's provisioning marks its VM itself (leaving
			// Provisioning once, on every path); marked here first, the
			// provisioning's own mark found it marked already.
			marked = h.markToDelete(vmName)
		}
		h.logCloneFailure(ctx, err, vmName, templateName, step)
		return vctypes.Ref{}, fmt.Errorf("clone %q from template %q: %s: %w", vmName, templateName, step, err)
	}

	template, err := h.loadTemplate(ctx, vms, tpl)
	if err != nil {
		return fail("load template", spawnfault.MarkTemplate(err), false, false)
	}
	spec, err := h.clones.SpecFor(ctx, h.log, template, annot, flavor, boot, w.location(), to.windows)
	if err != nil {
		h.clones.Forget(template.Ref)
		return fail("prepare clone spec", err, false, false)
	}
	folder, err := h.folderOf(ctx, w)
	if err != nil {
		return fail("load folder", err, false, false)
	}
	spawntiming.Mark(ctx, spawntiming.StageBookToClone)
	ref, err := h.vs.CloneVirtualMachine(ctx, template.Ref, vcenter.MORef(folder), vmName, spec)
	err = vcenter.Classify(err)
	h.inv.Invalidate()
	if err != nil {
		// The template may have changed under its cached device list.
		h.clones.Forget(template.Ref)
		// A fault that points at the placement (a host or datastore
		// down, no space) backs it off and is not the template's: the
		// quarantine does not count it.
		marked := spawnfault.MarkTemplate(err)
		if h.placementOutcome(w, vmName, err) {
			marked = err
		}
		// A failed clone task may leave a half-made VM behind (it carries
		// our annotation): the cleanup destroys it. A name already taken
		// is someone else's VM: never marked.
		return fail("clone", marked, vctypes.KindOf(err) != vctypes.FaultDuplicateName, !spawnfault.IsVCenterFault(err))
	}
	h.placementOutcome(w, vmName, nil)
	if ref == nil {
		// vCenter reported success: the VM probably exists with its IP.
		return fail("clone", errors.New("no reference returned"), true, true)
	}
	spawntiming.Mark(ctx, spawntiming.StageClone)
	h.log.Info("vm cloned", logkey.VM, vmName, logkey.Model, templateName, logkey.Flavor, clonespec.FlavorName(flavor), logkey.IP, annot.IPAddress)
	return vcenter.RefOf(*ref), nil
}

// logCloneFailure is the one line of a clone of vmName from templateName
// that failed at step with err.
func (h *HatcheryVSphere) logCloneFailure(ctx context.Context, err error, vmName, templateName, step string) {
	switch {
	case vcenter.FaultKindOf(err) == vctypes.FaultDuplicateName:
		// The name is taken: for a pool slot, by another instance
		// of this hatchery (docs/high-availability.md); the caller
		// decides.
		h.log.Debug("clone refused: name taken", logkey.VM, vmName, logkey.Model, templateName, logkey.Detail, step)
	case ctx.Err() != nil:
		// The shutdown cut the step: a healthy stop logs no WARN.
		h.log.Info("clone cut by the shutdown", logkey.VM, vmName, logkey.Model, templateName, logkey.Detail, step)
	default:
		h.log.Warn("clone failed", logkey.VM, vmName, logkey.Model, templateName, logkey.Detail, step)
	}
}

// cloneReads reads what the clone of vmName from tpl needs before it
// starts: the inventory's VMs when it needs them (nil when not: a listing
// inventory, no address to reserve, not a V1 model's template), and the
// static IP it reserves, recorded in annot, when a range is configured and
// annot has none (leased: "" for none).
func (h *HatcheryVSphere) cloneReads(ctx context.Context, tpl modelref.Template, vmName string, annot *inventory.Annotation) (vms []inventory.VM, leased string, err error) {
	needIP := h.ips.Enabled() && annot.IPAddress == ""
	if _, listing := h.inv.(inventory.Listing); needIP || !listing || tpl.Built {
		// A shared snapshot costs no round trip: it also gives the
		// template's reference (a lookup by name walks the VM folder).
		// A V1 model's template is only ours (tpl.Built): read to check.
		if vms, err = h.inv.VMs(ctx); err != nil {
			return nil, "", fmt.Errorf("list vms: %w", err)
		}
	}
	if needIP {
		// Read the inventory first, then pick under the pool's lock only.
		lease, err := h.ips.Reserve(ctx, h.indexOf(vms).Used, vmName)
		if err != nil {
			return nil, "", fmt.Errorf("reserve ip: %w", err)
		}
		leased = lease.IP
		annot.IPAddress = lease.IP
		h.log.Info("ip reserved", logkey.VM, vmName, logkey.IP, lease.IP)
	}
	return vms, leased, nil
}

// loadTemplate returns template t (modelref.Template.Is): from vms when it
// is there (no round trip; a template recreated since the snapshot fails
// the clone with a not-found fault and the job is retried), else looked up
// by name; a V1 model's template (t.Built) must be in vms.
func (h *HatcheryVSphere) loadTemplate(ctx context.Context, vms []inventory.VM, t modelref.Template) (clonespec.Template, error) {
	name := t.Name
	v, ok := inventory.FindTemplate(vms, h.Name(), t)
	switch {
	case ok && v.Ref.Value != "":
		return clonespec.Template{Ref: vcenter.MORef(v.Ref), Name: name}, nil
	case !ok && t.Built:
		// Another hatchery's template of that name is never cloned.
		return clonespec.Template{}, fmt.Errorf("template %q: not this hatchery's template of the model", name)
	}
	ref, err := h.vs.LoadVirtualMachine(ctx, name)
	if err != nil {
		return clonespec.Template{}, err
	}
	return clonespec.Template{Ref: vcenter.MORef(ref), Name: name}, nil
}
