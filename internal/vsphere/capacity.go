package vsphere

import (
	"context"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// STUB — owned by the capacity/flavor work (issue 5).

// capacityState tracks the footprint of spawns in flight (DESIGN §5.4).
type capacityState struct{}

func newCapacityState() *capacityState { return &capacityState{} }

// CanAllocateResources tells whether the next worker fits now (000 C.7). When
// it answers true it has reserved the worker's footprint under jobID until
// releaseCapacity(jobID) (or an expiry).
func (h *HatcheryVSphere) CanAllocateResources(ctx context.Context, model sdk.WorkerStarterWorkerModel, jobID string, requirements []sdk.Requirement) (bool, error) {
	return true, nil
}

// releaseCapacity drops the in-flight reservation of jobID; SpawnWorker calls
// it when the spawn ends (the VM is then visible to the inventory, or gone).
func (h *HatcheryVSphere) releaseCapacity(jobID string) {}
