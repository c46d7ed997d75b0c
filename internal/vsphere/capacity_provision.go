package vsphere

import (
	"context"
	"fmt"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// provisionReservationKey is the in-flight reservation key of a
// provisioning clone (its VM has no job).
func provisionReservationKey(name string) string { return "provision:" + name }

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
func (h *HatcheryVSphere) reserveProvisioning(ctx context.Context, name string, t provisionTask) (capacityDecision, error) {
	if h.cfg.MaxCPUs <= 0 && h.cfg.MaxMemoryMB <= 0 {
		return capacityDecision{Allowed: true, Reason: "no static limit"}, nil
	}
	s := h.capacity
	grace := h.releaseGrace()
	gen := s.begin()
	defer func() { s.end(gen, h.now(), grace) }()

	vms, err := h.inv.VMs(ctx)
	if err != nil {
		return capacityDecision{}, fmt.Errorf("provisioning capacity for vm %q: list vms: %w", name, err)
	}
	usage := countAllocatedResources(vms, h.Name())
	in := capacityInput{MaxCPUs: int64(h.cfg.MaxCPUs), MaxMemoryMB: h.cfg.MaxMemoryMB}
	if t.flavor != nil {
		in.Next, in.Known = flavorFootprint(*t.flavor), true
	} else {
		in.Next, in.Known = footprintOfTemplate(vms, []string{t.template})
	}
	in.Reserve, _ = starvationReserve(h.cfg.Flavors, t.flavor, h.cfg.CountSmallerFlavorToKeep)

	in, d, n, _ := h.decideAndReserve(gen, grace, usage, in, reservation{jobID: provisionReservationKey(name), model: t.key.model, flavor: t.key.flavor})
	h.log.Debug("provisioning capacity decision", logkey.VM, name, logkey.Model, t.key.model, logkey.Flavor, t.key.flavor,
		"allowed", d.Allowed, logkey.Reason, d.Reason, "known_footprint", in.Known,
		"used_cpus", in.Used.CPUs, "next_cpus", in.Next.CPUs, "reserve_cpus", in.Reserve.CPUs, "max_cpus", in.MaxCPUs,
		"used_memory_mb", in.Used.MemoryMB, "next_memory_mb", in.Next.MemoryMB, "reserve_memory_mb", in.Reserve.MemoryMB, "max_memory_mb", in.MaxMemoryMB,
		"inflight", n)
	return d, nil
}

// dropProvisioning ends the reservation of a provisioned VM now powered
// off: it holds no capacity any more.
func (h *HatcheryVSphere) dropProvisioning(name string) {
	h.capacity.drop(provisionReservationKey(name))
}
