package vsphere

import "github.com/cds-contrib/hatchery-vsphere/internal/placement"

// Placements is the hatchery's placement set: what /mon/status, the
// metrics and ctl read and change of the placements (internal/placement).
// nil until the hatchery builds it.
func (h *HatcheryVSphere) Placements() placement.Set { return h.placements }
