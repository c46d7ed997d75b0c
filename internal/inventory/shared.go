package inventory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// Bounds of the shared inventory.
const (
	// defaultMinGap is the least time between two refreshes asked
	// by Invalidate: a burst of spawns, each writing to vCenter, costs one
	// listing per gap, not one per write.
	defaultMinGap = 2 * time.Second
	// staleFactor: a snapshot older than this many refresh
	// intervals is refused (an error, not stale data), so that no decision
	// — above all no deletion — is taken on what vCenter said long ago.
	staleFactor = 4
	// refreshGrace: while a refresh is running and the previous one did
	// not fail, the snapshot may be used this much longer than staleFactor
	// intervals, and no longer than this after the refresh started (two
	// 15 s request bounds). A slow vCenter, or a listing of thousands of
	// VMs during a burst of clones, is not an outage; a refresh that hangs
	// past it is treated as one.
	refreshGrace = 30 * time.Second
)

// MaxSnapshotAge is the oldest vCenter data a successful VMs call of a
// shared or watch inventory refreshed every interval may return: the
// staleness rule's limit (staleFactor intervals, plus refreshGrace while
// a refresh runs), plus the duration of the refresh that read it (at most
// refreshGrace). A VM that existed for longer than this before a VMs call
// that succeeded is in its answer (when in scope): what the worker pool's
// grace for a worker whose VM is not listed must exceed
// (docs/high-availability.md, "Deletions decided on a listing").
func MaxSnapshotAge(interval time.Duration) time.Duration {
	return staleFactor*interval + 2*refreshGrace
}

// ErrStale is returned when no refresh succeeded recently enough.
var ErrStale = errors.New("vm inventory is stale")

// Shared keeps one snapshot of the datacenter's VMs, built from the
// leaf properties of vim.VMProperties, refreshed by one owner (Run): every
// interval, and soon after Invalidate (coalesced, at most one refresh per
// MinGap). Readers get the last snapshot without a vCenter round trip; only
// the very first read waits for the first refresh. A reader must not rely on
// seeing its own write at once: local bookkeeping (pending jobs, reserved IPs,
// in-flight capacity, claimed and to-delete VMs) covers that window.
type Shared struct {
	client   Source
	interval time.Duration
	minGap   time.Duration
	log      *slog.Logger
	now      func() time.Time

	kick    chan struct{} // coalescing refresh signal, capacity 1
	ready   chan struct{} // closed after the first refresh attempt
	firstOK chan struct{} // closed after the first successful refresh

	mu       sync.RWMutex
	vms      []VM
	idx      *Index    // index of vms, built once per refresh
	lastOK   time.Time // time of the last successful refresh
	lastDone time.Time // time the last refresh attempt ended, successful or not
	lastErr  error     // error of the last refresh, nil when it succeeded
	// unanswered: the current streak of failed refreshes began with
	// vCenter not answering (vctypes.Unanswered): its end is DEBUG too.
	unanswered  bool
	generation  uint64 // successful refreshes so far
	refreshes   uint64 // refresh attempts so far
	readyClosed bool
	changed     chan struct{} // closed and replaced after every refresh attempt
	running     time.Time     // start of the refresh in flight; zero when none

	watch       *watchState // non-nil in watch mode (NewWatch)
	invalidated map[vctypes.Ref]bool
	poolRT      *vctypes.PoolRuntime // watch mode: the last probe's reading
	poolAt      time.Time
}

// NewShared builds the inventory; call Run to start refreshing.
// interval <= 0 means DefaultInventoryRefreshInterval; minGap <= 0 means
// defaultMinGap.
func NewShared(client Source, interval, minGap time.Duration, log *slog.Logger) *Shared {
	if interval <= 0 {
		interval = config.DefaultInventoryRefreshInterval * time.Second
	}
	if minGap <= 0 {
		minGap = defaultMinGap
	}
	if log == nil {
		log = slog.Default()
	}
	return &Shared{
		client:   client,
		interval: interval,
		minGap:   minGap,
		log:      log,
		now:      time.Now,
		kick:     make(chan struct{}, 1),
		ready:    make(chan struct{}),
		firstOK:  make(chan struct{}),
		changed:  make(chan struct{}),

		invalidated: map[vctypes.Ref]bool{},
	}
}

// Run refreshes the inventory at once, then every interval and after each
// Invalidate, until ctx ends. Exactly one Run may be active.
func (s *Shared) Run(ctx context.Context) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	var last time.Time
	for {
		if wait := s.minGap - s.now().Sub(last); !last.IsZero() && wait > 0 {
			// Invalidations keep coalescing into s.kick while we wait.
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		last = s.now()
		s.mu.Lock()
		s.running = last
		s.mu.Unlock()
		s.refresh(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.kick:
		}
	}
}

// refresh lists the datacenter once and swaps the snapshot (in watch mode:
// one incremental refresh, watchRefresh).
func (s *Shared) refresh(ctx context.Context) {
	if s.watch != nil {
		s.watchRefresh(ctx)
		return
	}
	s.takeInvalidated() // a listing reads every VM
	objs, err := s.client.ListVirtualMachines(ctx)
	var vms []VM
	var idx *Index
	if err == nil {
		vms = make([]VM, 0, len(objs))
		for _, o := range objs {
			vms = append(vms, VMFromInfo(o))
		}
		idx = newIndex(vms)
	}
	s.store(vms, idx, err)
}

// store records one refresh attempt: on success vms (indexed by idx)
// becomes the snapshot; on failure the last snapshot stays.
func (s *Shared) store(vms []VM, idx *Index, err error) {
	s.mu.Lock()
	s.refreshes++
	s.running = time.Time{}
	s.lastDone = s.now()
	switch {
	case errors.Is(err, context.Canceled):
		// Cut by the end of Run (the daemon stopping): no fault, and no
		// change to the streak of failures.
		s.log.Debug("vm inventory refresh cut by shutdown", logkey.Err, err)
	case err != nil:
		quiet := s.lastErr != nil && errors.Is(s.lastErr, vctypes.ErrNotConnected) && s.generation == 0
		switch {
		case s.generation == 0 && errors.Is(err, vctypes.ErrNotConnected):
			if s.lastErr == nil {
				// Starting before vCenter answers is no fault: the dialer
				// reports a vCenter that does not answer.
				s.log.Info("vm inventory waits for the first vcenter connection")
			}
		case s.lastErr != nil && !quiet:
			// Already reported in this streak of failures.
		case vctypes.Unanswered(err):
			// vCenter down: the vCenter client logs the outage's start
			// and end (docs/operations.md#when-vcenter-restarts); a
			// snapshot that grows stale meanwhile is refused with its
			// own error and shown on /mon/status.
			s.unanswered = true
			s.log.Debug("vm inventory refresh failed; keeping the last snapshot", logkey.Err, err)
		default:
			s.log.Warn("vm inventory refresh failed; keeping the last snapshot", logkey.Err, err)
		}
		s.lastErr = err
	default:
		if s.lastErr != nil {
			level := slog.LevelInfo
			if s.unanswered {
				level = slog.LevelDebug
			}
			s.log.Log(context.Background(), level, "vm inventory refresh recovered", "vms", len(vms))
		}
		s.unanswered = false
		s.vms, s.idx, s.lastErr, s.lastOK = vms, idx, nil, s.now()
		s.generation++
		if s.generation == 1 {
			close(s.firstOK)
		}
	}
	if !s.readyClosed {
		s.readyClosed = true
		close(s.ready)
	}
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// VMs returns the current snapshot. The first call waits for the first
// refresh (bounded by ctx). It fails when the last successful refresh is
// older than staleFactor intervals (vCenter unreachable).
func (s *Shared) VMs(ctx context.Context) ([]VM, error) {
	select {
	case <-s.ready:
	default:
		// Waits only before the first refresh: once it came, an ended
		// ctx does not fail a call the snapshot can answer.
		select {
		case <-s.ready:
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for first vm inventory: %w", ctx.Err())
		}
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.lastOK.IsZero() {
		return nil, fmt.Errorf("%w: no successful refresh yet: %v", ErrStale, s.lastErr)
	}
	if err := s.staleLocked(s.now()); err != nil {
		return nil, err
	}
	return s.vms, nil
}

// staleLocked is the staleness rule (staleFactor intervals, plus
// refreshGrace while a refresh runs): an error saying why when
// the last successful refresh is too old, else nil. s.mu is held.
func (s *Shared) staleLocked(now time.Time) error {
	limit := staleFactor * s.interval
	// The grace is for a slow refresh after a successful one, not for a
	// retry after a failure: during an outage each failed refresh is
	// followed by another (every interval, and at once after each
	// Invalidate), so a grace counted from the running one's start would
	// keep serving a snapshot of any age while one is in flight.
	inFlight := !s.running.IsZero() && now.Sub(s.running) <= refreshGrace && s.lastErr == nil
	if inFlight {
		limit += refreshGrace
	}
	if age := now.Sub(s.lastOK); age > limit {
		if s.lastErr != nil {
			// The refresh's error is wrapped: a reader tells vCenter not
			// answering (vctypes.Unanswered) from another failure.
			return fmt.Errorf("%w: last successful refresh %s ago (limit %s): last refresh failed: %w", ErrStale, age.Round(time.Second), limit, s.lastErr)
		}
		why := "no refresh running"
		if !s.running.IsZero() {
			why = fmt.Sprintf("refresh running for %s", now.Sub(s.running).Round(time.Second))
		}
		return fmt.Errorf("%w: last successful refresh %s ago (limit %s): %s", ErrStale, age.Round(time.Second), limit, why)
	}
	return nil
}

// indexOf returns the index of the current snapshot when vms is it.
func (s *Shared) indexOf(vms []VM) *Index {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.idx != nil && sameSnapshot(vms, s.vms) {
		return s.idx
	}
	return nil
}

// Synced is closed once a refresh has succeeded: loops that would only
// fail on an empty inventory wait for it.
func (s *Shared) Synced() <-chan struct{} { return s.firstOK }

// Invalidate asks for a refresh soon; many calls coalesce into one. The
// VMs named are read again by that refresh even when the watch reported
// no change of theirs (watch mode; a listing reads every VM anyway).
func (s *Shared) Invalidate(vms ...vctypes.Ref) {
	if len(vms) > 0 {
		s.mu.Lock()
		for _, r := range vms {
			s.invalidated[r] = true
		}
		s.mu.Unlock()
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// WaitRefresh blocks until a refresh attempt that started after the call
// has completed, or ctx ends; in watch mode, also the attempt after it,
// which reads the VMs that one found. Tests and the demo use it instead of
// sleeping.
func (s *Shared) WaitRefresh(ctx context.Context) error {
	s.mu.RLock()
	ch := s.changed
	s.mu.RUnlock()
	s.Invalidate()
	// The attempt in flight when we were called may have listed before our
	// caller's write: wait for the one after it too. In watch mode a new
	// VM is read one refresh after the probe finds it: one more.
	attempts := 2
	if s.watch != nil {
		attempts = 3
	}
	for i := 0; i < attempts; i++ {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		s.mu.RLock()
		ch = s.changed
		s.mu.RUnlock()
		if i < attempts-1 {
			s.Invalidate()
		}
	}
	return nil
}

// Stats describes the inventory for /mon/status and benchmarks.
type Stats struct {
	VMs        int
	Refreshes  uint64
	Generation uint64
	LastOK     time.Time
	// LastRefresh is when the last refresh attempt ended, successful or
	// not (the refresh loop is alive); zero before the first.
	LastRefresh time.Time
	LastErr     error
	// Stale is what readers get instead of the snapshot now (the
	// staleness rule), nil when they get it.
	Stale error
}

// Stats returns a copy of the inventory's counters.
func (s *Shared) Stats() Stats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st := Stats{VMs: len(s.vms), Refreshes: s.refreshes, Generation: s.generation, LastOK: s.lastOK, LastRefresh: s.lastDone, LastErr: s.lastErr}
	if !s.lastOK.IsZero() {
		st.Stale = s.staleLocked(s.now())
	}
	return st
}
