package vsphere

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/capacity"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
	"github.com/vmware/govmomi/vim25/types"
)

// This file is the hatchery's glue to internal/capacity: it reads the
// inventory and the resource pool (capacity_pool.go), turns them into the
// package's inputs, calls it, logs one line per decision and meters the
// refusals. The decisions and the reservations of spawns in flight are
// internal/capacity's.

// HeadroomUnlimited is the headroom of a flavor nothing limits: no static
// limit is configured and the resource pool could not be read.
const HeadroomUnlimited = capacity.HeadroomUnlimited

// capacityState is the hatchery's capacity state: the ledger of spawns in
// flight and the resource pool's handle and health. mu guards the pool
// fields only (the ledger has its own lock) and is never held across a
// vCenter call.
type capacityState struct {
	ledger *capacity.Ledger

	mu         sync.Mutex
	pool       *types.ManagedObjectReference // looked up once, dropped when a read fails
	poolHealth poolHealth
	lastPool   capacity.Pool // the last read, for status lines (no round trip)
}

func newCapacityState() *capacityState {
	return &capacityState{ledger: capacity.NewLedger()}
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

// beginCapacity registers a decision (or a report) about to read the
// inventory: its generation, the release grace it uses, and the func that
// ends it once decided.
func (h *HatcheryVSphere) beginCapacity() (capacity.Generation, time.Duration, func()) {
	l, grace := h.capacity.ledger, h.releaseGrace()
	gen := l.Begin()
	return gen, grace, func() { l.End(gen, h.now(), grace) }
}

// vmUsages is what the capacity decisions need of an inventory snapshot.
func (h *HatcheryVSphere) vmUsages(vms []inventory.VM) []capacity.VMUsage {
	out := make([]capacity.VMUsage, len(vms))
	name := h.Name()
	for i, v := range vms {
		out[i] = capacity.VMUsage{
			Name: v.Name, CPUs: int64(v.NumCPU), MemoryMB: int64(v.MemoryMB),
			PoweredOn: v.PoweredOn(), Template: v.Template, Owned: v.OwnedBy(name),
		}
		if v.Annotation != nil {
			out[i].JobID, out[i].Provisioning = v.Annotation.JobID, v.Annotation.Provisioning
			if v.Annotation.Held() {
				// A held VM counts by its hardware but no longer serves
				// its job: a new spawn of the job reserves its own.
				out[i].JobID = ""
			}
		}
	}
	return out
}

// capacityFlavor is f as the capacity decisions take it (nil for nil).
func capacityFlavor(f *config.Flavor) *capacity.Flavor {
	if f == nil {
		return nil
	}
	return &capacity.Flavor{Name: f.Name, CPUs: int64(f.CPUs), MemoryMB: f.MemoryMB}
}

// capacityFlavors is flavors as the capacity decisions take them.
func capacityFlavors(flavors []config.Flavor) []capacity.Flavor {
	out := make([]capacity.Flavor, len(flavors))
	for i := range flavors {
		out[i] = *capacityFlavor(&flavors[i])
	}
	return out
}

// templateCandidates are the names of the template a worker of model is
// cloned from, best first: V2 the spec's image; V1 the model's own template
// (named after the model, docs/design.md#v1-models), then the base image it is built from.
func templateCandidates(model sdk.WorkerStarterWorkerModel) []string {
	var names []string
	if model.ModelV1 != nil && model.ModelV1.Name != "" {
		names = append(names, model.ModelV1.Name)
	}
	if img := model.GetVSphereImage(); img != "" {
		names = append(names, img)
	}
	return names
}

// CanAllocateResources tells whether the next worker fits now; see
// allocate. When it answers true it has
// reserved the worker's footprint under jobID until releaseCapacity(jobID),
// or capacity.ReservationTTL. The framework calls AllocateResources
// instead, which hands the reservation over so that it is released when no
// spawn follows.
func (h *HatcheryVSphere) CanAllocateResources(ctx context.Context, model sdk.WorkerStarterWorkerModel, jobID string, requirements []sdk.Requirement) (bool, error) {
	d, _, err := h.allocate(ctx, model, jobID, requirements)
	if err != nil {
		return false, err
	}
	return d.Allowed, nil
}

// AllocateResources implements hatchery.ResourceAllocator: the decision of
// CanAllocateResources, returning the reservation it made (nil when none:
// unknown flavor), or a *refusal.Refusal naming the missing resource.
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
	return &heldReservation{l: h.capacity.ledger, r: r}, nil
}

// heldReservation is a footprint AllocateResources reserved, as the
// framework holds it.
type heldReservation struct {
	l *capacity.Ledger
	r *capacity.Reservation
}

// Release implements hatchery.Reservation: the footprint is forgotten at
// once (no spawn used it). Once SpawnWorker released it, or it expired,
// it does nothing.
func (r *heldReservation) Release(refusal.Reason) { r.l.GiveBack(r.r) }

// ReservedFootprint is what the spawns in flight hold reserved now: the
// number of reservations not yet released, their vCPUs and their memory
// (MB). A spawn that ended is not included, even while decisions still
// count its VM through its released reservation.
func (h *HatcheryVSphere) ReservedFootprint() (n int, cpus, memoryMB int64) {
	n, fp := h.capacity.ledger.Held()
	return n, fp.CPUs, fp.MemoryMB
}

// refusalOf is the typed refusal of a refusing decision: its code, and
// which check refused as the detail.
func refusalOf(d capacity.Decision) *refusal.Refusal {
	code := refusal.ReasonCapacity
	if d.Reason != "" {
		code = d.Reason.Code()
	}
	return &refusal.Refusal{Reason: code, Detail: d.Detail}
}

// allocate is the capacity decision for the next worker of model
// (docs/flavors-and-capacity.md). The next worker's footprint is its flavor's,
// else its template's hardware; an unknown footprint is allowed while the
// static limits still have room. capacity.Decide checks the resource pool
// (when readable), maxCpus, maxMemoryMB and the starvation reserve of
// countSmallerFlavorToKeep against this hatchery's powered-on VMs plus the
// spawns in flight. When allowed with a known footprint it has reserved it
// under jobID and returns the reservation.
//
// An unknown flavor is allowed, without a reservation: SpawnWorker then
// fails with the *UnknownFlavorError, which the framework reports to the
// job (an error here would only keep the job queued silently).
// Only an unreadable inventory is an error.
func (h *HatcheryVSphere) allocate(ctx context.Context, model sdk.WorkerStarterWorkerModel, jobID string, requirements []sdk.Requirement) (capacity.Decision, *capacity.Reservation, error) {
	flavor, err := h.resolveFlavor(model, requirements)
	if err != nil {
		d := capacity.Allow(capacity.DetailUnknownFlavor)
		h.log.Warn("capacity decision", logkey.Model, model.GetName(), logkey.Flavor, model.GetFlavor(requirements, h.cfg.DefaultFlavor),
			logkey.Job, jobID, "allowed", true, logkey.Detail, d.Detail, logkey.Err, err)
		return d, nil, nil
	}
	flavorName := ""
	if flavor != nil {
		flavorName = flavor.Name
	}

	l := h.capacity.ledger
	gen, grace, end := h.beginCapacity()
	defer end()

	// vCenter reads first, without the lock.
	vms, err := h.inv.VMs(ctx)
	if err != nil {
		d := capacity.Refuse(capacity.ReasonInventory, capacity.DetailInventoryUnusable)
		h.log.Warn("capacity decision", logkey.Model, model.GetName(), logkey.Flavor, flavorName, logkey.Job, jobID,
			"allowed", false, logkey.Reason, d.Reason, logkey.Detail, d.Detail, logkey.Err, err)
		return d, nil, fmt.Errorf("can allocate resources for job %q: list vms: %w", jobID, err)
	}
	usages := h.vmUsages(vms)
	in := capacity.Input{MaxCPUs: int64(h.cfg.MaxCPUs), MaxMemoryMB: h.cfg.MaxMemoryMB}
	var footprintErr error
	if flavor != nil {
		in.Next, in.Known = capacityFlavor(flavor).Footprint(), true
	} else if fp, ok := capacity.TemplateFootprint(usages, templateCandidates(model)); ok {
		in.Next, in.Known = fp, true
	} else {
		footprintErr = fmt.Errorf("no template with hardware found for model %q (looked for %q)", model.GetName(), templateCandidates(model))
	}
	var smaller *capacity.Flavor
	in.Reserve, smaller = capacity.StarvationReserve(capacityFlavors(h.cfg.Flavors), capacityFlavor(flavor), h.cfg.CountSmallerFlavorToKeep)
	in.Pool = h.readPool(ctx)

	// Then decide and reserve atomically.
	o := l.Decide(gen, h.now(), grace, capacity.Count(usages), in,
		capacity.Reservation{Key: jobID, Model: model.GetName(), Flavor: flavorName})
	h.logExpired(o.Expired)
	in, d := o.Input, o.Decision
	attrs := []any{
		logkey.Model, model.GetName(), logkey.Flavor, flavorName, logkey.Job, jobID, "allowed", d.Allowed,
	}
	if !d.Allowed {
		attrs = append(attrs, logkey.Reason, d.Reason)
	}
	attrs = append(attrs, logkey.Detail, d.Detail,
		"used_cpus", in.Used.CPUs, "next_cpus", in.Next.CPUs, "reserve_cpus", in.Reserve.CPUs, "max_cpus", in.MaxCPUs,
		"used_memory_mb", in.Used.MemoryMB, "next_memory_mb", in.Next.MemoryMB, "reserve_memory_mb", in.Reserve.MemoryMB, "max_memory_mb", in.MaxMemoryMB,
		"inflight", o.Counted, "inflight_cpus", in.InFlight.CPUs, "inflight_memory_mb", in.InFlight.MemoryMB,
		"pool_readable", in.Pool.Readable,
	)
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
	return d, o.Held, nil
}

// refusedResource tells which resource a refusing decision found
// exhausted; false when d allowed the worker or refused for no resource.
func refusedResource(d capacity.Decision) (metrics.CapacityResource, bool) {
	switch {
	case d.Allowed:
		return "", false
	case d.Reason == capacity.ReasonCPU:
		return metrics.CapacityCPU, true
	case d.Reason == capacity.ReasonMemory:
		return metrics.CapacityMemory, true
	}
	return "", false
}

// logExpired logs the in-flight reservations the ledger dropped for their
// age.
func (h *HatcheryVSphere) logExpired(expired []capacity.Reservation) {
	now := h.now()
	for _, r := range expired {
		h.log.Warn("in-flight capacity reservation expired", logkey.Job, r.Key, logkey.Model, r.Model, logkey.Flavor, r.Flavor,
			"cpus", r.Footprint.CPUs, "memory_mb", r.Footprint.MemoryMB, "age", now.Sub(r.Created).String())
	}
}

// releaseCapacity ends the in-flight reservation of jobID; SpawnWorker calls
// it (deferred) when the spawn ends, after the inventory was invalidated for
// the VM it powered on (so the VM is then visible), or the spawn failed.
// Releasing a job without a reservation does nothing.
func (h *HatcheryVSphere) releaseCapacity(jobID string) {
	if h.capacity.ledger.Release(jobID, h.now(), h.releaseGrace()) {
		h.log.Debug("in-flight capacity reservation released", logkey.Job, jobID)
	}
}

// provisionReservationKey is the in-flight reservation key of a
// provisioning clone (its VM has no job).
func provisionReservationKey(name string) string { return capacity.ProvisionKey(name) }

// reserveProvisioning decides whether one more warm-pool VM fits the static
// limits (maxCpus, maxMemoryMB, with the starvation reserve of
// countSmallerFlavorToKeep) and, when it does, reserves its footprint under
// provisionReservationKey(name). A provisioned VM is powered on from its
// clone until it has its IP: meanwhile it takes capacity as a worker does,
// and spawns count it. Without a static limit there is nothing to
// overshoot: it allows without reading anything. The resource pool
// is not read: vCenter refuses a power-on the pool cannot hold, and a
// refused provisioning only waits for the next pass.
//
// The caller ends the reservation: dropProvisioning once the VM is powered
// off, releaseCapacity(provisionReservationKey(name)) on failure (the VM may
// stay powered on until cleanup destroys it).
func (h *HatcheryVSphere) reserveProvisioning(ctx context.Context, name string, t provisionTask) (capacity.Decision, error) {
	if h.cfg.MaxCPUs <= 0 && h.cfg.MaxMemoryMB <= 0 {
		return capacity.Allow(capacity.DetailNoStaticLimit), nil
	}
	l := h.capacity.ledger
	gen, grace, end := h.beginCapacity()
	defer end()

	vms, err := h.inv.VMs(ctx)
	if err != nil {
		return capacity.Decision{}, fmt.Errorf("provisioning capacity for vm %q: list vms: %w", name, err)
	}
	usages := h.vmUsages(vms)
	in := capacity.Input{MaxCPUs: int64(h.cfg.MaxCPUs), MaxMemoryMB: h.cfg.MaxMemoryMB}
	if t.flavor != nil {
		in.Next, in.Known = capacityFlavor(t.flavor).Footprint(), true
	} else {
		in.Next, in.Known = capacity.TemplateFootprint(usages, []string{t.template})
	}
	in.Reserve, _ = capacity.StarvationReserve(capacityFlavors(h.cfg.Flavors), capacityFlavor(t.flavor), h.cfg.CountSmallerFlavorToKeep)

	o := l.Decide(gen, h.now(), grace, capacity.Count(usages), in,
		capacity.Reservation{Key: provisionReservationKey(name), Model: t.key.model, Flavor: t.key.flavor})
	h.logExpired(o.Expired)
	in, d := o.Input, o.Decision
	h.log.Debug("provisioning capacity decision", logkey.VM, name, logkey.Model, t.key.model, logkey.Flavor, t.key.flavor,
		"allowed", d.Allowed, logkey.Reason, d.Reason, logkey.Detail, d.Detail, "known_footprint", in.Known,
		"used_cpus", in.Used.CPUs, "next_cpus", in.Next.CPUs, "reserve_cpus", in.Reserve.CPUs, "max_cpus", in.MaxCPUs,
		"used_memory_mb", in.Used.MemoryMB, "next_memory_mb", in.Next.MemoryMB, "reserve_memory_mb", in.Reserve.MemoryMB, "max_memory_mb", in.MaxMemoryMB,
		"inflight", o.Counted)
	return d, nil
}

// dropProvisioning ends the reservation of a provisioned VM now powered
// off: it holds no capacity any more.
func (h *HatcheryVSphere) dropProvisioning(name string) {
	h.capacity.ledger.Drop(provisionReservationKey(name))
}

// CapacityUsage is a snapshot of what this hatchery has allocated against
// its limits (for /mon/status and metrics).
type CapacityUsage struct {
	// CPUs and MemoryMB are this hatchery's powered-on VMs (not templates)
	// plus the spawns in flight the inventory does not show yet.
	CPUs     int64
	MemoryMB int64
	// VMs is the number of powered-on VMs counted.
	VMs int
	// InFlight is the number of spawns holding a reservation (not yet
	// released); InFlightCPUs and InFlightMemoryMB are their footprint.
	InFlight         int
	InFlightCPUs     int64
	InFlightMemoryMB int64
	// MaxCPUs and MaxMemoryMB are the static limits; 0 is unlimited.
	MaxCPUs     int64
	MaxMemoryMB int64
	// PoolReadable tells whether the resource pool runtime was read; the
	// two unreserved values are meaningful only then.
	PoolReadable bool
	// PoolNotRead is true while no reading was taken yet (status lines
	// show the last reading and do not reach vCenter themselves).
	PoolNotRead               bool
	PoolUnreservedMemoryBytes int64
	PoolUnreservedCPUMHz      int64
	// PoolError and PoolUnreadableSince describe the outage when the pool
	// is not readable.
	PoolError           string
	PoolUnreadableSince time.Time
}

// capacityView is one consistent read for reporting: inventory and pool
// read without the lock, reservations summed under it.
type capacityView struct {
	usage CapacityUsage
	in    capacity.Input // Next, Known and Reserve left for the caller
}

func (h *HatcheryVSphere) readCapacityView(ctx context.Context) (capacityView, error) {
	return h.readCapacityViewPool(ctx, h.readPool)
}

// readCapacityViewPool is readCapacityView with the pool read given: live
// (readPool) for decisions, the last reading (lastPool) for status lines.
func (h *HatcheryVSphere) readCapacityViewPool(ctx context.Context, readPool func(context.Context) capacity.Pool) (capacityView, error) {
	l := h.capacity.ledger
	gen, grace, end := h.beginCapacity()
	defer end()
	vms, err := h.inv.VMs(ctx)
	if err != nil {
		return capacityView{}, fmt.Errorf("read capacity: list vms: %w", err)
	}
	vmUse := capacity.Count(h.vmUsages(vms))
	pool := readPool(ctx)

	lv := l.View(gen, h.now(), grace, vmUse)
	h.logExpired(lv.Expired)
	h.capacity.mu.Lock()
	health := h.capacity.poolHealth
	h.capacity.mu.Unlock()

	used := vmUse.Footprint.Add(lv.InFlight)
	v := capacityView{
		usage: CapacityUsage{
			CPUs: used.CPUs, MemoryMB: used.MemoryMB, VMs: vmUse.VMs,
			InFlight: lv.Held, InFlightCPUs: lv.HeldFootprint.CPUs, InFlightMemoryMB: lv.HeldFootprint.MemoryMB,
			MaxCPUs: int64(h.cfg.MaxCPUs), MaxMemoryMB: h.cfg.MaxMemoryMB,
			PoolReadable: pool.Readable, PoolNotRead: !pool.Read, PoolUnreservedMemoryBytes: pool.UnreservedMemoryBytes, PoolUnreservedCPUMHz: pool.UnreservedCPUMHz,
		},
		in: capacity.Input{
			MaxCPUs: int64(h.cfg.MaxCPUs), MaxMemoryMB: h.cfg.MaxMemoryMB,
			Used: used, InFlight: lv.InFlight, Pool: pool,
		},
	}
	if !pool.Readable && health.down {
		v.usage.PoolError, v.usage.PoolUnreadableSince = health.err, health.since
	}
	return v, nil
}

// CapacityUsage reads what this hatchery has allocated now: one inventory
// read and one resource pool read, no reservation made.
func (h *HatcheryVSphere) CapacityUsage(ctx context.Context) (CapacityUsage, error) {
	v, err := h.readCapacityView(ctx)
	return v.usage, err
}

// FlavorHeadroom returns, for every configured flavor (lower-case name),
// how many more workers of that flavor CanAllocateResources would let
// through right now, one after the other: static limits, resource pool
// memory and CPU, starvation reserve. HeadroomUnlimited means nothing
// limits it. The framework's maxWorker count is not part of it. It reads
// the inventory and the pool once (the inventory's pool reading when it has
// a recent one: reportPool) and reserves nothing.
func (h *HatcheryVSphere) FlavorHeadroom(ctx context.Context) (map[string]int, error) {
	v, err := h.readCapacityViewPool(ctx, h.reportPool)
	if err != nil {
		return nil, err
	}
	return capacity.Headroom(v.in, capacityFlavors(h.cfg.Flavors), h.cfg.CountSmallerFlavorToKeep), nil
}
