package vsphere

import (
	"context"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// STUB — owned by the capacity/flavor work (issue 5).

// Status returns the hatchery's /mon/status lines.
func (h *HatcheryVSphere) Status(ctx context.Context) []sdk.MonitoringStatusLine { return nil }
