package hatchery

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// drainState is the framework's drain (docs/operations.md#drain): once
// started it stays on until the process stops. While it is on no job is
// queued, booked or taken and no model registration starts; the jobs and
// registrations already in hand finish (their spawns run to their end);
// the heartbeats, the worker pool refresh and the hatchery's own loops
// (cleanup, warm pool) go on. drained is closed, and one line logged, once
// nothing is in hand any more.
type drainState struct {
	on    atomic.Bool
	once  sync.Once // the start of the drain: its time and log line
	since time.Time // set under once before on is stored: read only after on is seen true
	// drained is closed, under closeOnce, when a drain is on and nothing is
	// in flight; at is when.
	drained   chan struct{}
	closeOnce sync.Once
	at        atomic.Pointer[time.Time]
}

// Drain stops this hatchery from taking new jobs and returns a channel
// closed once nothing of its own is in flight: no job being processed (a
// spawn included) and no model registration. Another instance of the same
// hatchery name serves the queue meanwhile; the jobs this one did not book
// stay in the queue for it. who says who asked, for the log line (e.g.
// "SIGTERM", "ctl uid 1000"). Calling it again changes nothing and
// returns the same channel. A drain cannot be undone: the process is
// meant to stop (or be restarted) next.
func (f *Framework) Drain(who string) <-chan struct{} {
	f.drain.once.Do(func() {
		f.drain.since = f.now()
		f.drain.on.Store(true)
		n := len(f.inflightKeys())
		f.log.Info("drain started: no new job is taken, spawns in flight finish", "by", who, "in_flight", n)
	})
	f.checkDrained()
	return f.drain.drained
}

// Draining tells whether a drain was started.
func (f *Framework) Draining() bool { return f.drain.on.Load() }

// Drained tells whether a drain was started and nothing is in flight any
// more.
func (f *Framework) Drained() bool { return f.drain.at.Load() != nil }

// InFlight is the number of jobs and model registrations this hatchery has
// in hand now: queued for a starter or being processed (spawns included).
func (f *Framework) InFlight() int { return len(f.inflightKeys()) }

// checkDrained closes the drained channel, and logs it, when a drain is on
// and nothing is in flight.
func (f *Framework) checkDrained() {
	if !f.drain.on.Load() {
		return
	}
	f.inflightMu.Lock()
	empty := len(f.inflight) == 0
	f.inflightMu.Unlock()
	if !empty {
		return
	}
	f.drain.closeOnce.Do(func() {
		now := f.now()
		f.drain.at.Store(&now)
		close(f.drain.drained)
		f.log.Info("drained: nothing in flight", "draining_for", now.Sub(f.drain.since).Round(time.Millisecond))
	})
}

// drainStatusLine is the "Drain" line of the status, present once a drain
// started: WARN (the hatchery takes no job), saying what is still in
// flight or since when nothing is.
func (f *Framework) drainStatusLine(line func(component, status, value string) sdk.MonitoringStatusLine) (sdk.MonitoringStatusLine, bool) {
	if !f.drain.on.Load() {
		return sdk.MonitoringStatusLine{}, false
	}
	if at := f.drain.at.Load(); at != nil {
		return line("Drain", sdk.MonitoringStatusWarn, "drained at "+at.UTC().Format(time.RFC3339)+": nothing in flight, no job taken"), true
	}
	return line("Drain", sdk.MonitoringStatusWarn, fmt.Sprintf("draining since %s: %d in flight, no new job taken", f.drain.since.UTC().Format(time.RFC3339), f.InFlight())), true
}
