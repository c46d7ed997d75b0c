package vsphere

import (
	"context"
	"sort"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/admission"
	"github.com/cds-contrib/hatchery-vsphere/internal/guest"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// heldVM is one VM of a failed spawn held for inspection.
type heldVM struct {
	name   string
	until  time.Time
	reason string
}

// holdVM is the failure path of a spawn whose VM exists, when the debug
// hold is on (keepFailedWorkers > 0, docs/design.md#debug-hold): the VM
// stays powered on and its annotation says until when it is held and why;
// the oldest holds beyond keepFailedWorkers are released (marked for
// deletion). It returns false, having done nothing to the VM, when the
// hold is off or the hold cannot be written on the VM: the caller then
// abandons the VM as usual. annot must be this hatchery's record of the
// VM (the spawn wrote it); reason is the failed step, never an error text.
// The hold's keys are the job's plan's (plan).
func (h *HatcheryVSphere) holdVM(ctx context.Context, plan admission.Plan, vm vctypes.Ref, name string, annot *inventory.Annotation, reason string) bool {
	if plan.KeepFailedWorkers <= 0 || annot == nil || annot.HatcheryName != h.Name() {
		return false
	}
	until := h.now().UTC().Add(plan.KeepFailedFor)
	held := *annot
	held.HeldUntil, held.HeldReason = &until, reason
	// The write runs on a context detached from a cancelled spawn, bounded
	// like the other failure-path requests (guest.Readiness.Cleanup).
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), guest.Readiness.Cleanup)
	defer cancel()
	if err := h.writeAnnotation(cctx, vm, &held); err != nil {
		h.log.Warn("debug hold not written, vm deleted instead", logkey.VM, name, logkey.Err, err)
		return false
	}
	*annot = held
	if err := h.life.Move(name, lifecycle.Running, lifecycle.Held, lifecycle.WithRef(vm.Value), lifecycle.WithDeadline(until)); err != nil {
		// The annotation holds the VM whatever the table says: the
		// cleanup reads the hold from it.
		h.log.Debug("debug hold not in the lifecycle table", logkey.VM, name, logkey.Err, err)
	}
	// The VM keeps its address in its annotation while it exists: the
	// reservation made for the spawn is no longer needed.
	if annot.IPAddress != "" {
		h.ips.Release(annot.IPAddress, name)
	}
	h.log.Info("vm held for inspection", logkey.VM, name, logkey.Job, annot.JobID, logkey.Detail, reason+"; held until "+until.Format(time.RFC3339))
	h.inv.Invalidate()
	h.evictHolds(ctx, name)
	return true
}

// evictHolds releases the oldest holds beyond keepFailedWorkers (marks
// their VMs for deletion; the next cleanup pass destroys them). keep is
// the hold just made, never released here. It reads the inventory and the
// lifecycle table, and records the held_vm_count gauge.
func (h *HatcheryVSphere) evictHolds(ctx context.Context, keep string) {
	vms, err := h.inv.VMs(ctx)
	if err != nil {
		h.log.Warn("debug holds not counted: cannot list vms", logkey.Err, err)
		return
	}
	held := h.heldVMs(vms)
	for keepN := h.conf().KeepFailedWorkers; len(held) > keepN; {
		i := 0
		if held[0].name == keep && len(held) > 1 {
			i = 1
		}
		v := held[i]
		held = append(held[:i], held[i+1:]...)
		if h.markToDelete(v.name) {
			h.log.Info("debug hold released", logkey.VM, v.name, logkey.Detail, "evicted: a newer hold exceeds keepFailedWorkers")
		}
	}
	h.metrics.HeldVMs(len(held))
}

// heldVMs lists the VMs held now, oldest hold first: this hatchery's VMs
// whose annotation carries a hold, not marked, being deleted or destroyed,
// plus the held entries of the lifecycle table a lagging snapshot does not
// show yet. An expired hold still counts until the cleanup deletes it.
func (h *HatcheryVSphere) heldVMs(vms []inventory.VM) []heldVM {
	var out []heldVM
	shown := map[string]bool{}
	for _, v := range vms {
		if v.Template || !v.OwnedBy(h.Name()) || !v.Annotation.Held() {
			continue
		}
		shown[v.Name] = true
		if h.life.InVM(lifeVM(v), lifecycle.Removed()...) {
			continue
		}
		out = append(out, heldVM{name: v.Name, until: *v.Annotation.HeldUntil, reason: v.Annotation.HeldReason})
	}
	for _, e := range h.life.List(lifecycle.Held) {
		if !shown[e.Name] {
			out = append(out, heldVM{name: e.Name, until: e.Deadline, reason: "spawn failed"})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].until.Equal(out[j].until) {
			return out[i].until.Before(out[j].until)
		}
		return out[i].name < out[j].name
	})
	return out
}

// holdVerdict is the cleanup's decision on a held VM: kept until its
// hold expires, then deleted. ok is false for a VM not held.
func (h *HatcheryVSphere) holdVerdict(vm inventory.VM) (awolVerdict, bool) {
	until, reason := time.Time{}, ""
	switch {
	case vm.Annotation.Held():
		until, reason = *vm.Annotation.HeldUntil, vm.Annotation.HeldReason
	default:
		e, ok := h.life.GetVM(lifeVM(vm))
		if !ok || e.Phase != lifecycle.Held {
			return awolVerdict{}, false
		}
		until = e.Deadline
	}
	if h.now().Before(until) {
		return awolKeep("held for inspection until " + until.UTC().Format(time.RFC3339) + " (" + reason + ")"), true
	}
	return awolRemove("debug hold expired at " + until.UTC().Format(time.RFC3339)), true
}

// heldListTimeout bounds the inventory read of /mon/workers: a supervisor
// polls it and must get an answer; a listing slower than this (listing
// inventory mode, vCenter slow) shows the holds of this run's table only.
const heldListTimeout = 10 * time.Second

// HeldWorkers lists the VMs held for inspection, for /mon/workers. With
// the hold off and no hold made by this run it reads nothing (holds left
// by an earlier configuration still expire through the cleanup); else it
// reads the inventory (the last snapshot when it is shared or watched).
func (h *HatcheryVSphere) HeldWorkers(ctx context.Context) []hatchery.HeldWorker {
	if h.conf().KeepFailedWorkers <= 0 && len(h.life.List(lifecycle.Held)) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, heldListTimeout)
	defer cancel()
	vms, err := h.inv.VMs(ctx)
	if err != nil {
		vms = nil // the table's holds only
	}
	return heldWorkers(h.heldVMs(vms))
}

func heldWorkers(held []heldVM) []hatchery.HeldWorker {
	out := make([]hatchery.HeldWorker, len(held))
	for i, v := range held {
		out[i] = hatchery.HeldWorker{Name: v.name, Reason: v.reason, Until: v.until.UTC()}
	}
	return out
}

// tendHolds is the cleanup pass's part of the debug hold: a held entry
// of the table whose VM no listing shows once its hold expired is dropped
// (the VM was deleted by someone else), and the held_vm_count gauge is
// recorded from the snapshot, so it is right after a restart too.
func (h *HatcheryVSphere) tendHolds(vms []inventory.VM) {
	shown := make(map[string]bool, len(vms))
	for _, v := range vms {
		shown[v.Name] = true
	}
	now := h.now()
	for _, e := range h.life.List(lifecycle.Held) {
		if !shown[e.Name] && !now.Before(e.Deadline) {
			if err := h.life.Drop(e.Name, lifecycle.Held, lifecycle.WithRef(e.Ref)); err != nil {
				// Raced by a deletion since the listing: that phase stands.
				h.log.Debug("held entry kept", logkey.VM, e.Name, logkey.Err, err)
			}
		}
	}
	h.metrics.HeldVMs(len(h.heldVMs(vms)))
}

// HatcheryVSphere lists its held VMs on /mon/workers.
var _ hatchery.HeldLister = (*HatcheryVSphere)(nil)
