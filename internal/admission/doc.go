// Package admission decides whether this hatchery takes the next job now,
// and keeps the footprint of the spawns in flight: it reads the inventory
// and the resource pool (once looked up, its outages logged once), turns
// them into internal/capacity's inputs, calls it, logs one line per
// decision and returns the refusal (docs/flavors-and-capacity.md), which
// the daemon's observer meters once, whoever refused. It also
// answers the reports built on the same reads: the usage of /mon/status
// and the per-flavor headroom of the metrics.
//
// The decisions themselves and the ledger of reservations are
// internal/capacity's; which flavor a job gets is the hatchery's (its
// Resolve); the framework's calls (CanAllocateResources,
// AllocateResources) reach it through the hatchery. It reads vCenter only
// through its Port (vctypes.PoolReader, which vctypes.Port implements);
// it imports no govmomi package.
package admission
