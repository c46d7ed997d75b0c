// Package capacity owns the pure part of the hatchery's capacity
// decisions: the footprint of a worker (Footprint), what a list of VMs
// holds (Count over VMUsage), the decision whether one more worker fits
// (Decide: maxCpus, maxMemoryMB, the resource pool figures and the reserve
// kept for smaller flavors), the reservations of spawns in flight (Ledger)
// and how many more workers of each flavor fit (Headroom).
//
// It reads nothing: no vCenter, no inventory, no configuration file. The
// hatchery (internal/vsphere) reads the inventory and the resource pool,
// turns them into this package's inputs, calls it, and logs and meters the
// outcome. A refusal carries one of the framework's refusal codes
// (sdk/refusal; Reasons lists the ones a capacity decision gives), and a
// free text Detail saying which check refused.
//
// Guarantees of the Ledger, for decisions that Begin before they read the
// inventory and End after they decided:
//   - a spawn is counted once, never zero times: through its reservation
//     until a decision's snapshot shows its VM powered on, then through the
//     VM, so concurrent decisions cannot overshoot a limit;
//   - it is counted twice at most while one decision runs (erring on the
//     side of a refusal, never of an overshoot);
//   - a failed spawn (released, no VM ever shown) holds its footprint for
//     the release grace at most; a reservation given back before any spawn
//     used it (GiveBack, Drop) is forgotten at once;
//   - a reservation never released is dropped after ReservationTTL.
//
// Limits: the resource pool check only requires unreserved CPU to be
// positive (the pool reports MHz, a worker asks vCPUs); the pool's memory
// check adds the spawns in flight, which vCenter does not show yet. See
// docs/flavors-and-capacity.md for the checks and the refusal codes.
package capacity
