package admission

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/capacity"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/modelref"
	"github.com/cds-contrib/hatchery-vsphere/internal/placement"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// HeadroomUnlimited is the headroom of a flavor nothing limits: no static
// limit is configured and the resource pool could not be read.
const HeadroomUnlimited = capacity.HeadroomUnlimited

// Port is what admission reads of vCenter: the hatchery's resource pool
// and its runtime, the reader the metrics collector shares
// (vctypes.PoolReader). vctypes.Port implements it.
type Port = vctypes.PoolReader

// Admission decides for one hatchery. It is a value made per use over the
// hatchery's State, which holds what lasts between decisions.
type Admission struct {
	// State is the hatchery's: the ledger of spawns in flight and the
	// resource pool's handle and health.
	State *State
	// Hatchery is the hatchery's name: the owner of the VMs it counts.
	Hatchery string
	// Config gives the static limits, the flavors and the inventory mode.
	Config *config.Config
	// Inventory gives the VMs counted.
	Inventory inventory.Inventory
	// Port reads the resource pool.
	Port Port
	// Places reads the placements' pools and datastores (with
	// [[placements]] only; nil: no placement decision).
	Places PlacementPort
	// Resolve returns the flavor a worker of model gets (nil: the
	// template's hardware), an error for an unknown flavor.
	Resolve func(model sdk.WorkerStarterWorkerModel, reqs []sdk.Requirement) (*config.Flavor, error)
	// Log receives one line per decision.
	Log *slog.Logger
	// Now is the hatchery's clock.
	Now func() time.Time
}

// State is a hatchery's capacity state: the ledger of spawns in flight and
// the resource pool's handle and health. mu guards the pool fields only
// (the ledger has its own lock) and is never held across a vCenter call.
type State struct {
	ledger *capacity.Ledger

	mu         sync.Mutex
	pool       *vctypes.Ref // looked up once, dropped when a read fails
	poolHealth poolHealth
	lastPool   capacity.Pool // the last read, for status lines (no round trip)
	// figures are the placements' pool and datastore readings, by
	// placement name (FiguresTTL).
	figures map[string]figuresRead

	// Book keeps the placements' states (internal/placement); the
	// hatchery sets it before any decision. Nil: no placement decision.
	Book *placement.Book
}

// NewState returns an empty State.
func NewState() *State {
	return &State{ledger: capacity.NewLedger()}
}

// Ledger is the ledger of the spawns in flight.
func (s *State) Ledger() *capacity.Ledger { return s.ledger }

// ReleaseGrace is how long a released reservation is still counted when
// the inventory does not show its VM: none with the listing inventory
// (every read is fresh; the generations cover a read racing the release),
// else four refresh intervals — the age past which the shared inventory
// refuses its snapshot as stale — so that a lagging snapshot never hides
// a powered-on VM. A failed spawn holds its footprint that long at most.
func (a Admission) ReleaseGrace() time.Duration {
	if a.Config.InventoryMode == config.InventoryListing {
		return 0
	}
	every := a.Config.InventoryRefreshIntervalDuration()
	if every <= 0 {
		every = 30 * time.Second
	}
	return 4 * every
}

// beginCapacity registers a decision (or a report) about to read the
// inventory: its generation, the release grace it uses, and the func that
// ends it once decided.
func (a Admission) beginCapacity() (capacity.Generation, time.Duration, func()) {
	l, grace := a.State.ledger, a.ReleaseGrace()
	gen := l.Begin()
	return gen, grace, func() { l.End(gen, a.Now(), grace) }
}

// VMUsages is what the capacity decisions need of an inventory snapshot.
func (a Admission) VMUsages(vms []inventory.VM) []capacity.VMUsage {
	out := make([]capacity.VMUsage, len(vms))
	name := a.Hatchery
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

// CapacityFlavor is f as the capacity decisions take it (nil for nil).
func CapacityFlavor(f *config.Flavor) *capacity.Flavor {
	if f == nil {
		return nil
	}
	return &capacity.Flavor{Name: f.Name, CPUs: int64(f.CPUs), MemoryMB: f.MemoryMB}
}

// CapacityFlavors is flavors as the capacity decisions take them.
func CapacityFlavors(flavors []config.Flavor) []capacity.Flavor {
	out := make([]capacity.Flavor, len(flavors))
	for i := range flavors {
		out[i] = *CapacityFlavor(&flavors[i])
	}
	return out
}

// templateFootprint is the hardware of the first of templates found in
// vms with known CPUs and memory, each found by modelref's rule
// (docs/design.md#which-template); false when none is. names are the
// templates looked for, for the log.
func (a Admission) templateFootprint(vms []inventory.VM, templates ...modelref.Template) (fp capacity.Footprint, names []string, ok bool) {
	var found []inventory.VM
	for _, t := range templates {
		if t.Name == "" {
			continue
		}
		names = append(names, t.Name)
		if v, ok := inventory.FindTemplate(vms, a.Hatchery, t); ok {
			found = append(found, v)
		}
	}
	fp, ok = capacity.TemplateFootprint(a.VMUsages(found), names)
	return fp, names, ok
}

// CanAllocateResources tells whether the next worker fits now; see
// allocate. When it answers true it has
// reserved the worker's footprint under jobID until Release(jobID),
// or capacity.ReservationTTL. The framework calls AllocateResources
// instead, which hands the reservation over so that it is released when no
// spawn follows.
func (a Admission) CanAllocateResources(ctx context.Context, model sdk.WorkerStarterWorkerModel, jobID string, requirements []sdk.Requirement) (bool, error) {
	d, _, _, err := a.allocate(ctx, model, jobID, requirements)
	if err != nil {
		return false, err
	}
	return d.Allowed, nil
}

// AllocateResources implements hatchery.ResourceAllocator: the decision of
// CanAllocateResources, returning what it decided for the job when it
// allows it: the footprint it reserved (none for an unknown footprint)
// and the job's plan, resolved from the configuration the decision read
// (Plan: its flavor, template, model entry, placement...), which the spawn
// takes from spawn.Arguments.Reservation (PlanOf); nil for an unknown flavor
// (nothing reserved: the spawn reports it); or a *refusal.Refusal naming
// the missing resource.
// SpawnWorker for jobID ends a reservation handed to it; the framework
// releases it on every other path (docs/flavors-and-capacity.md,
// "Reservation lifecycle").
func (a Admission) AllocateResources(ctx context.Context, model sdk.WorkerStarterWorkerModel, jobID string, requirements []sdk.Requirement) (spawn.Reservation, error) {
	d, r, f, err := a.allocate(ctx, model, jobID, requirements)
	switch {
	case err != nil:
		return nil, err
	case !d.Allowed:
		return nil, refusalOf(d)
	case f.err != nil:
		// An unknown flavor reserves nothing and hands nothing over: the
		// spawn, resolving it, reports the error to the job.
		return nil, nil
	}
	// The job's plan, from the snapshot the decision read (a.Config, whose
	// ResolveFlavor a.Resolve is), with the placement it chose.
	plan := newPlan(a.Config, model, f.flavor, f.err)
	if r != nil {
		plan.Placement, plan.Datastore = r.Placement, r.Datastore
	}
	return &heldReservation{l: a.State.ledger, r: r, plan: plan, book: a.State.Book}, nil
}

// resolvedFlavor is the flavor allocate resolved for a job (Resolve), and
// the error resolving it.
type resolvedFlavor struct {
	flavor *config.Flavor
	err    error
}

// heldReservation is what AllocateResources decided for a job, as the
// framework holds it and hands it to the spawn
// (spawn.Arguments.Reservation): the footprint it reserved (r; nil
// when it reserved none: an unknown footprint) and the job's plan, which
// the spawn builds (PlanOf; its flavor: ResolvedFlavor).
type heldReservation struct {
	l    *capacity.Ledger
	r    *capacity.Reservation
	plan Plan
	// book is told when a reservation with a placement is given back
	// unused (a probe that will not be sent).
	book *placement.Book
}

// Release implements spawn.Reservation: the footprint is forgotten at
// once (no spawn used it). Once SpawnWorker released it, or it expired,
// or when none was reserved, it does nothing.
func (r *heldReservation) Release(refusal.Reason) {
	if r.r != nil && r.l.GiveBack(r.r) && r.book != nil && r.r.Placement != "" {
		r.book.Ended(r.r.Placement, r.r.Key)
	}
}

// ResolvedFlavor is the flavor AllocateResources resolved for the job res
// was returned for (a copy; nil for none), and the error resolving it;
// ok is false when res is not one of AllocateResources' (nil: a spawn
// without admission).
func ResolvedFlavor(res spawn.Reservation) (f *config.Flavor, ok bool, err error) {
	p, ok := PlanOf(res)
	if !ok {
		return nil, false, nil
	}
	return p.Flavor, true, p.FlavorErr
}

// ReservedFootprint is what the spawns in flight hold reserved now: the
// number of reservations not yet released, their vCPUs and their memory
// (MB). A spawn that ended is not included, even while decisions still
// count its VM through its released reservation.
func (a Admission) ReservedFootprint() (n int, cpus, memoryMB int64) {
	n, fp := a.State.ledger.Held()
	return n, fp.CPUs, fp.MemoryMB
}

// refusalOf is the typed refusal of a refusing decision: its code, and
// which check refused as the detail.
func refusalOf(d capacity.Decision) *refusal.Refusal {
	code := refusal.ReasonCapacity
	if d.Reason != "" {
		code = d.Reason
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
func (a Admission) allocate(ctx context.Context, model sdk.WorkerStarterWorkerModel, jobID string, requirements []sdk.Requirement) (capacity.Decision, *capacity.Reservation, resolvedFlavor, error) {
	flavor, err := a.Resolve(model, requirements)
	resolved := resolvedFlavor{flavor: flavor, err: err}
	if err != nil {
		d := capacity.Allow(capacity.DetailUnknownFlavor)
		asked := ""
		if u := (*config.UnknownFlavorError)(nil); errors.As(err, &u) {
			asked = u.Name
		}
		a.Log.Warn("capacity decision", logkey.Model, model.GetName(), logkey.Flavor, asked,
			logkey.Job, jobID, "allowed", true, logkey.Detail, d.Detail, logkey.Err, err)
		return d, nil, resolved, nil
	}
	flavorName := ""
	if flavor != nil {
		flavorName = flavor.Name
	}

	l := a.State.ledger
	gen, grace, end := a.beginCapacity()
	defer end()

	// vCenter reads first, without the lock.
	vms, err := a.Inventory.VMs(ctx)
	if err != nil {
		d := capacity.Refuse(refusal.ReasonResources, capacity.DetailInventoryUnusable)
		level := slog.LevelWarn
		if ctx.Err() != nil {
			// A decision cut by the shutdown is not a fault.
			level = slog.LevelInfo
		}
		a.Log.Log(ctx, level, "capacity decision", logkey.Model, model.GetName(), logkey.Flavor, flavorName, logkey.Job, jobID,
			"allowed", false, logkey.Reason, d.Reason, logkey.Detail, d.Detail, logkey.Err, err)
		return d, nil, resolved, fmt.Errorf("can allocate resources for job %q: list vms: %w", jobID, err)
	}
	usages := a.VMUsages(vms)
	in := capacity.Input{MaxCPUs: int64(a.Config.MaxCPUs), MaxMemoryMB: a.Config.MaxMemoryMB}
	var footprintErr error
	if flavor != nil {
		in.Next, in.Known = CapacityFlavor(flavor).Footprint(), true
	} else if fp, names, ok := a.templateFootprint(vms, modelref.Of(model), modelref.BaseOf(model)); ok {
		// The template the worker is cloned from; for a V1 model whose
		// template is not built yet, the base image it is built from.
		in.Next, in.Known = fp, true
	} else {
		footprintErr = fmt.Errorf("no template with hardware found for model %q (looked for %q)", model.GetName(), names)
	}
	var smaller *capacity.Flavor
	in.Reserve, smaller = capacity.StarvationReserve(CapacityFlavors(a.Config.Flavors), CapacityFlavor(flavor), a.Config.CountSmallerFlavorToKeep)
	in.Pool = a.readPool(ctx)

	// The placements' figures, read (FiguresTTL) without the lock.
	var place capacity.Place
	var choice placement.Choice
	if a.placed() {
		place = a.placeFunc(jobID, "", footprintOf(in, flavor), a.placementFigures(ctx, vms), &choice)
	}

	// Then decide, place and reserve atomically.
	o := l.DecidePlaced(gen, a.Now(), grace, capacity.Count(usages), in,
		capacity.Reservation{Key: jobID, Model: model.GetName(), Flavor: flavorName}, place)
	a.logExpired(o.Expired)
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
		attrs = append(attrs, "reserve_flavor", smaller.Name, "reserve_count", a.Config.CountSmallerFlavorToKeep)
	}
	if footprintErr != nil {
		attrs = append(attrs, "footprint_err", footprintErr.Error())
	}
	if place != nil && choice.NotTaken != nil {
		attrs = append(attrs, placementAttrs(choice)...)
	}
	a.Log.Log(ctx, slog.LevelInfo, "capacity decision", attrs...)
	return d, o.Held, resolved, nil
}

// logExpired logs the in-flight reservations the ledger dropped for their
// age.
func (a Admission) logExpired(expired []capacity.Reservation) {
	now := a.Now()
	for _, r := range expired {
		a.Log.Warn("in-flight capacity reservation expired", logkey.Job, r.Key, logkey.Model, r.Model, logkey.Flavor, r.Flavor,
			"cpus", r.Footprint.CPUs, "memory_mb", r.Footprint.MemoryMB, "age", now.Sub(r.Created).String())
	}
}

// Release ends the in-flight reservation of jobID; SpawnWorker calls
// it (deferred) when the spawn ends, after the inventory was invalidated for
// the VM it powered on (so the VM is then visible), or the spawn failed.
// Releasing a job without a reservation does nothing.
func (a Admission) Release(jobID string) {
	if a.State.ledger.Release(jobID, a.Now(), a.ReleaseGrace()) {
		a.Log.Debug("in-flight capacity reservation released", logkey.Job, jobID)
	}
}

// ReleaseProvisioning ends the reservation of a provisioning clone that
// failed (Release of its key).
func (a Admission) ReleaseProvisioning(name string) { a.Release(capacity.ProvisionKey(name)) }

// ReserveProvisioning decides whether one more warm-pool VM fits the static
// limits (maxCpus, maxMemoryMB, with the starvation reserve of
// countSmallerFlavorToKeep) and, when it does, reserves its footprint under
// capacity.ProvisionKey(name). template is the VM's template, flavor
// its flavor (nil: the template's size); model and flavorKey name its pool
// in the logs. A provisioned VM is powered on from its
// clone until it has its IP: meanwhile it takes capacity as a worker does,
// and spawns count it. Without a static limit there is nothing to
// overshoot: it allows without reading anything. The resource pool
// is not read: vCenter refuses a power-on the pool cannot hold, and a
// refused provisioning only waits for the next pass.
//
// The caller ends the reservation: DropProvisioning once the VM is powered
// off, ReleaseProvisioning on failure (the VM may
// stay powered on until cleanup destroys it).
func (a Admission) ReserveProvisioning(ctx context.Context, name string, template modelref.Template, flavor *config.Flavor, model, flavorKey string) (capacity.Decision, error) {
	return a.ReserveProvisioningAt(ctx, name, "", template, flavor, model, flavorKey)
}

// ReserveProvisioningAt is ReserveProvisioning for a VM that must run in
// the placement named placementName (an instant parent,
// docs/instant-clones.md): with [[placements]] the reservation is placed
// there or refused (ReasonPlacement) when that placement is cordoned,
// backing off or full; "" lets the decision choose, as
// ReserveProvisioning does. Without [[placements]] placementName is not
// read.
func (a Admission) ReserveProvisioningAt(ctx context.Context, name, placementName string, template modelref.Template, flavor *config.Flavor, model, flavorKey string) (capacity.Decision, error) {
	if a.Config.MaxCPUs <= 0 && a.Config.MaxMemoryMB <= 0 && !a.placed() {
		return capacity.Allow(capacity.DetailNoStaticLimit), nil
	}
	l := a.State.ledger
	gen, grace, end := a.beginCapacity()
	defer end()

	vms, err := a.Inventory.VMs(ctx)
	if err != nil {
		return capacity.Decision{}, fmt.Errorf("provisioning capacity for vm %q: list vms: %w", name, err)
	}
	usages := a.VMUsages(vms)
	in := capacity.Input{MaxCPUs: int64(a.Config.MaxCPUs), MaxMemoryMB: a.Config.MaxMemoryMB}
	if flavor != nil {
		in.Next, in.Known = CapacityFlavor(flavor).Footprint(), true
	} else {
		in.Next, _, in.Known = a.templateFootprint(vms, template)
	}
	in.Reserve, _ = capacity.StarvationReserve(CapacityFlavors(a.Config.Flavors), CapacityFlavor(flavor), a.Config.CountSmallerFlavorToKeep)

	// A refill goes to a placement as a clone for a job does: never a
	// cordoned or backing-off one (placement.Book.Eligible).
	var place capacity.Place
	var choice placement.Choice
	if a.placed() {
		place = a.placeFunc(capacity.ProvisionKey(name), placementName, footprintOf(in, flavor), a.placementFigures(ctx, vms), &choice)
	}
	o := l.DecidePlaced(gen, a.Now(), grace, capacity.Count(usages), in,
		capacity.Reservation{Key: capacity.ProvisionKey(name), Model: model, Flavor: flavorKey}, place)
	a.logExpired(o.Expired)
	in, d := o.Input, o.Decision
	attrs := []any{logkey.VM, name, logkey.Model, model, logkey.Flavor, flavorKey,
		"allowed", d.Allowed, logkey.Reason, d.Reason, logkey.Detail, d.Detail, "known_footprint", in.Known,
		"used_cpus", in.Used.CPUs, "next_cpus", in.Next.CPUs, "reserve_cpus", in.Reserve.CPUs, "max_cpus", in.MaxCPUs,
		"used_memory_mb", in.Used.MemoryMB, "next_memory_mb", in.Next.MemoryMB, "reserve_memory_mb", in.Reserve.MemoryMB, "max_memory_mb", in.MaxMemoryMB,
		"inflight", o.Counted}
	if place != nil && choice.NotTaken != nil {
		attrs = append(attrs, placementAttrs(choice)...)
	}
	a.Log.Debug("provisioning capacity decision", attrs...)
	return d, nil
}

// DropProvisioning ends the reservation of a provisioned VM now powered
// off: it holds no capacity any more.
func (a Admission) DropProvisioning(name string) {
	a.State.ledger.Drop(capacity.ProvisionKey(name))
}

// Usage is a snapshot of what this hatchery has allocated against its
// limits (for /mon/status and metrics).
type Usage struct {
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
	usage Usage
	in    capacity.Input // Next, Known and Reserve left for the caller
}

// readCapacityView is one consistent read with a live pool read.
func (a Admission) readCapacityView(ctx context.Context) (capacityView, error) {
	return a.readCapacityViewPool(ctx, a.readPool)
}

// readCapacityViewPool is readCapacityView with the pool read given: live
// (readPool) for decisions, the last reading (lastPool) for status lines.
func (a Admission) readCapacityViewPool(ctx context.Context, readPool func(context.Context) capacity.Pool) (capacityView, error) {
	l := a.State.ledger
	gen, grace, end := a.beginCapacity()
	defer end()
	vms, err := a.Inventory.VMs(ctx)
	if err != nil {
		return capacityView{}, fmt.Errorf("read capacity: list vms: %w", err)
	}
	vmUse := capacity.Count(a.VMUsages(vms))
	pool := readPool(ctx)

	lv := l.View(gen, a.Now(), grace, vmUse)
	a.logExpired(lv.Expired)
	a.State.mu.Lock()
	health := a.State.poolHealth
	a.State.mu.Unlock()

	used := vmUse.Footprint.Add(lv.InFlight)
	v := capacityView{
		usage: Usage{
			CPUs: used.CPUs, MemoryMB: used.MemoryMB, VMs: vmUse.VMs,
			InFlight: lv.Held, InFlightCPUs: lv.HeldFootprint.CPUs, InFlightMemoryMB: lv.HeldFootprint.MemoryMB,
			MaxCPUs: int64(a.Config.MaxCPUs), MaxMemoryMB: a.Config.MaxMemoryMB,
			PoolReadable: pool.Readable, PoolNotRead: !pool.Read, PoolUnreservedMemoryBytes: pool.UnreservedMemoryBytes, PoolUnreservedCPUMHz: pool.UnreservedCPUMHz,
		},
		in: capacity.Input{
			MaxCPUs: int64(a.Config.MaxCPUs), MaxMemoryMB: a.Config.MaxMemoryMB,
			Used: used, InFlight: lv.InFlight, Pool: pool,
		},
	}
	if !pool.Readable && health.down {
		v.usage.PoolError, v.usage.PoolUnreadableSince = health.err, health.since
	}
	return v, nil
}

// Usage reads what this hatchery has allocated now: one inventory read
// and one resource pool read, no reservation made.
func (a Admission) Usage(ctx context.Context) (Usage, error) {
	v, err := a.readCapacityView(ctx)
	return v.usage, err
}

// LastUsage is Usage with the last resource pool reading: it reaches no
// vCenter (status lines).
func (a Admission) LastUsage(ctx context.Context) (Usage, error) {
	v, err := a.readCapacityViewPool(ctx, func(context.Context) capacity.Pool { return a.lastPool() })
	return v.usage, err
}

// FlavorHeadroom returns, for every configured flavor (lower-case name),
// how many more workers of that flavor CanAllocateResources would let
// through right now, one after the other: static limits, resource pool
// memory and CPU, starvation reserve. HeadroomUnlimited means nothing
// limits it. The framework's maxWorker count is not part of it. It reads
// the inventory and the pool once (the inventory's pool reading when it has
// a recent one: reportPool) and reserves nothing.
func (a Admission) FlavorHeadroom(ctx context.Context) (map[string]int, error) {
	v, err := a.readCapacityViewPool(ctx, a.reportPool)
	if err != nil {
		return nil, err
	}
	return capacity.Headroom(v.in, CapacityFlavors(a.Config.Flavors), a.Config.CountSmallerFlavorToKeep), nil
}
