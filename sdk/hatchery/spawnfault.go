package hatchery

import (
	"context"
	"errors"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
)

// SpawnGate is a hatchery that can refuse a job, for a coded reason, before
// anything is reserved or booked for it: the framework asks it first in
// the admission. A quarantined template is refused so, before any clone.
// GateSpawn must be cheap: it reads the hatchery's memory only.
type SpawnGate interface {
	// GateSpawn returns nil to let the job go on to CanSpawn and the
	// capacity checks, or the refusal.Refusal that keeps it in the queue.
	GateSpawn(ctx context.Context, model sdk.WorkerStarterWorkerModel, jobID string) *refusal.Refusal
}

// BackendError marks a spawn error caused by the hatchery's backend itself
// (its hypervisor unreachable, its session lost) rather than by the job,
// its model or its template. SpawnWorker returns one wrapping the cause;
// the framework then releases the job back to the queue without counting
// the attempt against maxAttemptsNumberBeforeFailure: no job is ever
// failed by the hatchery for an outage of its backend.
type BackendError struct {
	Err error
}

// Error is the cause's text.
func (e *BackendError) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *BackendError) Unwrap() error { return e.Err }

// uncountedSpawnError tells whether a SpawnWorker error leaves the job's
// attempts as they were: a fault of the backend (BackendError), or a
// refusal made before anything was tried (a *refusal.Refusal, such as a template
// quarantined between the admission and the spawn).
func uncountedSpawnError(err error) bool {
	var be *BackendError
	var r *refusal.Refusal
	return errors.As(err, &be) || errors.As(err, &r)
}
