package metrics

import (
	"go.opencensus.io/stats"
	"go.opencensus.io/tag"
)

// Placement is one placement as a collection pass read it
// (placement.Status in metric terms; docs/metrics.md, "Placement gauges").
type Placement struct {
	Name string
	// State is the placement's current state, one of Pass.PlacementStates.
	State string
	// VMs, VCPUs and MemoryMB are what this hatchery's VMs use there.
	VMs, VCPUs, MemoryMB int64
	// HeadroomVCPUs and HeadroomMemoryMB are what a clone may still take
	// there; negative: unknown (nothing limits it), not recorded.
	HeadroomVCPUs, HeadroomMemoryMB int64
	// TasksInFlight are its clones in flight.
	TasksInFlight int64
	// Clones are its clone totals since the hatchery started; Collect adds
	// what is new since the previous pass to placement_clones and
	// placement_clone_failures.
	Clones PlacementClones
	// Datastores are its datastores as last read.
	Datastores []Datastore
}

// PlacementClones are a placement's clone totals: clones sent, and those
// that failed.
type PlacementClones struct {
	Clones, Failures int64
}

// Datastore is one datastore of a placement, as last read.
type Datastore struct {
	Name                                 string
	FreeBytes, CapacityBytes, FloorBytes int64
	Accessible                           bool
}

// recordPlacements records the placement gauges of one pass and the new
// clones since the previous one. Caller holds cycleMu.
func (m *Metrics) recordPlacements(states []string, ps []Placement, rec func([]tag.Mutator, ...stats.Measurement)) {
	deltas := m.placementDeltas(ps)
	for i, p := range ps {
		pl := tag.Upsert(keyPlacement, tagValue(p.Name))
		ms := []stats.Measurement{mPlacementVMCount.M(p.VMs), mPlacementVCPUs.M(p.VCPUs), mPlacementMemoryMB.M(p.MemoryMB),
			mPlacementTasksInFlight.M(p.TasksInFlight)}
		if p.HeadroomVCPUs >= 0 {
			ms = append(ms, mPlacementHeadroomVCPUs.M(p.HeadroomVCPUs))
		}
		if p.HeadroomMemoryMB >= 0 {
			ms = append(ms, mPlacementHeadroomMemoryMB.M(p.HeadroomMemoryMB))
		}
		rec([]tag.Mutator{pl}, ms...)
		for _, st := range states {
			var v int64
			if st == p.State {
				v = 1
			}
			rec([]tag.Mutator{pl, tag.Upsert(keyState, tagValue(st))}, mPlacementState.M(v))
		}
		// A delta of 0 is recorded too: the counters of a placement exist
		// at 0 from the first pass that lists it.
		rec([]tag.Mutator{pl}, mPlacementClones.M(deltas[i].Clones), mPlacementCloneFailures.M(deltas[i].Failures))
		for _, d := range p.Datastores {
			accessible := int64(0)
			if d.Accessible {
				accessible = 1
			}
			rec([]tag.Mutator{pl, tag.Upsert(keyDatastore, tagValue(d.Name))},
				mDatastoreFreeBytes.M(d.FreeBytes), mDatastoreCapacityBytes.M(d.CapacityBytes),
				mDatastoreFloorBytes.M(d.FloorBytes), mDatastoreAccessible.M(accessible))
		}
	}
}

// placementDeltas turns the placements' clone totals into what is new
// since the previous pass, in the order of ps. A placement seen for the
// first time brings all of its totals; a total that went down restarted:
// all of its value is new. A placement no longer listed (a reload removed
// it) keeps its last totals: listed again, only what is new counts.
func (m *Metrics) placementDeltas(ps []Placement) []PlacementClones {
	m.stateMu.Lock()
	defer m.stateMu.Unlock()
	out := make([]PlacementClones, len(ps))
	for i, p := range ps {
		prev := m.clonesPrev[p.Name]
		d := PlacementClones{Clones: p.Clones.Clones - prev.Clones, Failures: p.Clones.Failures - prev.Failures}
		if d.Clones < 0 || d.Failures < 0 {
			d = p.Clones
		}
		out[i] = d
		m.clonesPrev[p.Name] = p.Clones
	}
	return out
}
