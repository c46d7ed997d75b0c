package admission

import (
	"context"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/capacity"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/placement"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
)

// FiguresTTL is how long a placement's pool runtime and datastores'
// space, once read, stand for every decision: each queued job is a
// decision at every poll, and reading every pool and datastore per
// decision would multiply vCenter's load by the queue's length. What the
// figures miss meanwhile, the clones this hatchery sends, the decisions
// count themselves (the in-flight reservations of each placement); a
// datastore filling or a pool reserved by others is seen 5 s late at most.
const FiguresTTL = 5 * time.Second

// PlacementPort reads what a placement decision needs of vCenter: a
// placement's pool runtime and a datastore's space. vctypes.Port
// implements it.
type PlacementPort interface {
	// PoolRuntimeAt reads the runtime of the resource pool (or the
	// cluster's root pool) at path.
	PoolRuntimeAt(ctx context.Context, path string) (*vctypes.PoolRuntime, error)
	// DatastoreSpaceOf reads the space of the datastore named name.
	DatastoreSpaceOf(ctx context.Context, name string) (*vctypes.DatastoreSpace, error)
}

// figuresRead is a placement's figures as last read from vCenter.
type figuresRead struct {
	at   time.Time
	pool *vctypes.PoolRuntime
	ds   map[string]*vctypes.DatastoreSpace
}

// placed tells whether this configuration chooses placements: only with
// [[placements]] entries and a Book; without them the hatchery behaves as
// before placements existed (the default placement, the top-level keys).
func (a Admission) placed() bool {
	return len(a.Config.Placements) > 0 && a.State.Book != nil && a.Places != nil
}

// placementFigures returns each placement's figures read from vCenter
// (FiguresTTL) and counted from the snapshot vms: this hatchery's VMs
// there by their records' placement (config.PlacementNameOf: an empty one
// counts in config.DefaultPlacementName; an instant parent counts as any
// VM), their vCPUs and memory when powered on. The clones in flight are added under the ledger's lock (withInFlight).
func (a Admission) placementFigures(ctx context.Context, vms []inventory.VM) []placement.Figures {
	ps := a.Config.EffectivePlacements()
	figs := make([]placement.Figures, len(ps))
	index := map[string]int{}
	for i, p := range ps {
		index[p.Name] = i
		figs[i].Placement = p
		r := a.readFigures(ctx, p)
		figs[i].Pool = r.pool
		for _, d := range p.Datastores {
			figs[i].Datastores = append(figs[i].Datastores, placement.Datastore{Name: d, Space: r.ds[d]})
		}
	}
	for _, v := range vms {
		if v.Template || !v.OwnedBy(a.Hatchery) || v.Annotation == nil {
			continue
		}
		i, ok := index[config.PlacementNameOf(v.Annotation.Placement)]
		if !ok {
			continue
		}
		figs[i].VMs++
		if v.PoweredOn() {
			figs[i].CPUs += int64(v.NumCPU)
			figs[i].MemoryMB += int64(v.MemoryMB)
		}
	}
	return figs
}

// readFigures returns p's pool runtime and datastores' space, read at
// most once per FiguresTTL. A read that fails leaves the figure unknown
// (nil): the placement is then limited by what else it has, and its
// clones' faults back it off if it is really down.
func (a Admission) readFigures(ctx context.Context, p config.Placement) figuresRead {
	s := a.State
	now := a.Now()
	s.mu.Lock()
	r, ok := s.figures[p.Name]
	s.mu.Unlock()
	if ok && now.Sub(r.at) < FiguresTTL {
		return r
	}
	r = figuresRead{at: now, ds: map[string]*vctypes.DatastoreSpace{}}
	if rt, err := a.Places.PoolRuntimeAt(ctx, p.ResourcePool); err == nil {
		r.pool = rt
	} else if ctx.Err() == nil {
		a.Log.Debug("placement pool unreadable", logkey.Placement, p.Name, logkey.Err, err)
	}
	for _, d := range p.Datastores {
		if sp, err := a.Places.DatastoreSpaceOf(ctx, d); err == nil {
			r.ds[d] = sp
		} else if ctx.Err() == nil {
			a.Log.Debug("placement datastore unreadable", logkey.Placement, p.Name, "datastore", d, logkey.Err, err)
		}
	}
	s.mu.Lock()
	if s.figures == nil {
		s.figures = map[string]figuresRead{}
	}
	s.figures[p.Name] = r
	s.mu.Unlock()
	return r
}

// placeFunc is the ledger's Place for the clone of key (its
// reservation's) of footprint fp: it adds
// the clones in flight to each placement's figures, chooses
// (placement.Choose with the Book's eligibility), records the figures for
// the status and the probe, and refuses with ReasonPlacement when nothing
// fits. choice receives the decision for the log line.
//
// only, when set, is the one placement the clone may go to (an instant
// parent's, docs/instant-clones.md): the others are not taken.
func (a Admission) placeFunc(key, only string, fp placement.Footprint, base []placement.Figures, choice *placement.Choice) capacity.Place {
	book := a.State.Book
	eligible := book.Eligible
	if only != "" {
		eligible = func(name string) (bool, placement.Why) {
			if name != only {
				return false, placement.Why{Code: placement.WhyOther, Detail: "not the placement of " + key}
			}
			return book.Eligible(name)
		}
	}
	return func(res []capacity.Placed) (string, string, capacity.Decision) {
		figs := make([]placement.Figures, len(base))
		copy(figs, base)
		index := map[string]int{}
		for i, f := range figs {
			index[f.Placement.Name] = i
		}
		for _, r := range res {
			i, ok := index[r.Placement]
			if !ok {
				continue
			}
			if r.Held {
				figs[i].TasksInFlight++
			}
			if r.Counted {
				figs[i].VMs++
				figs[i].CPUs += r.Footprint.CPUs
				figs[i].MemoryMB += r.Footprint.MemoryMB
				figs[i].InFlightMemoryMB += r.Footprint.MemoryMB
			}
		}
		book.Observe(figs)
		*choice = placement.Choose(fp, figs, eligible)
		if !choice.OK {
			return "", "", capacity.Refuse(refusal.ReasonPlacement, "no placement fits: "+choice.Reason())
		}
		book.Take(choice.Placement, key)
		return choice.Placement, choice.Datastore, capacity.Decision{}
	}
}

// footprintOf is a clone's footprint for the placement decision: the
// capacity decision's, and the flavor's disk when it sets one.
func footprintOf(in capacity.Input, flavor *config.Flavor) placement.Footprint {
	fp := placement.Footprint{CPUs: in.Next.CPUs, MemoryMB: in.Next.MemoryMB}
	if flavor != nil && flavor.DiskSizeGB > 0 {
		fp.DiskBytes = flavor.DiskSizeGB << 30
	}
	return fp
}

// placementAttrs are the capacity decision line's placement keys.
func placementAttrs(c placement.Choice) []any {
	return []any{logkey.Placement, c.Placement, "datastore", c.Datastore, "placement_reason", c.Reason()}
}

// PlacementOf returns where the reservation AllocateResources handed over
// sends its clone: the placement and the datastore ("" : the default);
// ok is false without one (no [[placements]], or not one of
// AllocateResources').
func PlacementOf(res any) (name, datastore string, ok bool) {
	h, isHeld := res.(*heldReservation)
	if !isHeld || h == nil || h.r == nil || h.r.Placement == "" {
		return "", "", false
	}
	return h.r.Placement, h.r.Datastore, true
}

// ProvisionPlacement returns where the warm-pool clone name was sent by
// ReserveProvisioning; ok is false without a placement.
func (a Admission) ProvisionPlacement(name string) (placementName, datastore string, ok bool) {
	return a.State.ledger.PlacementOf(capacity.ProvisionKey(name))
}

// JobPlacement returns where the clone of jobID was sent by its
// admission; ok is false without a placement.
func (a Admission) JobPlacement(jobID string) (placementName, datastore string, ok bool) {
	return a.State.ledger.PlacementOf(jobID)
}
