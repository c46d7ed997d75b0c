// Package workerpool owns the framework's count-based admission: which
// workers count against provision.maxWorker, maxConcurrentProvisioning and
// maxConcurrentRegistering (the CDS API's workers of this hatchery, the
// workers the hatchery started, the spawns in flight and those ended since
// the last snapshot), the reservation of one slot per spawn (Pool.Reserve,
// Slot) and the periodic snapshot (Pool.Refresh), which also disables V1
// workers registered under this hatchery's name that it never started. The
// framework's /mon/workers and Workers status line show its Workers.
//
// It does not own the refusal codes (sdk/refusal), the hatchery's own
// resource decisions (CPU, memory, the resource pool, IP addresses:
// internal/capacity and internal/admission), the job queue, booking, or
// the loop that calls Refresh (sdk/hatchery). It imports only sdk,
// sdk/logkey and sdk/refusal; sdk/hatchery imports it, never the other
// way.
package workerpool
