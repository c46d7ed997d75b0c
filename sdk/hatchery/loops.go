package hatchery

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// backoff doubles a delay from min to max.
type backoff struct{ cur, min, max time.Duration }

func newBackoff(min, max time.Duration) *backoff { return &backoff{min: min, max: max} }

// next returns the delay to wait now and doubles the following one.
func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.min
	}
	d := b.cur
	b.cur = min(b.cur*2, b.max)
	return d
}

// reset starts again from min.
func (b *backoff) reset() { b.cur = 0 }

// sleepCtx waits d; false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// wake wakes a loop without blocking; signals coalesce.
func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// runLoop runs fn at once, then on every tick or signal, until ctx ends. A
// pass never overlaps the next.
func runLoop(ctx context.Context, every time.Duration, wake <-chan struct{}, fn func(context.Context)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		fn(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
	}
}

// defaultMaxHeartbeatFailures applies when api.maxHeartbeatFailures is unset.
const defaultMaxHeartbeatFailures = 10

// heartbeatLoop sends the status at once then every Intervals.Heartbeat.
// It returns an error after api.maxHeartbeatFailures consecutive failures,
// nil when ctx ends. On a 401 it signs in again.
func (f *Framework) heartbeatLoop(ctx context.Context) error {
	maxFail := f.cfg.API.MaxHeartbeatFailures
	if maxFail <= 0 {
		maxFail = defaultMaxHeartbeatFailures
	}
	failures := 0
	t := time.NewTicker(f.iv.Heartbeat)
	defer t.Stop()
	for {
		lines := f.statusLines(ctx)
		err := f.client.Heartbeat(ctx, sdk.MonitoringStatus{Now: f.now(), Lines: lines})
		if ho, ok := f.obs.(HealthObserver); ok && ctx.Err() == nil {
			ho.HeartbeatSent(err == nil)
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case err == nil:
			failures = 0
			f.st.heartbeat.set(sdk.MonitoringStatusOK, "sent at "+f.now().UTC().Format(time.RFC3339))
		default:
			failures++
			f.st.heartbeat.set(sdk.MonitoringStatusAlert, "failed "+strconv.Itoa(failures)+"/"+strconv.Itoa(maxFail)+": "+err.Error())
			f.log.Warn("heartbeat failed", logkey.Err, err, "failures", failures, "max", maxFail)
			if failures >= maxFail {
				return errors.Join(errHeartbeat, err)
			}
			if errors.Is(err, cdsclient.ErrNotAuthenticated) {
				if serr := f.client.SignIn(ctx); serr != nil {
					f.st.signIn.set(sdk.MonitoringStatusAlert, "sign-in failed: "+serr.Error())
					f.log.Warn("sign-in after 401 failed", logkey.Err, serr)
				} else {
					f.st.signIn.set(sdk.MonitoringStatusOK, "signed in")
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// pollV1Loop polls the V1 queue every Intervals.QueuePolling.
func (f *Framework) pollV1Loop(ctx context.Context) {
	runLoop(ctx, f.iv.QueuePolling, f.pollV1Now, f.pollPass(func(ctx context.Context) {
		if f.drain.on.Load() {
			return // draining: no job is taken (drain.go)
		}
		// Jobs being processed when the listing starts may be booked by
		// us and so left out of it: their attempt counts stay.
		before := f.inflightKeys()
		jobs, err := f.client.QueueWorkflowNodeJobRun(ctx, f.cfg.V1QueueRegions())
		if err != nil {
			if ctx.Err() == nil {
				f.st.queueV1.set(sdk.MonitoringStatusWarn, "poll failed: "+err.Error())
				f.log.Warn("poll v1 queue failed", logkey.Err, err)
			}
			return
		}
		f.st.queueV1.set(sdk.MonitoringStatusOK, "polled at "+f.now().UTC().Format(time.RFC3339)+", "+strconv.Itoa(len(jobs))+" jobs")
		ids := make(map[int64]struct{}, len(jobs))
		keys := make(map[string]bool, len(jobs))
		for i := range jobs {
			ids[jobs[i].ID] = struct{}{}
			k := candidate{v1ID: jobs[i].ID}.key()
			keys[k] = true
			f.spawned.seen(k) // back in the queue: no longer booked
		}
		f.spawned.prune(f.now())
		f.attempts.prune(f.now(), func(id int64) bool {
			if _, ok := ids[id]; ok {
				return true
			}
			k := candidate{v1ID: id}.key()
			return before[k] || f.isInflight(k)
		})
		f.skips.Prune("v1:", func(k string) bool { return keys[k] || f.isInflight(k) })
		batch := newPollBatch(f.log, "v1", len(jobs))
		for i := range jobs {
			if !f.enqueue(ctx, candidate{v1: &jobs[i], v1ID: jobs[i].ID, batch: batch}) {
				if ctx.Err() != nil {
					return
				}
				batch.record(outcomeBusy)
			}
		}
	}))
}

// pollV2Loop polls the V2 queue of the region the V2 sign-in answered every
// Intervals.QueuePolling.
func (f *Framework) pollV2Loop(ctx context.Context) {
	runLoop(ctx, f.iv.QueuePolling, f.pollV2Now, f.pollPass(func(ctx context.Context) {
		if f.drain.on.Load() {
			return // draining: no job is taken (drain.go)
		}
		// Jobs being processed when the listing starts may be taken by
		// us and so left out of it: their attempt counts stay.
		before := f.inflightKeys()
		region := f.client.V2Region()
		jobs, err := f.client.V2QueueJobs(ctx, region)
		if err != nil {
			if ctx.Err() == nil {
				f.st.queueV2.set(sdk.MonitoringStatusWarn, "region "+region+": poll failed: "+err.Error())
				f.log.Warn("poll v2 queue failed", "region", region, logkey.Err, err)
			}
			return
		}
		f.st.queueV2.set(sdk.MonitoringStatusOK, "region "+region+": polled at "+f.now().UTC().Format(time.RFC3339)+", "+strconv.Itoa(len(jobs))+" jobs")
		keys := make(map[string]bool, len(jobs))
		for i := range jobs {
			k := candidate{v2ID: jobs[i].ID}.key()
			keys[k] = true
			f.spawned.seen(k) // back in the queue: no longer taken
		}
		f.spawned.prune(f.now())
		f.attemptsV2.prune(f.now(), func(id string) bool {
			k := candidate{v2ID: id}.key()
			return keys[k] || before[k] || f.isInflight(k)
		})
		f.skips.Prune("v2:", func(k string) bool { return keys[k] || f.isInflight(k) })
		batch := newPollBatch(f.log, "v2", len(jobs))
		for i := range jobs {
			if !f.enqueue(ctx, candidate{v2ID: jobs[i].ID, batch: batch}) {
				if ctx.Err() != nil {
					return
				}
				batch.record(outcomeBusy)
			}
		}
	}))
}

// eventsV1Loop follows the V1 websocket, reconnecting with back-off; after
// every reconnection the queue is polled at once (events may be lost).
func (f *Framework) eventsV1Loop(ctx context.Context) {
	eventsLoop(ctx, f, "v1", f.pollV1Now, f.client.QueueEvents, func(id int64) candidate {
		return candidate{v1ID: id}
	})
}

// eventsV2Loop follows the V2 websocket like eventsV1Loop.
func (f *Framework) eventsV2Loop(ctx context.Context) {
	eventsLoop(ctx, f, "v2", f.pollV2Now, f.client.V2QueueEvents, func(id string) candidate {
		return candidate{v2ID: id}
	})
}

// eventsLoop follows one queue's websocket until ctx ends. Its back-off
// restarts from BackoffMin after a connection the API accepted (the
// websocket established) that stayed up for BackoffMin at least; it keeps
// doubling, to BackoffMax, across dials that fail and across connections
// dropped within BackoffMin of being accepted. An accepted connection
// proves the API up again, so the next drop is a new outage and is retried
// at once like the first; an API that accepts and drops at once (a proxy
// or a failing API behind its load balancer) is still retried less and
// less often. The rule it replaced, a reset only after a connection that
// outlived BackoffMax, started a second outage 25 s after the first at a
// 16 s retry: jobs queued meanwhile waited for the poll.
// (docs/architecture.md, the goroutine table's "queue events V1").
func eventsLoop[T any](ctx context.Context, f *Framework, name string, pollNow chan struct{}, subscribe func(context.Context, chan<- T) error, toCandidate func(T) candidate) {
	b := newBackoff(f.iv.BackoffMin, f.iv.BackoffMax)
	for reconnect := false; ctx.Err() == nil; reconnect = true {
		cctx, cancel := context.WithCancel(ctx)
		// connectedAt is written by subscribe's goroutine before its first
		// read and read here after subscribe returned.
		var connectedAt atomic.Pointer[time.Time]
		cctx = cdsclient.WithConnected(cctx, func() {
			now := f.now()
			connectedAt.Store(&now)
			if reconnect {
				// Events queued while disconnected were missed: poll once
				// the new connection is up (not before: a job queued
				// between that poll and the connection would wait for the
				// next period).
				wake(pollNow)
			}
		})
		ch := make(chan T)
		done := make(chan struct{})
		go func() { // joined below before the next connection
			defer close(done)
			for {
				select {
				case <-cctx.Done():
					return
				case id := <-ch:
					f.enqueue(cctx, toCandidate(id))
				}
			}
		}()
		err := subscribe(cctx, ch)
		cancel()
		<-done
		if ctx.Err() != nil {
			return
		}
		if at := connectedAt.Load(); at != nil && f.now().Sub(*at) >= f.iv.BackoffMin {
			b.reset()
		}
		d := b.next()
		reason := "connection closed"
		if err != nil {
			reason = err.Error()
		}
		f.log.Warn("queue events disconnected, reconnecting", "queue", name, logkey.Detail, reason, "retry_in", d)
		if !f.sleep(ctx, d) {
			return
		}
	}
}

// workerPoolLoop refreshes the worker pool snapshot every
// Intervals.WorkerPool, and when asked through poolNow (a spawn ended), at
// most once per Intervals.WorkerPoolMin. A failed refresh is retried with
// back-off (BackoffMin to BackoffMax) instead of waiting a whole period.
// A streak of failures logs one WARN, at its first failure; the retries and
// the recovery are DEBUG: a vCenter or CDS API outage is told by the lines
// of its client, not by a line per retry (docs/operations.md#when-vcenter-restarts).
// Run took the first snapshot (and logged its failure); firstErr is its
// outcome.
func (f *Framework) workerPoolLoop(ctx context.Context, firstErr error) {
	t := time.NewTicker(f.iv.WorkerPool)
	defer t.Stop()
	b := newBackoff(f.iv.BackoffMin, f.iv.BackoffMax)
	var retry <-chan time.Time
	if firstErr != nil {
		retry = time.After(b.next())
	}
	failing := firstErr != nil && !errors.Is(firstErr, ErrNotReady)
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-retry:
		case <-f.poolNow:
			if !sleepCtx(ctx, f.iv.WorkerPoolMin-time.Since(last)) {
				return
			}
		}
		last = time.Now()
		retry = nil
		err := f.refreshPool(ctx)
		switch {
		case err == nil:
			b.reset()
			if failing {
				f.log.Debug("worker pool refreshed again")
			}
			failing = false
		case ctx.Err() != nil:
			return
		case errors.Is(err, ErrNotReady):
			d := b.next()
			f.log.Info("worker pool waits for the hatchery to be ready", logkey.Err, err, "retry_in", d)
			retry = time.After(d)
		case failing:
			d := b.next()
			f.log.Debug("refresh worker pool failed again", logkey.Err, err, "retry_in", d)
			retry = time.After(d)
		default:
			failing = true
			d := b.next()
			f.log.Warn("refresh worker pool failed", logkey.Err, err, "retry_in", d)
			retry = time.After(d)
		}
	}
}
