package vsphere

import (
	"context"
	"errors"
	"fmt"

	"github.com/cds-contrib/hatchery-vsphere/internal/admission"
	"github.com/cds-contrib/hatchery-vsphere/internal/cloudinit"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/instantparent"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/internal/modelref"
	"github.com/cds-contrib/hatchery-vsphere/internal/spawnfault"
	"github.com/cds-contrib/hatchery-vsphere/internal/spawntiming"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// instantOrClaimOrClone returns the worker's VM, powered on and carrying
// annot: for a model whose cloneMode is instant, an instant clone of its
// ready parent (docs/instant-clones.md); when there is none, or the fork
// fails with a vCenter fault (no child was made), claimOrClone's, after
// one line saying which and why. A fork whose outcome is unknown fails
// the spawn: a child of that name may exist, which a clone of the same
// name must not meet. The clone mode, the flavor, the placement and the
// guest OS are the job's plan's.
func (h *HatcheryVSphere) instantOrClaimOrClone(ctx context.Context, args spawn.Arguments, plan admission.Plan, template modelref.Template, annot *inventory.Annotation, boot *cloudinit.Boot) (vctypes.Ref, error) {
	flavor := plan.Flavor
	// The placement the admission chose for the job (planWhere; nil
	// without [[placements]]): its parent serves the job, else the
	// fallback clone goes there too.
	to := cloneTo{w: h.planWhere(plan, args.JobID), windows: plan.IsWindows()}
	if !plan.Instant() {
		return h.claimOrClone(ctx, args, template, annot, flavor, boot, to)
	}
	// Named as instant parents' keys name it (config.PlacementNameOf):
	// without [[placements]] the default placement, as before.
	w, placementName := to.w, config.PlacementNameOf(annot.Placement)
	if w != nil {
		placementName = w.placement.Name
	}
	key, parent, ok := h.instantParentFor(template, placementName, flavor)
	// A flavor's parent stays wanted while its jobs come, served or not
	// (instantparent.DemandTTL after the last one).
	h.parents.Want(key, h.now())
	fallback := func(why string) (vctypes.Ref, error) {
		h.log.Info("instant clone not possible, cloning", logkey.VM, annot.WorkerName, logkey.Job, args.JobID, logkey.Model, args.Model.GetName(),
			logkey.Flavor, annot.Flavor, "parent_key", key.String(), logkey.Reason, why)
		return h.claimOrClone(ctx, args, template, annot, flavor, boot, to)
	}
	switch {
	case boot == nil:
		// Validate refuses it (instant needs cloud-init); the plan's
		// settings come from one snapshot, which was validated.
		return fallback("the model does not start through cloud-init's guestinfo")
	case !ok:
		return fallback(h.parents.Why(key, h.now()))
	}
	vm, err := h.instantClone(ctx, parent, w, annot, boot)
	if err == nil {
		h.placementOutcome(w, annot.WorkerName, nil)
		return vm, nil
	}
	if !instantFaultOfParent(err) || ctx.Err() != nil {
		h.placementUnused(w)
		return vctypes.Ref{}, err
	}
	kind := vcenter.FaultKindOf(err).Error()
	h.parents.MarkFailed(parent.Name, "fork failed: "+kind)
	return fallback("fork from parent " + parent.Name + " failed: " + kind)
}

// instantParentFor is the ready parent a worker of template with flavor
// is forked from in placement (config.PlacementNameOf): the
// parent of the template's size when the flavor is that size (or none),
// else the flavor's own parent. ok is false when that parent is not ready;
// key names it either way.
func (h *HatcheryVSphere) instantParentFor(template modelref.Template, placementName string, flavor *config.Flavor) (instantparent.Key, instantparent.Parent, bool) {
	key := instantparent.Key{Template: template.Name, Placement: config.PlacementNameOf(placementName)}
	p, ok := h.parents.Ready(key)
	if flavor == nil || (ok && p.CPUs == int64(flavor.CPUs) && p.MemoryMB == flavor.MemoryMB) {
		return key, p, ok
	}
	key.Flavor = flavor.Name
	p, ok = h.parents.Ready(key)
	return key, p, ok
}

// instantClone forks the child named annot.WorkerName from parent: its
// own identity in its guestinfo (the cloud-init metadata and userdata of
// boot: hostname, the static address reserved for it or DHCP, the worker
// config and token) and its own record in the ExtraConfig mirror (the
// parent's Notes carry no record: instant_parents.go), powered on as
// vCenter makes it. The child's guest applies its identity
// (configs/guest/instant-clone-child.sh); the userdata is scrubbed once
// the worker registers, as for a cloud-init clone. On failure the address
// is released unless the outcome is unknown, and a child that may exist
// is marked for deletion. w is the job's placement (nil without
// [[placements]]): the parent's, whose folder the child goes to and which
// its record names.
func (h *HatcheryVSphere) instantClone(ctx context.Context, parent instantparent.Parent, w *where, annot *inventory.Annotation, boot *cloudinit.Boot) (vctypes.Ref, error) {
	name := annot.WorkerName
	cloning := true
	if _, err := h.life.MoveFrom(name, []lifecycle.Phase{lifecycle.Gone, lifecycle.Destroyed}, lifecycle.Cloning); err != nil {
		cloning = false
		h.log.Debug("instant clone not recorded in the lifecycle table", logkey.VM, name, logkey.Err, err)
	}
	marked := false
	defer func() {
		if cloning && !marked {
			h.life.Must(name, lifecycle.Cloning, lifecycle.Gone)
		}
	}()
	annot.Created = h.now().UTC()
	if w != nil {
		annot.Placement = w.placement.Name
	}
	leased := ""
	if h.ips.Enabled() && annot.IPAddress == "" {
		vms, err := h.inv.VMs(ctx)
		if err != nil {
			return vctypes.Ref{}, fmt.Errorf("instant clone %q of parent %q: list vms: %w", name, parent.Name, err)
		}
		lease, err := h.ips.Reserve(ctx, h.indexOf(vms).Used, name)
		if err != nil {
			return vctypes.Ref{}, fmt.Errorf("instant clone %q of parent %q: reserve ip: %w", name, parent.Name, err)
		}
		leased, annot.IPAddress = lease.IP, lease.IP
		h.log.Info("ip reserved", logkey.VM, name, logkey.IP, lease.IP)
	}
	fail := func(step string, err error, unknown bool) (vctypes.Ref, error) {
		switch {
		case leased != "" && unknown:
			h.log.Info("ip kept reserved", logkey.VM, name, logkey.IP, leased, logkey.Detail, "instant clone outcome unknown: "+step)
		case leased != "":
			h.ips.Release(leased, name)
			annot.IPAddress = ""
		}
		if unknown && cloning {
			marked = h.markToDelete(name)
		}
		if !unknown && instantFaultOfParent(err) {
			// The spawn falls back: its line says why.
			h.log.Debug("instant clone failed", logkey.VM, name, "parent", parent.Name, logkey.Detail, step, logkey.Err, err)
		} else {
			h.warnUnlessShuttingDown(ctx, "instant clone failed", logkey.VM, name, "parent", parent.Name, logkey.Detail, step)
		}
		return vctypes.Ref{}, fmt.Errorf("instant clone %q of parent %q: %s: %w", name, parent.Name, step, err)
	}
	// Unset, vCenter puts the child in the datacenter's root VM folder,
	// outside the inventory the hatchery lists (docs/instant-clones.md):
	// the placement's folder, else the configured one.
	folder, err := h.folderOf(ctx, w)
	if err != nil {
		return fail("load folder", err, false)
	}
	req, err := h.instantCloneRequest(name, folder, annot, boot)
	if err != nil {
		return fail("prepare instant clone spec", err, false)
	}
	spawntiming.Mark(ctx, spawntiming.StageBookToClone)
	ref, err := h.vs.InstantCloneVirtualMachine(ctx, parent.Ref, req)
	err = vcenter.Classify(err)
	h.inv.Invalidate()
	switch {
	case err != nil:
		return fail("instant clone", err, !spawnfault.IsVCenterFault(err))
	case ref.IsZero():
		return fail("instant clone", errors.New("no reference returned"), true)
	}
	spawntiming.Mark(ctx, spawntiming.StageClone)
	h.log.Info("vm forked from its instant parent", logkey.VM, name, "parent", parent.Name, logkey.Flavor, annot.Flavor, logkey.IP, annot.IPAddress)
	return ref, nil
}

// instantCloneRequest is the child's request: its name, its folder (its
// placement's, else the hatchery's; the parent's pool and datastore,
// which are its placement's: the child stays on its parent's host), and
// its options: the record's mirror and the cloud-init guestinfo keys
// internal/cloudinit builds for a clone.
func (h *HatcheryVSphere) instantCloneRequest(name string, folder vctypes.Ref, annot *inventory.Annotation, boot *cloudinit.Boot) (vctypes.InstantClone, error) {
	opts, err := h.clones.CloudInitOptions(name, annot.IPAddress, *boot)
	if err != nil {
		return vctypes.InstantClone{}, fmt.Errorf("cloud-init guestinfo of %q: %w", name, err)
	}
	return vctypes.InstantClone{Name: name, Folder: folder, Options: append(annot.Record().Options, opts...)}, nil
}

// instantFaultOfParent tells whether a fork's fault is the parent's
// (a spawn then marks it failed): any vCenter fault but a name taken.
func instantFaultOfParent(err error) bool {
	return spawnfault.IsVCenterFault(err) && vcenter.FaultKindOf(err) != vctypes.FaultDuplicateName
}
