package vsphere

import (
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// recordCreated records that the worker name's VM exists now (cloned or
// claimed and prepared): it counts as a started worker until the inventory
// shows it or the grace (at least a minute) passes.
func (h *HatcheryVSphere) recordCreated(name, job string) {
	deadline := h.now().Add(max(h.releaseGrace(), time.Minute))
	from := lifecycle.Gone
	if h.life.In(name, lifecycle.Preparing) {
		from = lifecycle.Preparing // a claimed VM, prepared by this spawn
	}
	h.life.Must(name, from, lifecycle.Running, lifecycle.WithJob(job), lifecycle.WithDeadline(deadline))
}

// recordUnrecordedStart remembers when the worker of VM name was launched,
// its start not written on the VM (the annotation write failed after the
// launch). Without it the awol cleanup would take such a VM, once its
// worker finished and powered it off, for a worker still starting and keep
// it for the registration TTL. Lost on restart, when the registration TTL
// applies again.
func (h *HatcheryVSphere) recordUnrecordedStart(name string, t time.Time) {
	if h.life.Set(name, lifecycle.Running, lifecycle.WithLaunched(t)) {
		return
	}
	// Not Running any more: the inventory showed it (the entry left).
	h.life.Must(name, lifecycle.Gone, lifecycle.Started, lifecycle.WithLaunched(t))
}

// unrecordedStart returns when the worker of VM name was launched, if this
// run launched it and could not record it on the VM.
func (h *HatcheryVSphere) unrecordedStart(name string) (time.Time, bool) {
	e, ok := h.life.Get(name)
	if !ok || e.Launched.IsZero() || (e.Phase != lifecycle.Running && e.Phase != lifecycle.Started) {
		return time.Time{}, false
	}
	return e.Launched, true
}

// missingWorkers returns the workers this run created that the inventory
// does not show (shown) yet. A Running entry leaves when the inventory
// shows it or after its deadline; one whose start is unrecorded becomes
// Started instead, kept until the VM is deleted.
func (h *HatcheryVSphere) missingWorkers(shown map[string]bool, now time.Time) []string {
	var out []string
	for _, e := range h.life.List(lifecycle.Running) {
		if !shown[e.Name] && !now.After(e.Deadline) {
			out = append(out, e.Name)
			continue
		}
		to := lifecycle.Gone
		if !e.Launched.IsZero() {
			to = lifecycle.Started
		}
		if err := h.life.Move(e.Name, lifecycle.Running, to, lifecycle.WithRef(e.Ref), lifecycle.WithLaunched(e.Launched)); err != nil {
			// The spawn failed since the listing (marked, held): that
			// phase stands.
			h.log.Debug("running entry kept", logkey.VM, e.Name, logkey.Err, err)
		}
	}
	return out
}

// lifeVM names an inventory VM to the lifecycle table: by its reference,
// whatever name a snapshot shows it under (docs/lifecycle.md).
func lifeVM(v inventory.VM) lifecycle.VM { return lifecycle.VM{Ref: v.Ref.Value, Name: v.Name} }
