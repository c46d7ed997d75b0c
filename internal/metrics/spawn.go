package metrics

import (
	"errors"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"

	"go.opencensus.io/stats"
	"go.opencensus.io/tag"
)

// SpawnFailureReason is the reason tag of spawns_failed: a small fixed set,
// so that the series count stays bounded. Anything else is recorded as
// SpawnFailureOther.
type SpawnFailureReason string

// Spawn failure reasons.
const (
	// SpawnFailureFlavor: the flavor the job asks for is not defined.
	SpawnFailureFlavor SpawnFailureReason = "flavor"
	// SpawnFailureIP: refused at spawn time for want of a static IP (the
	// last one was taken since the admission: refusal code ip).
	SpawnFailureIP SpawnFailureReason = "ip"
	// SpawnFailureQuarantined: refused at spawn time because the template
	// was quarantined since the admission (refusal code quarantined).
	SpawnFailureQuarantined SpawnFailureReason = "quarantined"
	// SpawnFailureClone: clone, claim or reconfiguration of the VM failed.
	SpawnFailureClone SpawnFailureReason = "clone"
	// SpawnFailurePowerOn: a claimed pre-provisioned VM did not power on.
	SpawnFailurePowerOn SpawnFailureReason = "power_on"
	// SpawnFailureGuestNotReady: guest operations or the IP never became
	// ready before the deadline.
	SpawnFailureGuestNotReady SpawnFailureReason = "guest_not_ready"
	// SpawnFailureLaunch: starting the worker program in the guest failed.
	SpawnFailureLaunch SpawnFailureReason = "launch"
	// SpawnFailureCanceled: the spawn's context ended (shutdown, job gone).
	SpawnFailureCanceled SpawnFailureReason = "canceled"
	// SpawnFailureOther: anything else.
	SpawnFailureOther SpawnFailureReason = "other"
)

// SpawnFailureReasons lists every reason, in documentation order
// (docs/metrics.md).
var SpawnFailureReasons = []SpawnFailureReason{
	SpawnFailureFlavor, SpawnFailureIP, SpawnFailureQuarantined, SpawnFailureClone,
	SpawnFailurePowerOn, SpawnFailureGuestNotReady, SpawnFailureLaunch,
	SpawnFailureCanceled, SpawnFailureOther,
}

// spawnFailure marks an error with the reason of the step it failed in.
type spawnFailure struct {
	reason SpawnFailureReason
	err    error
}

// Error is the marked error's text, unchanged.
func (e *spawnFailure) Error() string { return e.err.Error() }

// Unwrap returns the marked error.
func (e *spawnFailure) Unwrap() error { return e.err }

// MarkSpawnFailure wraps err (nil stays nil) with the spawns_failed reason
// of the step it failed in; the text stays err's. The spawn path marks
// where it knows the step (internal/vsphere, internal/warmpool);
// SpawnFailureReasonOf reads it.
func MarkSpawnFailure(r SpawnFailureReason, err error) error {
	if err == nil {
		return nil
	}
	return &spawnFailure{reason: r, err: err}
}

// SpawnFailureReasonOf is the spawns_failed reason of a failed spawn's
// error: the innermost MarkSpawnFailure mark (the most precise step: a
// claimed VM's power-on inside the VM's creation), else that of a
// refusal at spawn time (*refusal.Refusal: ip, quarantined), else
// SpawnFailureOther. A cancellation is the caller's to tell.
func SpawnFailureReasonOf(err error) SpawnFailureReason {
	reason := SpawnFailureOther
	for e := err; ; {
		var m *spawnFailure
		if !errors.As(e, &m) {
			break
		}
		reason, e = m.reason, m.err
	}
	if reason != SpawnFailureOther {
		return reason
	}
	var r *refusal.Refusal
	if errors.As(err, &r) {
		switch r.Reason {
		case refusal.ReasonIP:
			return SpawnFailureIP
		case refusal.ReasonQuarantined:
			return SpawnFailureQuarantined
		}
	}
	return SpawnFailureOther
}

// known returns r when it is one of SpawnFailureReasons, else SpawnFailureOther.
func (r SpawnFailureReason) known() SpawnFailureReason {
	for _, k := range SpawnFailureReasons {
		if r == k {
			return r
		}
	}
	return SpawnFailureOther
}

// CapacityResource is the resource tag of capacity_refusals: what was
// exhausted when a waiting job was refused.
type CapacityResource string

// Capacity resources.
const (
	// CapacityCPU: maxCpus (with the reserve for smaller flavors) or the
	// resource pool's unreserved CPU.
	CapacityCPU CapacityResource = "cpu"
	// CapacityMemory: maxMemoryMB (with the reserve for smaller flavors) or
	// the resource pool's unreserved memory.
	CapacityMemory CapacityResource = "memory"
	// CapacityIP: no free address in the configured static IP ranges.
	CapacityIP CapacityResource = "ip"
	// CapacityCount: provision.maxWorker workers already run or start.
	CapacityCount CapacityResource = "count"
	// CapacityPlacement: the hatchery has room but none of its placements
	// ([[placements]]) can take the clone (each full, cordoned or backing
	// off; docs/placements.md).
	CapacityPlacement CapacityResource = "placement"
)

// CapacityResources lists every resource, in documentation order.
var CapacityResources = []CapacityResource{CapacityCPU, CapacityMemory, CapacityIP, CapacityCount, CapacityPlacement}

// CapacityResourceOf tells which resource a refusal code says is
// exhausted: the one mapping from the refusal codes (sdk/refusal) to the
// resource label of capacity_refusals; false for a code naming none.
func CapacityResourceOf(r refusal.Reason) (CapacityResource, bool) {
	switch r {
	case refusal.ReasonCapacityCPU:
		return CapacityCPU, true
	case refusal.ReasonCapacityMemory:
		return CapacityMemory, true
	case refusal.ReasonIP:
		return CapacityIP, true
	case refusal.ReasonMaxWorkers:
		return CapacityCount, true
	case refusal.ReasonPlacement:
		return CapacityPlacement, true
	}
	return "", false
}

// Refused counts a waiting job refused with code r in capacity_refusals
// when r names an exhausted resource (CapacityResourceOf); other codes
// are not counted there. It is capacity_refusals' only door: the daemon's
// observer calls it once per refusal of a job (hatchery.Observer's
// JobSkipped), and nothing else does. m may be nil (no metrics): nothing
// is recorded.
func (m *Metrics) Refused(r refusal.Reason) {
	res, ok := CapacityResourceOf(r)
	if !ok || m == nil {
		return
	}
	if err := m.record([]tag.Mutator{tag.Upsert(keyResource, string(res))}, mCapacityRefusals.M(1)); err != nil {
		m.logger().Warn("record capacity metric", "err", err)
	}
}

// QuarantinedTemplates records how many templates (or V1 models) are
// quarantined now. m may be nil (no metrics): nothing is recorded.
func (m *Metrics) QuarantinedTemplates(n int) {
	if m == nil {
		return
	}
	if err := m.record(nil, mQuarantined.M(int64(n))); err != nil {
		m.logger().Warn("record quarantine metric", "err", err)
	}
}

// HeldVMs records how many VMs of failed spawns are held for inspection
// now. m may be nil (no metrics): nothing is recorded.
func (m *Metrics) HeldVMs(n int) {
	if m == nil {
		return
	}
	if err := m.record(nil, mHeldVMs.M(int64(n))); err != nil {
		m.logger().Warn("record debug hold metric", "err", err)
	}
}

// SpawnStarted counts a spawn of a worker of model (the model's path or
// template name) that has started: the job is taken.
func (m *Metrics) SpawnStarted(model string) {
	m.zeroModel(model)
	m.recordSpawn(stats.Measurement(mSpawnsStarted.M(1)), tag.Upsert(keyWorkerModel, tagValue(model)))
}

// zeroModel exports, the first time model is seen, spawns_succeeded and
// spawns_failed of every reason for it at 0: the failure ratio of a model
// that never failed is then 0, not "no data".
func (m *Metrics) zeroModel(model string) {
	m.seenMu.Lock()
	defer m.seenMu.Unlock()
	if m.models[model] {
		return
	}
	m.models[model] = true
	mod := tag.Upsert(keyWorkerModel, tagValue(model))
	m.recordSpawn(mSpawnsSucceeded.M(0), mod)
	for _, r := range SpawnFailureReasons {
		m.recordSpawn(mSpawnsFailed.M(0), mod, tag.Upsert(keyReason, string(r)))
	}
}

// SpawnSucceeded counts a spawn whose worker was launched in the guest, d
// after the job was taken, and records d in spawn_duration_seconds.
func (m *Metrics) SpawnSucceeded(model string, d time.Duration) {
	m.zeroModel(model)
	mod := tag.Upsert(keyWorkerModel, tagValue(model))
	m.recordSpawn(mSpawnsSucceeded.M(1), mod)
	m.recordSpawn(mSpawnDuration.M(d.Seconds()), mod)
}

// SpawnFailed counts a failed spawn of model; an unknown reason is counted
// as SpawnFailureOther.
func (m *Metrics) SpawnFailed(model string, reason SpawnFailureReason) {
	m.zeroModel(model)
	m.recordSpawn(mSpawnsFailed.M(1),
		tag.Upsert(keyWorkerModel, tagValue(model)),
		tag.Upsert(keyReason, string(reason.known())))
}

// Stage is one timed stage of a successful spawn: Name is the stage tag
// of spawn_stage_seconds (one of the hatchery's fixed list of stages,
// spawntiming.Stages), D its duration.
type Stage struct {
	Name string
	D    time.Duration
}

// SpawnTimed records the stages of a successful spawn of model in
// spawn_stage_seconds (by stage only: the label set stays the hatchery's
// fixed list of stages) and its job start in job_start_seconds (by model),
// when the queue time was known (jobStart > 0). m may be nil: nothing is
// recorded.
func (m *Metrics) SpawnTimed(model string, stages []Stage, jobStart time.Duration) {
	if m == nil {
		return
	}
	for _, s := range stages {
		m.recordSpawn(mSpawnStage.M(s.D.Seconds()), tag.Upsert(keyStage, s.Name))
	}
	if jobStart > 0 {
		m.recordSpawn(mJobStart.M(jobStart.Seconds()), tag.Upsert(keyWorkerModel, tagValue(model)))
	}
}

func (m *Metrics) recordSpawn(ms stats.Measurement, mut ...tag.Mutator) {
	if err := m.record(mut, ms); err != nil {
		m.logger().Warn("record spawn metric", "err", err)
	}
}
