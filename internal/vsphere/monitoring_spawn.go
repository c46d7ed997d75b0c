package vsphere

import (
	"time"

	"go.opencensus.io/stats"
	"go.opencensus.io/tag"
)

// SpawnFailureReason is the reason tag of spawns_failed: a small fixed set,
// so that the series count stays bounded. Anything else is recorded as
// SpawnFailureOther.
type SpawnFailureReason string

// Spawn failure reasons.
const (
	// SpawnFailureCapacity: refused after the job was taken (no room,
	// resource pool exhausted, flavor starvation).
	SpawnFailureCapacity SpawnFailureReason = "capacity"
	// SpawnFailureFlavor: the flavor could not be resolved or applied.
	SpawnFailureFlavor SpawnFailureReason = "flavor"
	// SpawnFailureIP: no free static IP.
	SpawnFailureIP SpawnFailureReason = "ip"
	// SpawnFailureClone: clone, claim or reconfiguration of the VM failed.
	SpawnFailureClone SpawnFailureReason = "clone"
	// SpawnFailurePowerOn: the VM did not power on.
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

// SpawnFailureReasons lists every reason, in documentation order.
var SpawnFailureReasons = []SpawnFailureReason{
	SpawnFailureCapacity, SpawnFailureFlavor, SpawnFailureIP, SpawnFailureClone,
	SpawnFailurePowerOn, SpawnFailureGuestNotReady, SpawnFailureLaunch,
	SpawnFailureCanceled, SpawnFailureOther,
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

// SpawnStarted counts a spawn of a worker of model (the model's path or
// template name) that has started: the job is taken.
func (m *Metrics) SpawnStarted(model string) {
	m.recordSpawn(stats.Measurement(mSpawnsStarted.M(1)), tag.Upsert(keyWorkerModel, tagValue(model)))
}

// SpawnSucceeded counts a spawn whose worker was launched in the guest, d
// after the job was taken, and records d in spawn_duration_seconds.
func (m *Metrics) SpawnSucceeded(model string, d time.Duration) {
	mod := tag.Upsert(keyWorkerModel, tagValue(model))
	m.recordSpawn(mSpawnsSucceeded.M(1), mod)
	m.recordSpawn(mSpawnDuration.M(d.Seconds()), mod)
}

// SpawnFailed counts a failed spawn of model; an unknown reason is counted
// as SpawnFailureOther.
func (m *Metrics) SpawnFailed(model string, reason SpawnFailureReason) {
	m.recordSpawn(mSpawnsFailed.M(1),
		tag.Upsert(keyWorkerModel, tagValue(model)),
		tag.Upsert(keyReason, string(reason.known())))
}

func (m *Metrics) recordSpawn(ms stats.Measurement, mut ...tag.Mutator) {
	if err := m.record(mut, ms); err != nil {
		m.logger().Warn("record spawn metric", "err", err)
	}
}
