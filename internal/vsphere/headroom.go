package vsphere

import (
	"context"
	"fmt"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
)

// HeadroomUnlimited is the headroom of a flavor nothing limits: no static
// limit is configured and the resource pool could not be read.
const HeadroomUnlimited = -1

// maxHeadroom bounds the count of FlavorHeadroom; reaching it is reported
// as HeadroomUnlimited.
const maxHeadroom = 100000

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
	in    capacityInput // Next, Known and Reserve left for the caller
}

func (h *HatcheryVSphere) readCapacityView(ctx context.Context) (capacityView, error) {
	return h.readCapacityViewPool(ctx, h.readPool)
}

// readCapacityViewPool is readCapacityView with the pool read given: live
// (readPool) for decisions, the last reading (lastPool) for status lines.
func (h *HatcheryVSphere) readCapacityViewPool(ctx context.Context, readPool func(context.Context) poolSnapshot) (capacityView, error) {
	s := h.capacity
	grace := h.releaseGrace()
	gen := s.begin()
	defer func() { s.end(gen, h.now(), grace) }()
	vms, err := h.inv.VMs(ctx)
	if err != nil {
		return capacityView{}, fmt.Errorf("read capacity: list vms: %w", err)
	}
	vmUse := countAllocatedResources(vms, h.Name())
	pool := readPool(ctx)

	now := h.now()
	s.mu.Lock()
	expired := s.expireLocked(now)
	inflight, _ := s.inFlightLocked(gen, now, grace, "", vmUse.jobs)
	n, nfp := s.inFlightCountLocked()
	health := s.poolHealth
	s.mu.Unlock()
	h.logExpired(expired, now)

	used := vmUse.footprint.add(inflight)
	v := capacityView{
		usage: CapacityUsage{
			CPUs: used.CPUs, MemoryMB: used.MemoryMB, VMs: vmUse.VMs,
			InFlight: n, InFlightCPUs: nfp.CPUs, InFlightMemoryMB: nfp.MemoryMB,
			MaxCPUs: int64(h.cfg.MaxCPUs), MaxMemoryMB: h.cfg.MaxMemoryMB,
			PoolReadable: pool.Readable, PoolNotRead: !pool.Read, PoolUnreservedMemoryBytes: pool.UnreservedMemoryBytes, PoolUnreservedCPUMHz: pool.UnreservedCPUMHz,
		},
		in: capacityInput{
			MaxCPUs: int64(h.cfg.MaxCPUs), MaxMemoryMB: h.cfg.MaxMemoryMB,
			Used: used, InFlight: inflight, Pool: pool,
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
	return flavorHeadroom(v.in, h.cfg.Flavors, h.cfg.CountSmallerFlavorToKeep), nil
}

// flavorHeadroom is FlavorHeadroom's pure computation over a snapshot
// (base.Next, Known and Reserve are ignored).
func flavorHeadroom(base capacityInput, flavors []config.Flavor, countSmaller int) map[string]int {
	out := make(map[string]int, len(flavors))
	for _, f := range flavors {
		in := base
		in.Next, in.Known = flavorFootprint(f), true
		in.Reserve, _ = starvationReserve(flavors, &f, countSmaller)
		out[f.Name] = headroomOf(in)
	}
	return out
}

// headroomOf counts how many workers of in.Next fit one after another.
func headroomOf(in capacityInput) int {
	if in.MaxCPUs <= 0 && in.MaxMemoryMB <= 0 && !in.Pool.Readable {
		return HeadroomUnlimited
	}
	n := 0
	for decideCapacity(in).Allowed {
		n++
		if n >= maxHeadroom {
			return HeadroomUnlimited
		}
		in.Used = in.Used.add(in.Next)
		in.InFlight = in.InFlight.add(in.Next)
	}
	return n
}
