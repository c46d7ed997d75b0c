package daemon

import (
	"context"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
)

// metricsObserver turns the framework's spawn events into the hatchery's
// spawn metrics, and forwards them to next (nil: nobody).
type metricsObserver struct {
	m    *metrics.Metrics
	ctx  context.Context // the framework's: once it ended, a failure is a cancellation
	next hatchery.Observer
}

// SpawnStarted implements hatchery.Observer.
func (o metricsObserver) SpawnStarted(ev hatchery.SpawnEvent) {
	o.m.SpawnStarted(ev.Model)
	if o.next != nil {
		o.next.SpawnStarted(ev)
	}
}

// SpawnSucceeded implements hatchery.Observer.
func (o metricsObserver) SpawnSucceeded(ev hatchery.SpawnEvent, d time.Duration) {
	o.m.SpawnSucceeded(ev.Model, d)
	if o.next != nil {
		o.next.SpawnSucceeded(ev, d)
	}
}

// SpawnFailed implements hatchery.Observer. The reason is "canceled" while
// shutting down, else the one the spawn's error carries
// (metrics.SpawnFailureReasonOf: the failed step the spawn path marked, or
// the code of a refusal at spawn time).
func (o metricsObserver) SpawnFailed(ev hatchery.SpawnEvent, d time.Duration) {
	reason := metrics.SpawnFailureReasonOf(ev.Err)
	if o.ctx.Err() != nil {
		reason = metrics.SpawnFailureCanceled
	}
	o.m.SpawnFailed(ev.Model, reason)
	if o.next != nil {
		o.next.SpawnFailed(ev, d)
	}
}

// HeartbeatSent implements hatchery.HealthObserver: heartbeat_failures.
func (o metricsObserver) HeartbeatSent(ok bool) {
	o.m.HeartbeatSent(ok)
	if ho, isHO := o.next.(hatchery.HealthObserver); isHO {
		ho.HeartbeatSent(ok)
	}
}

// MaxWorkersReached implements hatchery.HealthObserver; it is forwarded
// only: the refusal it signals comes through JobSkipped, which counts it.
func (o metricsObserver) MaxWorkersReached() {
	if ho, isHO := o.next.(hatchery.HealthObserver); isHO {
		ho.MaxWorkersReached()
	}
}

// JobSkipped implements hatchery.Observer: the one door of
// capacity_refusals. Every refusal of a job reaches it once, whichever
// decision refused (the framework's worker counts, the hatchery's
// admission, a refusal at spawn time), and metrics.Metrics.Refused counts
// the codes naming an exhausted resource. Nothing else calls Refused (an
// architecture test in this package checks it).
func (o metricsObserver) JobSkipped(reason refusal.Reason) {
	o.m.Refused(reason)
	if o.next != nil {
		o.next.JobSkipped(reason)
	}
}
