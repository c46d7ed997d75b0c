package vsphere

import (
	"context"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// STUB — owned by the spawn-path work (issue 3).

// CanSpawn tells whether the hatchery can serve the job (001 §6.5).
func (h *HatcheryVSphere) CanSpawn(ctx context.Context, model sdk.WorkerStarterWorkerModel, jobID string, requirements []sdk.Requirement) bool {
	return false
}
