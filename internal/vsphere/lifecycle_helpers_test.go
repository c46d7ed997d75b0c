package vsphere

import (
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
)

// putPhase brings the VM name into phase p in h's lifecycle table, as the
// loop owning that phase would (tests set up a VM some loop is working on).
// A VM already in p only gets the facts.
func putPhase(h *HatcheryVSphere, name string, p lifecycle.Phase, opts ...lifecycle.Option) {
	if h.life.Set(name, p, opts...) {
		return
	}
	if _, err := h.life.MoveAny(name, p, opts...); err != nil {
		panic(err)
	}
}

// namesIn returns the names in one of phases, sorted.
func namesIn(h *HatcheryVSphere, phases ...lifecycle.Phase) []string {
	var out []string
	for _, e := range h.life.List(phases...) {
		out = append(out, e.Name)
	}
	return out
}

// isMarked tells whether the VM name is marked for deletion.
func isMarked(h *HatcheryVSphere, name string) bool { return h.life.In(name, lifecycle.Marked) }

// markedNames lists the VMs marked for deletion, sorted.
func markedNames(h *HatcheryVSphere) []string { return namesIn(h, lifecycle.Marked) }
