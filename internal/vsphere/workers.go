package vsphere

import (
	"context"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// STUB — owned by the spawn-path work (issue 3).

// WorkersStarted returns the names of our VMs that are workers (DESIGN §5.5).
func (h *HatcheryVSphere) WorkersStarted(ctx context.Context) ([]string, error) { return nil, nil }

// NeedRegistration tells whether a V1 model's template must be (re)built (001 §6.7).
func (h *HatcheryVSphere) NeedRegistration(ctx context.Context, model *sdk.Model) bool {
	return false
}
