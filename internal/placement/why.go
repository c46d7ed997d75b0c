package placement

// Why is why a placement did not take a clone: a code from a fixed set
// (WhyCodes), which code and tests read, and a detail with the figures,
// which people read. String renders it, the same way wherever it is shown
// (a decision's placement_reason, a placement refusal's detail, an instant
// parent's wait line): log/slog renders it through MarshalText.
type Why struct {
	Code   WhyCode
	Detail string
}

// WhyCode is the code of a Why.
type WhyCode string

// The codes of a placement not taken.
const (
	// WhyUnknown: no placement of that name is configured.
	WhyUnknown WhyCode = "unknown"
	// WhyOther: the clone must go to another placement (an instant
	// parent's, docs/instant-clones.md).
	WhyOther WhyCode = "other"
	// WhyCordoned: cordoned by an operator.
	WhyCordoned WhyCode = "cordoned"
	// WhyBackingOff: backing off after faults that point at it.
	WhyBackingOff WhyCode = "backing-off"
	// WhyProbing: its back-off ended and its one probe clone is in flight.
	WhyProbing WhyCode = "probing"
	// WhyMaxVMs: its maxVMs reached.
	WhyMaxVMs WhyCode = "max-vms"
	// WhyMaxTasks: its maxConcurrentTasks clones in flight.
	WhyMaxTasks WhyCode = "max-tasks"
	// WhyMaxCPUs: its maxCpus reached.
	WhyMaxCPUs WhyCode = "max-cpus"
	// WhyMaxMemory: its maxMemoryMB reached.
	WhyMaxMemory WhyCode = "max-memory"
	// WhyPoolCPU: its resource pool has no unreserved CPU.
	WhyPoolCPU WhyCode = "pool-cpu"
	// WhyPoolMemory: its resource pool's unreserved memory is short.
	WhyPoolMemory WhyCode = "pool-memory"
	// WhyDatastores: each of its datastores is inaccessible or at its
	// floor.
	WhyDatastores WhyCode = "datastores"
	// WhyLessHeadroom: it had room, less than the placement taken.
	WhyLessHeadroom WhyCode = "less-headroom"
	// WhySameHeadroom: it had as much room as the placement taken, and
	// more VMs or a later name.
	WhySameHeadroom WhyCode = "same-headroom"
)

// WhyCodes lists every code of a placement not taken.
var WhyCodes = []WhyCode{
	WhyUnknown, WhyOther, WhyCordoned, WhyBackingOff, WhyProbing, WhyMaxVMs, WhyMaxTasks,
	WhyMaxCPUs, WhyMaxMemory, WhyPoolCPU, WhyPoolMemory, WhyDatastores, WhyLessHeadroom, WhySameHeadroom,
}

// String is the Why as shown: its detail.
func (w Why) String() string { return w.Detail }

// MarshalText renders the Why as String does (log/slog, encoding/json).
func (w Why) MarshalText() ([]byte, error) { return []byte(w.String()), nil }
