package collector

import (
	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/internal/placement"
)

// placementStates are placement.States as the placement_state label's
// values.
func placementStates() []string {
	out := make([]string, len(placement.States))
	for i, s := range placement.States {
		out[i] = string(s)
	}
	return out
}

// placementGauges turns the placements' statuses into their metrics; nil
// without a set (the hatchery has not built it) or without placements.
func placementGauges(set placement.Set) []metrics.Placement {
	if set == nil {
		return nil
	}
	sts := set.Statuses()
	if len(sts) == 0 {
		return nil
	}
	out := make([]metrics.Placement, 0, len(sts))
	for _, s := range sts {
		p := metrics.Placement{
			Name: s.Name, State: string(s.State),
			VMs: int64(s.VMs), VCPUs: s.CPUs, MemoryMB: s.MemoryMB,
			// placement.Unknown is negative: metrics records no headroom then.
			HeadroomVCPUs: s.HeadroomCPUs, HeadroomMemoryMB: s.HeadroomMemoryMB,
			TasksInFlight: int64(s.TasksInFlight),
			Clones:        metrics.PlacementClones{Clones: int64(s.Clones), Failures: int64(s.CloneFailures)},
		}
		for _, d := range s.Datastores {
			p.Datastores = append(p.Datastores, metrics.Datastore{Name: d.Name, FreeBytes: d.FreeBytes,
				CapacityBytes: d.CapacityBytes, FloorBytes: d.FloorBytes, Accessible: d.Accessible})
		}
		out = append(out, p)
	}
	return out
}
