package vsphere

import (
	"context"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/instantparent"
)

// Hooks for the external (vcsim) tests of instant clones, compiled into
// tests only.

// InstantParentsPass runs one pass of the instant-parents loop.
func (h *HatcheryVSphere) InstantParentsPass(ctx context.Context) { h.tendInstantParents(ctx) }

// InstantReadyParent is the ready parent of template in the default
// placement at the template's size: its VM name, false when none.
func (h *HatcheryVSphere) InstantReadyParent(template string) (string, bool) {
	p, ok := h.parents.Ready(instantparent.Key{Template: template, Placement: config.DefaultPlacementName})
	return p.Name, ok
}

// InstantReadyParentAt is InstantReadyParent in the placement named
// placementName.
func (h *HatcheryVSphere) InstantReadyParentAt(template, placementName string) (string, bool) {
	p, ok := h.parents.Ready(instantparent.Key{Template: template, Placement: placementName})
	return p.Name, ok
}
