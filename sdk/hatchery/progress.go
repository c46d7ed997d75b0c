package hatchery

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// loopProgress records when the job loops last moved, for a supervisor
// that must tell a stuck framework from a quiet one (the systemd watchdog
// of internal/daemon): the starters (jobs taken and ended) and the queue
// polls (passes ended). Lock-free: written on every job and poll.
type loopProgress struct {
	signedIn     chan struct{}
	signedInOnce sync.Once
	// starters is the number of starters running (0 before sign-in); busy
	// those processing a job.
	starters, busy atomic.Int32
	// moved is when a starter last took or ended a job; polled when a
	// queue poll last ended or a poll loop started (0: no poll loop).
	// Unix nanoseconds.
	moved, polled atomic.Int64
}

func newLoopProgress() loopProgress {
	return loopProgress{signedIn: make(chan struct{})}
}

// signIn records the first sign-in.
func (p *loopProgress) signIn() { p.signedInOnce.Do(func() { close(p.signedIn) }) }

// take records a starter taking a job at now.
func (p *loopProgress) take(now time.Time) {
	p.busy.Add(1)
	p.moved.Store(now.UnixNano())
}

// end records a starter ending its job at now.
func (p *loopProgress) end(now time.Time) {
	p.busy.Add(-1)
	p.moved.Store(now.UnixNano())
}

// pollPass wraps a queue poll pass: the loop's start and each pass's end
// count as progress.
func (f *Framework) pollPass(fn func(context.Context)) func(context.Context) {
	f.progress.polled.CompareAndSwap(0, f.now().UnixNano())
	return func(ctx context.Context) {
		fn(ctx)
		f.progress.polled.Store(f.now().UnixNano())
	}
}

// SignedIn is closed once the framework signed in to the CDS API for the
// first time (its job loops start then).
func (f *Framework) SignedIn() <-chan struct{} { return f.progress.signedIn }

// LoopProgress tells when the framework's job loops last moved, for a
// watchdog. spawn is now while a starter waits for a job (the loop takes
// work), else the last time a starter took or ended one: every starter
// has been busy since, and a time long past means they are stuck. queue is
// when a poll of the queue last ended (or its loop started), zero when no
// poll loop runs (a V2 queue read from websocket events only). Both are
// zero before the first sign-in.
func (f *Framework) LoopProgress(now time.Time) (spawn, queue time.Time) {
	p := &f.progress
	if n := p.starters.Load(); n > 0 {
		if p.busy.Load() < n {
			spawn = now
		} else {
			spawn = time.Unix(0, p.moved.Load())
		}
	}
	if q := p.polled.Load(); q != 0 {
		queue = time.Unix(0, q)
	}
	return spawn, queue
}
