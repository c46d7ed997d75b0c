package placement

import "time"

// State is a placement's state, as /mon/status, the metrics and ctl show it.
type State string

// The states of a placement.
const (
	// StateActive: the placement takes clones.
	StateActive State = "active"
	// StateCordoned: taken out of service by an operator (ctl placement
	// cordon): no new clone, its idle warm-pool VMs are still claimed.
	StateCordoned State = "cordoned"
	// StateBackingOff: clones failed with faults that point at the
	// placement; none is sent there until the back-off ends.
	StateBackingOff State = "backing-off"
	// StateProbing: the back-off ended; one probe clone is in flight
	// and decides whether the placement is active again.
	StateProbing State = "probing"
)

// States are every state, in the order metrics list them.
var States = []State{StateActive, StateCordoned, StateBackingOff, StateProbing}

// Unknown is a headroom or limit figure nothing gives (no limit set and
// the pool's runtime unread).
const Unknown int64 = -1

// DatastoreStatus is one datastore of a placement as last read.
type DatastoreStatus struct {
	Name          string
	FreeBytes     int64
	CapacityBytes int64
	// FloorBytes is the free space below which it takes no clone.
	FloorBytes int64
	Accessible bool
}

// Status is one placement as operators see it: its state and why, what
// the hatchery runs there, its headroom and its datastores.
type Status struct {
	Name  string
	State State
	// Until is when a back-off ends (zero otherwise).
	Until time.Time
	// Reason says why the placement is not active (the fault kind of a
	// back-off, "cordoned by uid N"); empty when active.
	Reason string
	// VMs, CPUs and MemoryMB are what this hatchery's VMs there use.
	VMs      int
	CPUs     int64
	MemoryMB int64
	// HeadroomCPUs and HeadroomMemoryMB are what a clone may still take
	// there (the least of its limits and its pool's unreserved room);
	// Unknown when nothing limits it.
	HeadroomCPUs     int64
	HeadroomMemoryMB int64
	// TasksInFlight are its clones in flight.
	TasksInFlight int
	// Clones and CloneFailures count its clones since the start.
	Clones        uint64
	CloneFailures uint64
	Datastores    []DatastoreStatus
}

// Set is what the operators' side (/mon/status, the metrics, ctl) reads
// and changes of the placements. The hatchery implements it
// (HatcheryVSphere.Placements).
type Set interface {
	// Statuses returns every placement, in configuration order.
	Statuses() []Status
	// Cordon takes the placement named out of service; an unknown name is
	// an error naming the placements there are.
	Cordon(name, by string) error
	// Uncordon puts a cordoned placement back in service.
	Uncordon(name, by string) error
}
