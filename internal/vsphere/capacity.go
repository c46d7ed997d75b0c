package vsphere

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/vmware/govmomi/vim25/types"
)

// reservationTTL bounds how long the footprint of a spawn in flight is
// counted when releaseCapacity never comes (the framework decided not to
// spawn after all, or a spawn goroutine was lost). It is longer than a
// clone plus the readiness waits of a spawn, so a slow spawn keeps its
// reservation until its VM is powered on and visible.
const reservationTTL = 10 * time.Minute

// reservation is the footprint CanAllocateResources reserved for a job
// until the job's VM is visible powered on in the inventory, or released.
type reservation struct {
	jobID   string
	model   string
	flavor  string
	fp      footprint
	created time.Time
	// released is 0 while the spawn is in flight, else the generation of
	// its release; releasedAt is when. seen is the generation at which a
	// decision's snapshot first showed the job's VM powered on (0 never).
	released   uint64
	releasedAt time.Time
	seen       uint64
}

// capacityState tracks the footprint of spawns in flight (docs/design.md#allocated) and
// the resource pool's health. Its mutex guards in-memory state only and is
// never held across a vCenter call: decisions read the inventory and the
// pool first, then lock, decide and reserve.
//
// A spawn is counted through its reservation until a decision's inventory
// snapshot shows its VM powered on, then through the VM. A released
// reservation (a "tombstone") can still be needed, because a snapshot may
// not show the VM the spawn just powered on:
//   - a decision that began (took the generation) before the release may
//     have read the inventory before the VM was there: it counts the
//     tombstone. Every release bumps the generation.
//   - the shared inventory shows a write only after its next refresh: a
//     tombstone is also counted for a grace period after its release
//     (releaseGrace), unless the snapshot shows the VM.
//
// A tombstone is forgotten once no running decision began before its
// release and either its grace is over or a snapshot showed its VM (later
// snapshots show it too, or show it stopped). So a spawn is counted once,
// never zero times (no overshoot); twice at most while one decision runs;
// a failed spawn holds its footprint for the grace period at most.
type capacityState struct {
	mu     sync.Mutex
	gen    uint64
	active map[uint64]int // generation at begin → decisions running
	res    []*reservation // in creation order

	pool       *types.ManagedObjectReference // looked up once, dropped when a read fails
	poolHealth poolHealth
	lastPool   poolSnapshot // the last read, for status lines (no round trip)
}

func newCapacityState() *capacityState {
	return &capacityState{active: map[uint64]int{}}
}

// begin registers a decision about to read the inventory.
func (s *capacityState) begin() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.gen
	s.active[g]++
	return g
}

// end unregisters a decision started at generation g.
func (s *capacityState) end(g uint64, now time.Time, grace time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active[g]--; s.active[g] <= 0 {
		delete(s.active, g)
	}
	s.gcLocked(now, grace)
}

// gcLocked forgets released reservations no running decision needs.
func (s *capacityState) gcLocked(now time.Time, grace time.Duration) {
	oldest, found := uint64(0), false
	for g := range s.active {
		if !found || g < oldest {
			oldest, found = g, true
		}
	}
	kept := s.res[:0]
	for _, r := range s.res {
		if r.released != 0 && (!found || r.released <= oldest) &&
			(!now.Before(r.releasedAt.Add(grace)) || (r.seen != 0 && (!found || r.seen <= oldest))) {
			continue
		}
		kept = append(kept, r)
	}
	clear(s.res[len(kept):])
	s.res = kept
}

// expireLocked drops the in-flight reservations older than reservationTTL
// and returns them for logging.
func (s *capacityState) expireLocked(now time.Time) []reservation {
	var expired []reservation
	kept := s.res[:0]
	for _, r := range s.res {
		if r.released == 0 && !now.Before(r.created.Add(reservationTTL)) {
			expired = append(expired, *r)
			continue
		}
		kept = append(kept, r)
	}
	clear(s.res[len(kept):])
	s.res = kept
	return expired
}

// inFlightLocked sums the reservations a decision begun at generation g
// must count at now: the in-flight ones and the tombstones it may not see
// (released after g, or within grace of their release), in both cases
// unless its snapshot shows the job's VM powered on (visible); excluding
// jobID's own in-flight reservation (replaced if the decision allows).
func (s *capacityState) inFlightLocked(g uint64, now time.Time, grace time.Duration, jobID string, visible map[string]bool) (footprint, int) {
	var sum footprint
	n := 0
	for _, r := range s.res {
		if r.jobID != "" && visible[r.jobID] {
			if r.seen == 0 {
				s.gen++
				r.seen = s.gen
			}
			continue
		}
		if r.released != 0 && r.released <= g && !now.Before(r.releasedAt.Add(grace)) {
			continue
		}
		if r.released == 0 && jobID != "" && r.jobID == jobID {
			continue
		}
		sum = sum.add(r.fp)
		n++
	}
	return sum, n
}

// reserveLocked records r, replacing an in-flight reservation of the same
// job, and returns the record.
func (s *capacityState) reserveLocked(r reservation) *reservation {
	if r.jobID != "" {
		for i, o := range s.res {
			if o.released == 0 && o.jobID == r.jobID {
				s.res[i] = &r
				return &r
			}
		}
	}
	s.res = append(s.res, &r)
	return &r
}

// dropReservation forgets r at once if it is still in flight: a
// reservation given back before any spawn used it. No VM was cloned under
// it, so no decision can miss one and no released-reservation grace
// applies. It tells whether r was still held.
func (s *capacityState) dropReservation(r *reservation) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, o := range s.res {
		if o == r && o.released == 0 {
			s.res = append(s.res[:i], s.res[i+1:]...)
			return true
		}
	}
	return false
}

// drop forgets the in-flight reservation of jobID at once, without the
// released reservation's grace: for a VM known to hold nothing any more
// (a provisioned VM powered off). A decision whose snapshot still shows it
// powered on counts it through the VM.
func (s *capacityState) drop(jobID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range s.res {
		if r.released == 0 && r.jobID == jobID {
			s.res = append(s.res[:i], s.res[i+1:]...)
			return true
		}
	}
	return false
}

// release marks the oldest in-flight reservation of jobID released.
func (s *capacityState) release(jobID string, now time.Time, grace time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.res {
		if r.released == 0 && r.jobID == jobID {
			s.gen++
			r.released, r.releasedAt = s.gen, now
			s.gcLocked(now, grace)
			return true
		}
	}
	return false
}

// releaseGrace is how long a released reservation is still counted when
// the inventory does not show its VM: none with the listing inventory
// (every read is fresh; the generations cover a read racing the release),
// else four refresh intervals — the age past which the shared inventory
// refuses its snapshot as stale — so that a lagging snapshot never hides
// a powered-on VM. A failed spawn holds its footprint that long at most.
func (h *HatcheryVSphere) releaseGrace() time.Duration {
	if h.cfg.InventoryMode == config.InventoryListing {
		return 0
	}
	every := h.cfg.InventoryRefreshIntervalDuration()
	if every <= 0 {
		every = 30 * time.Second
	}
	return 4 * every
}

// inFlightCountLocked returns the number of reservations not yet
// released and their sum.
func (s *capacityState) inFlightCountLocked() (int, footprint) {
	n, sum := 0, footprint{}
	for _, r := range s.res {
		if r.released == 0 {
			n++
			sum = sum.add(r.fp)
		}
	}
	return n, sum
}

// CanAllocateResources tells whether the next worker fits now; see
// allocate. When it answers true it has
// reserved the worker's footprint under jobID until releaseCapacity(jobID),
// or reservationTTL. The framework calls AllocateResources instead, which
// hands the reservation over so that it is released when no spawn follows.
func (h *HatcheryVSphere) CanAllocateResources(ctx context.Context, model sdk.WorkerStarterWorkerModel, jobID string, requirements []sdk.Requirement) (bool, error) {
	d, _, err := h.allocate(ctx, model, jobID, requirements)
	if err != nil {
		return false, err
	}
	return d.Allowed, nil
}

// AllocateResources implements hatchery.ResourceAllocator: the decision of
// CanAllocateResources, returning the reservation it made (nil when none:
// unknown flavor), or a *hatchery.Refusal naming the missing resource.
// SpawnWorker for jobID ends a reservation handed to it; the framework
// releases it on every other path (docs/flavors-and-capacity.md,
// "Reservation lifecycle").
func (h *HatcheryVSphere) AllocateResources(ctx context.Context, model sdk.WorkerStarterWorkerModel, jobID string, requirements []sdk.Requirement) (hatchery.Reservation, error) {
	d, r, err := h.allocate(ctx, model, jobID, requirements)
	switch {
	case err != nil:
		return nil, err
	case !d.Allowed:
		return nil, refusalOf(d)
	case r == nil:
		return nil, nil
	}
	return &heldReservation{s: h.capacity, r: r}, nil
}

// heldReservation is a footprint AllocateResources reserved, as the
// framework holds it.
type heldReservation struct {
	s *capacityState
	r *reservation
}

// Release implements hatchery.Reservation: the footprint is forgotten at
// once (no spawn used it). Once SpawnWorker released it, or it expired,
// it does nothing.
func (r *heldReservation) Release(hatchery.Reason) { r.s.dropReservation(r.r) }

// ReservedFootprint is what the spawns in flight hold reserved now: the
// number of reservations not yet released, their vCPUs and their memory
// (MB). A spawn that ended is not included, even while decisions still
// count its VM through its released reservation.
func (h *HatcheryVSphere) ReservedFootprint() (n int, cpus, memoryMB int64) {
	h.capacity.mu.Lock()
	defer h.capacity.mu.Unlock()
	n, fp := h.capacity.inFlightCountLocked()
	return n, fp.CPUs, fp.MemoryMB
}

// refusalOf is the typed refusal of a refusing decision.
func refusalOf(d capacityDecision) *hatchery.Refusal {
	code := hatchery.ReasonCapacity
	if res, ok := refusedResource(d); ok {
		switch res {
		case metrics.CapacityCPU:
			code = hatchery.ReasonCapacityCPU
		case metrics.CapacityMemory:
			code = hatchery.ReasonCapacityMemory
		}
	}
	return &hatchery.Refusal{Reason: code, Detail: d.Reason}
}

// allocate is the capacity decision for the next worker of model
// (docs/flavors-and-capacity.md). The next worker's footprint is its flavor's,
// else its template's hardware; an unknown footprint is allowed while the
// static limits still have room. The resource pool (when readable),
// maxCpus, maxMemoryMB and the starvation reserve of
// countSmallerFlavorToKeep are checked against this hatchery's powered-on
// VMs plus the spawns in flight. When allowed with a known footprint it
// has reserved it under jobID and returns the reservation.
//
// An unknown flavor is allowed, without a reservation: SpawnWorker then
// fails with the *UnknownFlavorError, which the framework reports to the
// job (an error here would only keep the job queued silently).
// Only an unreadable inventory is an error.
func (h *HatcheryVSphere) allocate(ctx context.Context, model sdk.WorkerStarterWorkerModel, jobID string, requirements []sdk.Requirement) (capacityDecision, *reservation, error) {
	flavor, err := h.resolveFlavor(model, requirements)
	if err != nil {
		h.log.Warn("capacity decision", logkey.Model, model.GetName(), logkey.Flavor, model.GetFlavor(requirements, h.cfg.DefaultFlavor),
			logkey.Job, jobID, "allowed", true, logkey.Reason, reasonUnknownFlavor, logkey.Err, err)
		return capacityDecision{Allowed: true, Reason: reasonUnknownFlavor}, nil, nil
	}
	flavorName := ""
	if flavor != nil {
		flavorName = flavor.Name
	}

	s := h.capacity
	grace := h.releaseGrace()
	gen := s.begin()
	defer func() { s.end(gen, h.now(), grace) }()

	// vCenter reads first, without the lock.
	vms, err := h.inv.VMs(ctx)
	if err != nil {
		h.log.Warn("capacity decision", logkey.Model, model.GetName(), logkey.Flavor, flavorName, logkey.Job, jobID,
			"allowed", false, logkey.Reason, reasonInventoryUnusable, logkey.Err, err)
		return capacityDecision{Reason: reasonInventoryUnusable}, nil, fmt.Errorf("can allocate resources for job %q: list vms: %w", jobID, err)
	}
	usage := countAllocatedResources(vms, h.Name())
	in := capacityInput{MaxCPUs: int64(h.cfg.MaxCPUs), MaxMemoryMB: h.cfg.MaxMemoryMB}
	var footprintErr error
	if flavor != nil {
		in.Next, in.Known = flavorFootprint(*flavor), true
	} else if fp, ferr := templateFootprint(vms, model); ferr == nil {
		in.Next, in.Known = fp, true
	} else {
		footprintErr = ferr
	}
	var smaller *config.Flavor
	in.Reserve, smaller = starvationReserve(h.cfg.Flavors, flavor, h.cfg.CountSmallerFlavorToKeep)
	in.Pool = h.readPool(ctx)

	// Then decide and reserve atomically.
	in, d, n, held := h.decideAndReserve(gen, grace, usage, in, reservation{jobID: jobID, model: model.GetName(), flavor: flavorName})
	attrs := []any{
		"model", model.GetName(), "flavor", flavorName, "job", jobID, "allowed", d.Allowed, "reason", d.Reason,
		"used_cpus", in.Used.CPUs, "next_cpus", in.Next.CPUs, "reserve_cpus", in.Reserve.CPUs, "max_cpus", in.MaxCPUs,
		"used_memory_mb", in.Used.MemoryMB, "next_memory_mb", in.Next.MemoryMB, "reserve_memory_mb", in.Reserve.MemoryMB, "max_memory_mb", in.MaxMemoryMB,
		"inflight", n, "inflight_cpus", in.InFlight.CPUs, "inflight_memory_mb", in.InFlight.MemoryMB,
		"pool_readable", in.Pool.Readable,
	}
	if in.Pool.Readable {
		attrs = append(attrs, "pool_unreserved_memory_mb", in.Pool.UnreservedMemoryBytes>>20, "pool_unreserved_cpu_mhz", in.Pool.UnreservedCPUMHz)
	}
	if smaller != nil {
		attrs = append(attrs, "reserve_flavor", smaller.Name, "reserve_count", h.cfg.CountSmallerFlavorToKeep)
	}
	if footprintErr != nil {
		attrs = append(attrs, "footprint_err", footprintErr.Error())
	}
	h.log.Log(ctx, slog.LevelInfo, "capacity decision", attrs...)
	if r, ok := refusedResource(d); ok {
		h.metrics.CapacityRefused(r)
	}
	return d, held, nil
}

// refusedResource tells which resource a refusing decision found
// exhausted; false when d allowed the worker.
func refusedResource(d capacityDecision) (metrics.CapacityResource, bool) {
	switch {
	case d.Allowed:
		return "", false
	case d.Reason == reasonPoolCPU || d.Reason == reasonCPULimit || d.Reason == reasonCPUStarvation:
		return metrics.CapacityCPU, true
	case d.Reason == reasonPoolMemory || d.Reason == reasonMemoryLimit || d.Reason == reasonMemoryStarvation:
		return metrics.CapacityMemory, true
	}
	return "", false
}

// decideAndReserve is the atomic part of a capacity decision begun at
// generation gen (capacityState.begin, before the inventory was read): under
// the state's lock it drops expired reservations, adds the spawns in flight
// to usage, decides on in and, when allowed with a known footprint,
// reserves in.Next under r.jobID (r's model and flavor are for logs). It
// returns in completed with Used and InFlight, the decision, how many
// reservations were counted in flight and the reservation made (nil when
// none).
func (h *HatcheryVSphere) decideAndReserve(gen uint64, grace time.Duration, usage vmUsage, in capacityInput, r reservation) (capacityInput, capacityDecision, int, *reservation) {
	s := h.capacity
	now := h.now()
	s.mu.Lock()
	expired := s.expireLocked(now)
	inflight, n := s.inFlightLocked(gen, now, grace, r.jobID, usage.jobs)
	in.Used = usage.footprint.add(inflight)
	in.InFlight = inflight
	d := decideCapacity(in)
	var held *reservation
	if d.Allowed && in.Known {
		r.fp, r.created = in.Next, now
		held = s.reserveLocked(r)
	}
	s.mu.Unlock()
	h.logExpired(expired, now)
	return in, d, n, held
}

// logExpired logs the in-flight reservations expireLocked dropped.
func (h *HatcheryVSphere) logExpired(expired []reservation, now time.Time) {
	for _, r := range expired {
		h.log.Warn("in-flight capacity reservation expired", logkey.Job, r.jobID, logkey.Model, r.model, logkey.Flavor, r.flavor,
			"cpus", r.fp.CPUs, "memory_mb", r.fp.MemoryMB, "age", now.Sub(r.created).String())
	}
}

// releaseCapacity drops the in-flight reservation of jobID; SpawnWorker calls
// it (deferred) when the spawn ends, after the inventory was invalidated for
// the VM it powered on (so the VM is then visible), or the spawn failed.
// Releasing a job without a reservation does nothing.
func (h *HatcheryVSphere) releaseCapacity(jobID string) {
	if h.capacity.release(jobID, h.now(), h.releaseGrace()) {
		h.log.Debug("in-flight capacity reservation released", logkey.Job, jobID)
	}
}
