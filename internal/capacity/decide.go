package capacity

import "github.com/cds-contrib/hatchery-vsphere/sdk/refusal"

// Reasons is the fixed set of refusal codes a capacity decision gives,
// in documentation order: they are the framework's own (sdk/refusal), so a
// decision's code crosses to the log, the metrics and /mon/status as it is.
//   - refusal.ReasonCapacityCPU: not enough vCPUs: maxCpus, the resource
//     pool's CPU, or the reserve kept for smaller flavors;
//   - refusal.ReasonCapacityMemory: not enough memory: maxMemoryMB, the
//     resource pool's memory, or the reserve kept for smaller flavors;
//   - refusal.ReasonResources: no decision could be taken (the inventory
//     could not be read);
//   - refusal.ReasonPlacement: the hatchery has room but none of its
//     placements can take the clone (each full, cordoned or backing off;
//     internal/placement).
func Reasons() []refusal.Reason {
	return []refusal.Reason{refusal.ReasonCapacityCPU, refusal.ReasonCapacityMemory, refusal.ReasonResources, refusal.ReasonPlacement}
}

// The details of decisions: free text for humans (the `detail` log key and
// the refusal's Detail), stable for tests. Code never branches on them.
const (
	DetailFits              = "fits"
	DetailFootprintUnknown  = "footprint unknown, allowed within counts"
	DetailNoStaticLimit     = "no static limit"
	DetailUnknownFlavor     = "unknown flavor: allowed so that the spawn reports it to the job"
	DetailPoolCPU           = "resource pool has no unreserved cpu"
	DetailPoolMemory        = "resource pool unreserved memory insufficient"
	DetailCPULimit          = "maxCpus reached"
	DetailMemoryLimit       = "maxMemoryMB reached"
	DetailCPUStarvation     = "maxCpus: reserve for smaller flavors (countSmallerFlavorToKeep)"
	DetailMemoryStarvation  = "maxMemoryMB: reserve for smaller flavors (countSmallerFlavorToKeep)"
	DetailInventoryUnusable = "inventory unreadable"
)

// Pool is one read of the resource pool's runtime.
type Pool struct {
	// Readable is true when the runtime could be read; the two
	// unreserved figures mean something only then.
	Readable bool
	// UnreservedMemoryBytes is runtime.memory.unreservedForVm (bytes).
	UnreservedMemoryBytes int64
	// UnreservedCPUMHz is runtime.cpu.unreservedForVm (MHz).
	UnreservedCPUMHz int64
	// Read is true for a reading taken (readable or not), false for none yet.
	Read bool
}

// Input is everything one decision needs, already read: Decide is pure.
type Input struct {
	// MaxCPUs and MaxMemoryMB are the static limits; 0 is no limit.
	MaxCPUs     int64
	MaxMemoryMB int64
	// Used is this hatchery's powered-on VMs plus the spawns in flight the
	// inventory does not show yet.
	Used Footprint
	// InFlight is the in-flight part of Used: vCenter does not show it in
	// the resource pool either.
	InFlight Footprint
	// Pool is the resource pool runtime, when it could be read.
	Pool Pool
	// Next is the footprint of the worker asked for; Known is false when
	// it could not be determined (no flavor, template not found).
	Next  Footprint
	Known bool
	// Reserve is countSmallerFlavorToKeep × the smallest smaller flavor,
	// zero when no starvation reserve applies (StarvationReserve).
	Reserve Footprint
}

// Decision is the answer and why: Reason is the refusal code (empty when
// Allowed), Detail says which check decided.
type Decision struct {
	Allowed bool
	Reason  refusal.Reason
	Detail  string
}

// Allow is an allowing decision with its detail.
func Allow(detail string) Decision { return Decision{Allowed: true, Detail: detail} }

// Refuse is a refusing decision.
func Refuse(r refusal.Reason, detail string) Decision { return Decision{Reason: r, Detail: detail} }

// Decide applies, in order: the resource pool (when readable: unreserved
// CPU > 0, unreserved memory >= next + in flight), then maxCpus and
// maxMemoryMB against Used + Next, then the starvation reserve against
// what is left under each static limit. An unknown footprint is allowed
// while a static limit still has room (the counts still apply).
func Decide(in Input) Decision {
	if in.Pool.Readable {
		if in.Pool.UnreservedCPUMHz <= 0 {
			return Refuse(refusal.ReasonCapacityCPU, DetailPoolCPU)
		}
		need := (in.Next.MemoryMB + in.InFlight.MemoryMB) << 20
		if in.Pool.UnreservedMemoryBytes < need {
			return Refuse(refusal.ReasonCapacityMemory, DetailPoolMemory)
		}
	}
	type limit struct {
		max, used, next, reserve int64
		reason                   refusal.Reason
		detail, starvation       string
	}
	for _, l := range []limit{
		{in.MaxCPUs, in.Used.CPUs, in.Next.CPUs, in.Reserve.CPUs, refusal.ReasonCapacityCPU, DetailCPULimit, DetailCPUStarvation},
		{in.MaxMemoryMB, in.Used.MemoryMB, in.Next.MemoryMB, in.Reserve.MemoryMB, refusal.ReasonCapacityMemory, DetailMemoryLimit, DetailMemoryStarvation},
	} {
		if l.max <= 0 {
			continue
		}
		if !in.Known {
			if l.used >= l.max {
				return Refuse(l.reason, l.detail)
			}
			continue
		}
		if l.used+l.next > l.max {
			return Refuse(l.reason, l.detail)
		}
		if l.reserve > 0 && l.used+l.next+l.reserve > l.max {
			return Refuse(l.reason, l.starvation)
		}
	}
	if !in.Known {
		return Allow(DetailFootprintUnknown)
	}
	return Allow(DetailFits)
}
