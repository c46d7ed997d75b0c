package vsphere

import (
	"fmt"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// footprint is what one worker VM takes: vCPUs and RAM.
type footprint struct {
	CPUs     int64
	MemoryMB int64
}

func (f footprint) add(o footprint) footprint {
	return footprint{CPUs: f.CPUs + o.CPUs, MemoryMB: f.MemoryMB + o.MemoryMB}
}

func (f footprint) times(n int64) footprint {
	return footprint{CPUs: f.CPUs * n, MemoryMB: f.MemoryMB * n}
}

func flavorFootprint(f config.Flavor) footprint {
	return footprint{CPUs: int64(f.CPUs), MemoryMB: f.MemoryMB}
}

// vmUsage is what this hatchery's VMs hold according to one inventory
// snapshot (docs/design.md#allocated): VMs it owns, not templates, powered on.
type vmUsage struct {
	footprint
	// VMs is the number of VMs counted.
	VMs int
	// jobs holds the job ids of the counted VMs: a reservation for one of
	// them is already counted through its VM and is skipped.
	jobs map[string]bool
}

// countAllocatedResources sums the hardware of the VMs hatcheryName owns
// that are powered on and not templates. Powered-off VMs (the warm pool, a
// clone not yet started) and VMs of anyone else are not counted.
func countAllocatedResources(vms []VM, hatcheryName string) vmUsage {
	u := vmUsage{jobs: map[string]bool{}}
	for _, v := range vms {
		if v.Template || !v.PoweredOn() || !v.OwnedBy(hatcheryName) {
			continue
		}
		u.CPUs += int64(v.NumCPU)
		u.MemoryMB += int64(v.MemoryMB)
		u.VMs++
		if v.Annotation.JobID != "" {
			u.jobs[v.Annotation.JobID] = true
		}
		if v.Annotation.Provisioning {
			u.jobs[provisionReservationKey(v.Name)] = true
		}
	}
	return u
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

// templateFootprint reads the next worker's footprint from its template in
// the inventory snapshot. A template is preferred over a VM of the same name.
func templateFootprint(vms []VM, model sdk.WorkerStarterWorkerModel) (footprint, error) {
	names := templateCandidates(model)
	if fp, ok := footprintOfTemplate(vms, names); ok {
		return fp, nil
	}
	return footprint{}, fmt.Errorf("no template with hardware found for model %q (looked for %q)", model.GetName(), names)
}

// footprintOfTemplate is the hardware of the first of names found in vms
// with known CPUs and memory (a template preferred over a VM of the same
// name).
func footprintOfTemplate(vms []VM, names []string) (footprint, bool) {
	for _, name := range names {
		var found *VM
		for i := range vms {
			v := &vms[i]
			if v.Name != name {
				continue
			}
			if found == nil || (v.Template && !found.Template) {
				found = v
			}
		}
		if found != nil && found.NumCPU > 0 && found.MemoryMB > 0 {
			return footprint{CPUs: int64(found.NumCPU), MemoryMB: int64(found.MemoryMB)}, true
		}
	}
	return footprint{}, false
}

// capacityInput is everything one decision needs, already read: the
// decision itself (decideCapacity) is pure.
type capacityInput struct {
	// MaxCPUs and MaxMemoryMB are the static limits; 0 is no limit.
	MaxCPUs     int64
	MaxMemoryMB int64
	// Used is this hatchery's powered-on VMs plus the spawns in flight the
	// inventory does not show yet.
	Used footprint
	// InFlight is the in-flight part of Used: vCenter does not show it in
	// the resource pool either.
	InFlight footprint
	// Pool is the resource pool runtime, when it could be read.
	Pool poolSnapshot
	// Next is the footprint of the worker asked for; Known is false when
	// it could not be determined (no flavor, template not found).
	Next  footprint
	Known bool
	// Reserve is countSmallerFlavorToKeep × the smallest smaller flavor,
	// zero when no starvation reserve applies.
	Reserve footprint
}

// capacityDecision is the answer and why.
type capacityDecision struct {
	Allowed bool
	Reason  string
}

// Reasons of decisions, stable for logs and tests.
const (
	reasonFits              = "fits"
	reasonFootprintUnknown  = "footprint unknown, allowed within counts"
	reasonPoolCPU           = "resource pool has no unreserved cpu"
	reasonPoolMemory        = "resource pool unreserved memory insufficient"
	reasonCPULimit          = "maxCpus reached"
	reasonMemoryLimit       = "maxMemoryMB reached"
	reasonCPUStarvation     = "maxCpus: reserve for smaller flavors (countSmallerFlavorToKeep)"
	reasonMemoryStarvation  = "maxMemoryMB: reserve for smaller flavors (countSmallerFlavorToKeep)"
	reasonUnknownFlavor     = "unknown flavor: allowed so that the spawn reports it to the job"
	reasonInventoryUnusable = "inventory unreadable"
)

// decideCapacity applies, in order: the resource pool (when readable:
// unreserved CPU > 0, unreserved memory >= next + in flight), then maxCpus
// and maxMemoryMB against Used + Next, then the starvation reserve against
// what is left under each static limit. An unknown footprint is allowed
// while a static limit still has room (the counts still apply).
func decideCapacity(in capacityInput) capacityDecision {
	refuse := func(r string) capacityDecision { return capacityDecision{Reason: r} }
	if in.Pool.Readable {
		if in.Pool.UnreservedCPUMHz <= 0 {
			return refuse(reasonPoolCPU)
		}
		need := (in.Next.MemoryMB + in.InFlight.MemoryMB) << 20
		if in.Pool.UnreservedMemoryBytes < need {
			return refuse(reasonPoolMemory)
		}
	}
	type limit struct {
		max, used, next, reserve int64
		reason, starvation       string
	}
	for _, l := range []limit{
		{in.MaxCPUs, in.Used.CPUs, in.Next.CPUs, in.Reserve.CPUs, reasonCPULimit, reasonCPUStarvation},
		{in.MaxMemoryMB, in.Used.MemoryMB, in.Next.MemoryMB, in.Reserve.MemoryMB, reasonMemoryLimit, reasonMemoryStarvation},
	} {
		if l.max <= 0 {
			continue
		}
		if !in.Known {
			if l.used >= l.max {
				return refuse(l.reason)
			}
			continue
		}
		if l.used+l.next > l.max {
			return refuse(l.reason)
		}
		if l.reserve > 0 && l.used+l.next+l.reserve > l.max {
			return refuse(l.starvation)
		}
	}
	if !in.Known {
		return capacityDecision{Allowed: true, Reason: reasonFootprintUnknown}
	}
	return capacityDecision{Allowed: true, Reason: reasonFits}
}

// starvationReserve is the footprint kept free for smaller flavors when f
// is spawned: count × the smallest smaller flavor; zero when count is 0, f
// is nil (template resources) or f is the smallest flavor.
func starvationReserve(flavors []config.Flavor, f *config.Flavor, count int) (footprint, *config.Flavor) {
	if f == nil || count <= 0 {
		return footprint{}, nil
	}
	s, ok := smallestSmallerFlavor(flavors, *f)
	if !ok {
		return footprint{}, nil
	}
	return flavorFootprint(s).times(int64(count)), &s
}
