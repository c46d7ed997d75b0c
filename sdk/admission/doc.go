// Package admission owns the framework's answer to "why was this job not
// started?": the fixed set of refusal codes (Reason, Refusal) that every
// decision not to spawn carries — in logs under the `reason` key, in
// metrics, in the poll summary — and the count-based admission of the
// worker pool (Pool): which workers count against provision.maxWorker,
// maxConcurrentProvisioning and maxConcurrentRegistering (the CDS API's
// workers of this hatchery, the workers the hatchery started, the spawns
// in flight and those ended since the last snapshot), the reservation of
// one slot per spawn (Reserve, Slot) and the periodic snapshot (Refresh),
// which also disables V1 workers registered under this hatchery's name
// that it never started; and which refusals of a job are new (Repeats), so
// a job refused at every poll for the same reason is reported once.
//
// It does not own the hatchery's own resource decisions (CPU, memory, the
// resource pool, IP addresses: internal/capacity and the hatchery decide
// those and answer with these codes), the job queue, booking, or the
// loops that call Refresh (sdk/hatchery). It imports only sdk and
// sdk/logkey; sdk/hatchery imports it, never the other way. The codes and
// what each means for an operator are listed in
// docs/flavors-and-capacity.md.
package admission
