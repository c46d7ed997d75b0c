package vsphere

import (
	"testing"

	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
)

// checkLifeBugs fails t, once it ends, when a move the code holds for
// certain (lifecycle.Table.Must) was refused during it: every test of the
// package is then a test of the lifecycle table's force.
func checkLifeBugs(t *testing.T, h *HatcheryVSphere) {
	t.Helper()
	t.Cleanup(func() {
		if bugs := h.life.Bugs(); len(bugs) > 0 {
			t.Errorf("lifecycle moves refused: %v", bugs)
		}
	})
}

// putPhase brings the VM name into phase p in h's lifecycle table, as the
// loop owning that phase would (tests set up a VM some loop is working on).
// A VM already in p only gets the facts.
func putPhase(h *HatcheryVSphere, name string, p lifecycle.Phase, opts ...lifecycle.Option) {
	if h.life.Set(name, p, opts...) {
		return
	}
	if p == lifecycle.Preparing && h.life.Phase(name) == lifecycle.Gone {
		// A VM is prepared once claimed (Pool.PrepareClaimed).
		if _, err := h.life.MoveAny(name, lifecycle.Claimed, opts...); err != nil {
			panic(err)
		}
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
