package vsphere

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/cloudinit"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/custody"
	"github.com/cds-contrib/hatchery-vsphere/internal/guest"
	"github.com/cds-contrib/hatchery-vsphere/internal/instantparent"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/internal/modelref"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// instantParentsInterval is the period of the instant-parents loop: a
// parent that failed is seen, destroyed and rebuilt within it.
const instantParentsInterval = 10 * time.Second

// parentGuestGrace is how long a new parent's guest may take to answer
// (an address, guest operations) before the parent counts as failed.
const parentGuestGrace = 10 * time.Minute

// parentNotes is what a parent's Notes field says once built: no record
// (the record lives in the ExtraConfig mirror), so that a child, which
// inherits its parent's Notes, reads only the record its own
// specification wrote in the mirror (docs/instant-clones.md).
const parentNotes = "cds hatchery instant-clone parent: its record is in ExtraConfig " + inventory.AnnotationMirrorKey

// parentScript is a parent's cloud-init worker script: none runs in a
// parent.
const parentScript = "# instant-clone parent: no worker (docs/instant-clones.md)"

// tendInstantParents is one pass of the instant-parents loop
// (docs/instant-clones.md): it reads the inventory, decides with
// internal/instantparent which parents to keep, build and destroy,
// installs the ready ones for the spawns, destroys the others (a failed
// one quarantined first) and builds the missing ones, one after the
// other, each once its footprint is reserved.
func (h *HatcheryVSphere) tendInstantParents(ctx context.Context) {
	cfg := h.conf()
	if !hasInstantEntries(cfg) && h.parents.ReadyCount() == 0 {
		// Nothing to build nor serve: the awol cleanup destroys a parent
		// no model uses (parentVerdict), without a listing every pass.
		return
	}
	vms, err := h.inv.VMs(ctx)
	if err != nil {
		h.warnUnlessShuttingDown(ctx, "instant parents not tended: cannot list vms", logkey.Err, err)
		return
	}
	now := h.now()
	have, byName := h.parentsOf(vms)
	h.parents.Seen(have, now)
	find := func(t modelref.Template) (string, string, bool) {
		v, ok := inventory.FindTemplate(vms, h.Name(), t)
		return v.Ref.Value, v.ChangeVersion, ok
	}
	plan := instantparent.Decide(instantparent.Input{
		Wants:       instantparent.Wants(cfg, find, h.parents.Demand(now)),
		Have:        have,
		Failed:      h.parents.Failed(),
		Building:    h.parents.Building(),
		Quarantined: func(k instantparent.Key) bool { return h.parents.Quarantined(k, now) },
		Now:         now,
		GuestGrace:  parentGuestGrace,
	})
	for _, r := range plan.Remove {
		if r.Failed {
			until := h.parents.Quarantine(r.Parent.Key, now, r.Reason)
			h.log.Warn("instant parent quarantined", logkey.VM, r.Parent.Name, "parent_key", r.Parent.Key.String(), logkey.Reason, r.Reason, "rebuild_after", until.Sub(now).String())
		}
	}
	h.adoptParents(ctx, plan)
	h.parents.Apply(plan)
	for _, r := range plan.Remove {
		h.destroyParent(ctx, byName[r.Parent.Name], r.Reason)
	}
	for _, w := range plan.Build {
		if ctx.Err() != nil {
			return
		}
		h.buildParent(ctx, cfg, w)
	}
}

// parentsOf returns the parents vms show: this hatchery's VMs whose
// record says instant_parent and names the VM itself (a record copied
// onto another VM is not a parent), with the VMs by name.
func (h *HatcheryVSphere) parentsOf(vms []inventory.VM) ([]instantparent.Parent, map[string]inventory.VM) {
	var out []instantparent.Parent
	byName := map[string]inventory.VM{}
	for _, v := range vms {
		if v.Template || !v.OwnedBy(h.Name()) || !v.Annotation.InstantParent || v.Annotation.WorkerName != v.Name {
			continue
		}
		if h.life.InVM(lifeVM(v), lifecycle.Removed()...) {
			continue // on its way out
		}
		a := v.Annotation
		byName[v.Name] = v
		out = append(out, instantparent.Parent{
			Name: v.Name, Ref: v.ObjectRef(), Key: instantparent.KeyOf(a.ParentTemplate, a.Placement, a.Flavor),
			Version: a.ParentTemplate, Created: a.Created, Power: v.Power(),
			GuestUp: len(v.IPAddresses) > 0 || v.GuestOperationsReady, IP: a.IPAddress,
			CPUs: int64(v.NumCPU), MemoryMB: int64(v.MemoryMB),
		})
	}
	return out, byName
}

// adoptParents blanks the Notes and guestinfo of the ready parents this
// run did not build (found from their records after a restart): a run
// cut between a parent's clone and its blanking left its record in its
// Notes, which its children would inherit. Done once per parent and run.
func (h *HatcheryVSphere) adoptParents(ctx context.Context, plan instantparent.Plan) {
	for k, p := range plan.Ready {
		if _, done := h.parentsBlanked.Load(p.Name); done {
			continue
		}
		if err := h.blankParent(ctx, p.Ref, p.Name); err != nil {
			h.warnUnlessShuttingDown(ctx, "instant parent not adopted, retried next pass", logkey.VM, p.Name, logkey.Err, err)
			delete(plan.Ready, k)
			continue
		}
		h.log.Info("instant parent adopted", logkey.VM, p.Name, "parent_key", k.String(), logkey.Detail, "found from its record")
	}
}

// blankParent writes parentNotes in the parent's Notes and removes the
// cloud-init guestinfo keys from it: a child reads only its own.
func (h *HatcheryVSphere) blankParent(ctx context.Context, ref vctypes.Ref, name string) error {
	sctx, cancel := context.WithTimeout(ctx, custody.ScrubTimeout)
	defer cancel()
	notes := parentNotes
	spec := vcenter.ConfigSpecOf(vctypes.ConfigChange{Notes: &notes, Options: cloudinit.BlankOptions()})
	if err := h.vs.ReconfigureVirtualMachine(sctx, vcenter.MORef(ref), spec); err != nil {
		return fmt.Errorf("blank instant parent %q: %w", name, err)
	}
	h.parentsBlanked.Store(name, true)
	return nil
}

// destroyParent destroys a parent of ours (custody.Custody.Delete
// refuses any other VM); the cleanup retries a failure (the VM is marked).
func (h *HatcheryVSphere) destroyParent(ctx context.Context, vm inventory.VM, reason string) {
	h.log.Info("instant parent destroyed", logkey.VM, vm.Name, logkey.Reason, reason)
	h.markToDelete(vm.Name)
	if err := h.deleteServer(ctx, vm, custody.StopRunning); err != nil {
		h.warnUnlessShuttingDown(ctx, "instant parent not destroyed, the cleanup retries", logkey.VM, vm.Name, logkey.Err, err)
		return
	}
	h.parentsBlanked.Delete(vm.Name)
}

// buildParent builds w's parent in its key's placement: its footprint
// reserved against maxCpus and maxMemoryMB and, with [[placements]], in
// that placement (admission.Admission.ReserveProvisioningAt: a parent
// counts in capacity and in its placement's figures as any powered-on VM
// of ours, never against maxWorker), cloned from its template into that
// placement's pool, datastore, folder and network (cloneVMBoot, whereOf),
// powered on, with its record
// (instant_parent, parent_template, placement, flavor), its guest up,
// then blanked (blankParent). A placement cordoned or backing off, or a
// refused reservation, waits for the next pass; a failed build
// quarantines the key. The parent boots through
// cloud-init's guestinfo (hostname, address), as the model's workers do.
func (h *HatcheryVSphere) buildParent(ctx context.Context, cfg *config.Config, w instantparent.Want) {
	if !h.parents.BeginBuild(w.Key) {
		return
	}
	failure := ""
	defer func() { h.parents.EndBuild(w.Key, h.now(), failure) }()
	var flavor *config.Flavor
	if w.Key.Flavor != "" {
		if flavor = cfg.FlavorNamed(w.Key.Flavor); flavor == nil {
			return // removed by a reload since Wants read it
		}
	}
	// Said once when a wait starts, then at debug level each pass.
	wait := func(msg string, attrs ...any) {
		level := slog.LevelDebug
		if _, waited := h.parentsWaiting.LoadOrStore(w.Key, true); !waited {
			level = slog.LevelInfo
		}
		h.log.Log(ctx, level, msg, append([]any{"parent_key", w.Key.String(), logkey.Placement, w.Key.Placement}, attrs...)...)
	}
	if len(cfg.Placements) > 0 {
		// A cordoned or backing-off placement gets no new parent
		// (docs/instant-clones.md#placements); one there is kept.
		if ok, why := h.capacity.Book.Eligible(w.Key.Placement); !ok {
			wait("instant parent waits for its placement", logkey.Reason, why)
			return
		}
	}
	name := instantparent.Name(h.Name(), w.Key, strconv.FormatInt(h.now().UnixNano(), 36))
	adm := h.admission()
	// The footprint is reserved in the parent's own placement, which the
	// clone goes to (whereOf): a parent elsewhere would be another key's.
	d, err := adm.ReserveProvisioningAt(ctx, name, w.Key.Placement, w.Template, flavor, w.Model, w.Key.Flavor)
	if err != nil {
		h.warnUnlessShuttingDown(ctx, "instant parent not built: capacity unknown", logkey.VM, name, "parent_key", w.Key.String(), logkey.Err, err)
		return
	}
	if !d.Allowed {
		wait("instant parent waits for capacity", logkey.Reason, d.Reason, logkey.Detail, d.Detail)
		return
	}
	h.parentsWaiting.Delete(w.Key)
	defer adm.ReleaseProvisioning(name)
	annot := inventory.Annotation{
		HatcheryName: h.Name(), WorkerName: name, Created: h.now().UTC(), Flavor: w.Key.Flavor,
		Placement: w.Key.Placement, InstantParent: true, ParentTemplate: w.Version,
	}
	h.log.Info("instant parent building", logkey.VM, name, "parent_key", w.Key.String(), logkey.Model, w.Model, "template", w.Template.Name)
	// Booted as the model's workers are, through cloud-init's guestinfo
	// (a customization would race cloud-init in such a template), with
	// no worker: its keys are blanked once it is up.
	ref, err := h.cloneVMBoot(ctx, w.Template, name, &annot, flavor, &cloudinit.Boot{Script: parentScript})
	if err != nil {
		failure = "build failed: clone"
		return // cloneVM marked a half-made VM and logged why
	}
	fail := func(step string, err error) {
		failure = "build failed: " + step
		h.warnUnlessShuttingDown(ctx, "instant parent build failed", logkey.VM, name, logkey.Detail, step, logkey.Err, err)
		h.abandonVM(ctx, ref, name, annot.IPAddress)
	}
	if _, err := guest.WaitIP(ctx, h.vs, ref, annot.IPAddress, h.bootWait(&annot)); err != nil {
		fail("wait for ip", err)
		return
	}
	if err := h.blankParent(ctx, ref, name); err != nil {
		fail("blank record and guestinfo", err)
		return
	}
	h.inv.Invalidate()
	h.parents.Built(w.Key, name, h.now())
	h.log.Info("instant parent built", logkey.VM, name, "parent_key", w.Key.String(), logkey.IP, annot.IPAddress)
}

// hasInstantEntries tells whether a model entry of cfg is instant.
func hasInstantEntries(cfg *config.Config) bool {
	for range cfg.InstantEntries() {
		return true
	}
	return false
}

// parentVerdict is the awol cleanup's verdict on a VM whose record says
// instant_parent: a parent a model uses, or being built, is kept (never
// an orphan worker); one no model uses any more is destroyed; a VM
// carrying a parent's record under another name (a fork whose own record
// was never written) is destroyed once no clone of that name is in hand.
func (h *HatcheryVSphere) parentVerdict(vm inventory.VM) awolVerdict {
	a := vm.Annotation
	if a.WorkerName != vm.Name {
		if h.life.In(vm.Name, lifecycle.Cloning) {
			return awolKeep("being forked")
		}
		return awolRemove("carries the record of instant parent " + a.WorkerName + ": a fork left half-made")
	}
	key := instantparent.KeyOf(a.ParentTemplate, a.Placement, a.Flavor)
	if h.parents.Building()[key] {
		return awolKeep("instant parent being built")
	}
	anyVersion := func(modelref.Template) (string, string, bool) { return "", "", true }
	for _, w := range instantparent.Wants(h.conf(), anyVersion, h.parents.Demand(h.now())) {
		if w.Key == key {
			return awolKeep("instant parent in use")
		}
	}
	return awolRemove("instant parent no instant model uses")
}
