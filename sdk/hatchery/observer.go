package hatchery

import (
	"time"

	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
)

// SpawnEvent describes one spawn for an Observer.
type SpawnEvent struct {
	// Model is the model's name ("group/name" for V1).
	Model string
	// JobID is the V1 job id (decimal) or the V2 run job id; "" for a
	// registration.
	JobID string
	// V2 is true for a V2 job.
	V2 bool
	// RegisterOnly is true for a model registration.
	RegisterOnly bool
	// Err is the error SpawnWorker returned; set for SpawnFailed only
	// (an Observer reads its failure reason from it, errors.As: a refusal
	// at spawn time carries its code).
	Err error
}

// Observer receives the framework's counters. Calls are synchronous from
// the spawning goroutine: implementations must be cheap and safe for
// concurrent use. Metrics exporters implement it.
type Observer interface {
	// SpawnStarted is called just before SpawnWorker.
	SpawnStarted(ev SpawnEvent)
	// SpawnSucceeded is called when SpawnWorker returned nil; d runs from
	// the job being booked/taken to the worker launched.
	SpawnSucceeded(ev SpawnEvent, d time.Duration)
	// SpawnFailed is called when SpawnWorker returned an error (ev.Err).
	SpawnFailed(ev SpawnEvent, d time.Duration)
	// JobSkipped is called once for every refusal of a job, with its code
	// (refusal.ReasonRegion, refusal.ReasonCapacityCPU,
	// refusal.ReasonBooked, ...): the framework's own decisions, the
	// hatchery's admission (GateSpawn, CanSpawn, AllocateResources) and a
	// SpawnWorker refusing at spawn time (its error a *refusal.Refusal;
	// SpawnFailed is called for it too). It is the one place a refusal is
	// reported: an implementation counting refusals counts them here.
	JobSkipped(reason refusal.Reason)
}

// NopObserver is an Observer doing nothing; the default.
type NopObserver struct{}

// SpawnStarted does nothing.
func (NopObserver) SpawnStarted(SpawnEvent) {}

// SpawnSucceeded does nothing.
func (NopObserver) SpawnSucceeded(SpawnEvent, time.Duration) {}

// SpawnFailed does nothing.
func (NopObserver) SpawnFailed(SpawnEvent, time.Duration) {}

// JobSkipped does nothing.
func (NopObserver) JobSkipped(refusal.Reason) {}

// HealthObserver is an optional extension of Observer: when the Observer
// also implements it, the framework reports its heartbeats and the jobs it
// refuses because provision.maxWorker workers already run or start.
type HealthObserver interface {
	// HeartbeatSent is called after every heartbeat to the CDS API, ok
	// when the API accepted it.
	HeartbeatSent(ok bool)
	// MaxWorkersReached is called when a waiting job is refused because
	// the worker pool already holds provision.maxWorker workers (a health
	// signal; the refusal itself is reported through JobSkipped).
	MaxWorkersReached()
}
