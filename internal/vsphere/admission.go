package vsphere

import (
	"context"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/admission"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// HeadroomUnlimited is the headroom of a flavor nothing limits: no static
// limit is configured and the resource pool could not be read.
const HeadroomUnlimited = admission.HeadroomUnlimited

// CapacityUsage is a snapshot of what this hatchery has allocated against
// its limits (admission.Usage).
type CapacityUsage = admission.Usage

// admission decides with the hatchery's capacity state, configuration,
// inventory and logger as they are now (internal/admission).
func (h *HatcheryVSphere) admission() admission.Admission {
	cfg := h.conf() // one snapshot for the decision: its limits and its flavors
	a := admission.Admission{
		State: h.capacity, Hatchery: h.Name(), Config: cfg, Inventory: h.inv, Port: h.vs,
		Resolve: cfg.ResolveFlavor, Log: h.log, Now: h.now,
	}
	if len(cfg.Placements) > 0 {
		a.Places = h.vs
	}
	return a
}

// CanAllocateResources tells whether the next worker fits now, and
// reserves its footprint when it does (admission.Admission).
func (h *HatcheryVSphere) CanAllocateResources(ctx context.Context, model sdk.WorkerStarterWorkerModel, jobID string, requirements []sdk.Requirement) (bool, error) {
	return h.admission().CanAllocateResources(ctx, model, jobID, requirements)
}

// AllocateResources implements hatchery.ResourceAllocator
// (admission.Admission.AllocateResources).
func (h *HatcheryVSphere) AllocateResources(ctx context.Context, model sdk.WorkerStarterWorkerModel, jobID string, requirements []sdk.Requirement) (spawn.Reservation, error) {
	return h.admission().AllocateResources(ctx, model, jobID, requirements)
}

// ReservedFootprint is what the spawns in flight hold reserved now: their
// number, vCPUs and memory (MB).
func (h *HatcheryVSphere) ReservedFootprint() (n int, cpus, memoryMB int64) {
	return h.admission().ReservedFootprint()
}

// CapacityUsage reads what this hatchery has allocated now.
func (h *HatcheryVSphere) CapacityUsage(ctx context.Context) (CapacityUsage, error) {
	return h.admission().Usage(ctx)
}

// FlavorHeadroom returns, for every configured flavor, how many more
// workers of it would be let through now (admission.Admission).
func (h *HatcheryVSphere) FlavorHeadroom(ctx context.Context) (map[string]int, error) {
	return h.admission().FlavorHeadroom(ctx)
}

// releaseCapacity ends the in-flight reservation of jobID.
func (h *HatcheryVSphere) releaseCapacity(jobID string) { h.admission().Release(jobID) }

// releaseGrace is how long a released reservation is still counted
// (admission.Admission.ReleaseGrace).
func (h *HatcheryVSphere) releaseGrace() time.Duration { return h.admission().ReleaseGrace() }
