package vsphere

import (
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
)

// newInstanceID draws the name of this process in the records of the
// workers it spawns: 12 random hex digits, no host name, no secret.
func newInstanceID() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b[:])
}

// othersGrace is how long the awol cleanup leaves a VM that another
// process spawned, once it finds it ready to delete, to that process: two
// of its passes (killAwolServersInterval each). The spawning process
// deletes it at its next pass; when it is gone (stopped, killed, or
// restarted: a new process draws a new name), this one deletes it after
// the grace, so nothing leaks. Two instances deleting the same finished VM
// at the same pass doubled the vCenter requests of every job, the second
// answered "not found".
func (h *HatcheryVSphere) othersGrace() time.Duration {
	return 2 * h.conf().KillAwolServersIntervalDuration()
}

// leaveToSpawner tells whether the awol cleanup, having decided to delete
// vm, leaves it for now to the process that spawned its worker (ok), and
// for how much longer. Only a worker VM whose record names another process
// and that was created while this process runs is left (docs/high-availability.md, "Finished VMs"); the grace starts at
// the first pass that found it ready to delete, and again after a pass
// that kept it (keepOthers).
func (h *HatcheryVSphere) leaveToSpawner(vm inventory.VM) (time.Duration, bool) {
	by := vm.Annotation.SpawnedBy
	if by == "" || by == h.instance || vm.Annotation.Created.Before(h.started) {
		// A VM created before this process started may be its
		// predecessor's (a restart draws a new name): no live spawner is
		// known, it is deleted at once, as a restart found it.
		return 0, false
	}
	now := h.now()
	h.othersMu.Lock()
	defer h.othersMu.Unlock()
	since, seen := h.othersFinished[vm.Ref.Value]
	if !seen {
		h.othersFinished[vm.Ref.Value] = now
		since = now
	}
	if left := h.othersGrace() - now.Sub(since); left > 0 {
		return left, true
	}
	return 0, false
}

// keepOthers forgets the grace of vm, which the awol cleanup keeps this
// pass: a VM found ready to delete, then not (a stale listing showed it
// powered off before its power-on, say), starts its grace again when it
// is found ready next, so that the grace always covers two passes in a
// row that found it ready.
func (h *HatcheryVSphere) keepOthers(vm inventory.VM) {
	h.othersMu.Lock()
	defer h.othersMu.Unlock()
	delete(h.othersFinished, vm.Ref.Value)
}

// forgetOthersFinished drops the grace of the VMs a listing no longer
// shows (deleted by their spawner, or by this process after the grace).
func (h *HatcheryVSphere) forgetOthersFinished(vms []inventory.VM) {
	listed := make(map[string]bool, len(vms))
	for _, v := range vms {
		listed[v.Ref.Value] = true
	}
	h.othersMu.Lock()
	defer h.othersMu.Unlock()
	for ref := range h.othersFinished {
		if !listed[ref] {
			delete(h.othersFinished, ref)
		}
	}
}
