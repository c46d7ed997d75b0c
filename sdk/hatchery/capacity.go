package hatchery

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// Sources of a PoolWorker.
const (
	// PoolSourceAPI is a worker registered on the CDS API.
	PoolSourceAPI = "api"
	// PoolSourceHatchery is a worker the hatchery started that has not
	// registered yet.
	PoolSourceHatchery = "hatchery"
	// PoolSourceStarting is a spawn in flight (SpawnWorker not returned).
	PoolSourceStarting = "starting"
	// PoolSourceHeld is a VM of a failed spawn held for inspection.
	PoolSourceHeld = "held"
)

// PoolWorker is one worker of the pool, as /mon/workers shows
// it. It holds no secret.
type PoolWorker struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Source string `json:"source"`
	ID     string `json:"id,omitempty"`
	Model  string `json:"model,omitempty"`
	JobID  string `json:"job_id,omitempty"`
	// Reason is why a held VM is held (the failed spawn step); set only
	// for Source PoolSourceHeld.
	Reason string `json:"reason,omitempty"`
	// HeldUntil is when a held VM's hold expires; set only for Source
	// PoolSourceHeld.
	HeldUntil *time.Time `json:"held_until,omitempty"`
}

// StatusHeld is the /mon/workers status of a VM held for inspection.
const StatusHeld = "Held"

// HeldWorker is a VM of a failed spawn held for inspection (the debug
// hold, docs/design.md#debug-hold). It holds no secret.
type HeldWorker struct {
	Name   string
	Reason string
	Until  time.Time
}

// HeldLister is implemented by a hatchery that holds the VMs of failed
// spawns: /mon/workers lists them after the pool. They are not workers
// and are not counted in the pool (their VMs count in the hatchery's own
// capacity).
type HeldLister interface {
	HeldWorkers(ctx context.Context) []HeldWorker
}

// poolStatuses are the API statuses counted in the pool.
var poolStatuses = map[string]bool{
	sdk.StatusChecking: true, sdk.StatusWaiting: true, sdk.StatusBuilding: true,
	sdk.StatusPending: true, sdk.StatusRegistering: true,
}

// capacity is the admission state of the hatchery. The per-job decision is
// made in memory under mu from three sets: the last worker-pool snapshot
// (API workers and WorkersStarted, refreshed by the worker pool loop), the
// spawns in flight (reserved under mu before SpawnWorker) and the spawns
// ended since the snapshot was taken (kept until a snapshot started after
// their end is installed). mu is never held across a call that leaves the
// process: the refresh reads the API and the hatchery without it and
// installs the result under it.
type capacity struct {
	mu sync.Mutex
	// snapshot is the pool of the last successful refresh (API and
	// hatchery workers, no spawn in flight); known tells it exists.
	snapshot []PoolWorker
	known    bool
	// started counts refreshes started; installed is the sequence number
	// of the snapshot installed.
	started   uint64
	installed uint64
	// inFlight maps the names of spawns in flight to RegisterOnly.
	inFlight map[string]bool
	// ended maps the names of spawns that succeeded to the sequence number
	// of the last refresh started before they ended: they count in the pool
	// until a refresh started after them is installed.
	ended map[string]endedSpawn
	// toStart counts spawns in flight (nbWorkerToStart); registering
	// counts registrations in flight.
	toStart     int
	registering int
	// refreshes counts installed snapshots (tests and logs).
	refreshes uint64
	// capacitySkipped is set when a job was refused for capacity since
	// the last refresh: a refresh that finds room then wakes the polls.
	capacitySkipped bool

	disabledMu sync.Mutex
	disabled   map[string]bool // API worker ids already disabled
	// unknownSince is when each worker the API lists under this
	// hatchery's name, unknown to the hatchery, was first seen so
	// (guarded by disabledMu).
	unknownSince map[string]time.Time
}

// endedSpawn is a spawn that returned; it counts in the pool until a
// snapshot taken after it is installed.
type endedSpawn struct {
	seq      uint64
	register bool
}

func (c *capacity) init() {
	c.inFlight = map[string]bool{}
	c.ended = map[string]endedSpawn{}
	c.disabled = map[string]bool{}
	c.unknownSince = map[string]time.Time{}
}

// localNames returns the names of the spawns in flight or ended since the
// snapshot: workers the hatchery knows even if neither the API nor
// WorkersStarted shows them yet. The caller holds c.mu.
func (c *capacity) localNamesLocked() map[string]bool {
	m := make(map[string]bool, len(c.inFlight)+len(c.ended))
	for k, v := range c.inFlight {
		m[k] = v
	}
	for k, e := range c.ended {
		m[k] = e.register
	}
	return m
}

// poolLocked is the current pool: the snapshot, then the spawns ended
// since, then the spawns in flight. The caller holds c.mu.
func (c *capacity) poolLocked() []PoolWorker {
	pool := make([]PoolWorker, 0, len(c.snapshot)+len(c.ended)+len(c.inFlight))
	inPool := make(map[string]bool, cap(pool))
	for _, w := range c.snapshot {
		pool = append(pool, w)
		inPool[w.Name] = true
	}
	add := func(names map[string]bool, source string) {
		sorted := make([]string, 0, len(names))
		for n := range names {
			if !inPool[n] {
				sorted = append(sorted, n)
			}
		}
		sort.Strings(sorted)
		for _, n := range sorted {
			st := sdk.StatusPending
			if names[n] {
				st = sdk.StatusRegistering
			}
			pool = append(pool, PoolWorker{Name: n, Status: st, Source: source})
			inPool[n] = true
		}
	}
	ended := make(map[string]bool, len(c.ended))
	for n, e := range c.ended {
		ended[n] = e.register
	}
	add(ended, PoolSourceHatchery)
	add(c.inFlight, PoolSourceStarting)
	return pool
}

// Pool returns the current worker pool (for /mon/workers and the status):
// the last snapshot plus the spawns the snapshot does not show yet. It
// makes no network call.
func (f *Framework) Pool() []PoolWorker {
	f.cap.mu.Lock()
	defer f.cap.mu.Unlock()
	return f.cap.poolLocked()
}

// PoolRefreshes is the number of worker pool snapshots taken so far (each
// one lists the API workers once and asks WorkersStarted once).
func (f *Framework) PoolRefreshes() uint64 {
	f.cap.mu.Lock()
	defer f.cap.mu.Unlock()
	return f.cap.refreshes
}

// ownWorker tells whether an API worker belongs to this hatchery; an empty
// hatchery name (an API that does not say) counts as ours for capacity.
func (f *Framework) ownWorker(hatcheryName string) bool {
	return hatcheryName == "" || hatcheryName == f.cfg.Name
}

// refreshPool takes a new snapshot of the worker pool and installs it: API
// workers of this hatchery in an active status, plus started workers not
// registered yet (Pending, or Registering for "register-" names). A V1
// worker registered with this hatchery's name but unknown to the hatchery
// (neither started nor spawning) for UnknownWorkerGrace is disabled (a
// V2 one is logged); within the grace it is taken for another instance's
// worker not listed yet (unknownLong). No lock is held
// during the calls. Only the worker pool loop (and Run, before the loops)
// calls it, so refreshes never overlap.
func (f *Framework) refreshPool(ctx context.Context) error {
	// The spawns known locally are read before the hatchery and the API
	// are asked, so a spawn ending meanwhile is seen by one of them, and
	// the refresh's sequence number tells which ended spawns it covers.
	f.cap.mu.Lock()
	f.cap.started++
	seq := f.cap.started
	local := f.cap.localNamesLocked()
	f.cap.mu.Unlock()

	// The API first, the hatchery second: a worker registered at the time
	// of the API answer has its VM already, so the hatchery's answer shows
	// it and it is not mistaken for an inconsistent one.
	var v1Workers []sdk.Worker
	var v2Workers []sdk.V2Worker
	var err error
	if f.cfg.API.Token != "" {
		if v1Workers, err = f.client.WorkerList(ctx); err != nil {
			return fmt.Errorf("list v1 workers: %w", err)
		}
	}
	if f.cfg.API.TokenV2 != "" {
		if v2Workers, err = f.client.V2WorkerList(ctx); err != nil {
			return fmt.Errorf("list v2 workers: %w", err)
		}
	}
	startedList, err := f.h.WorkersStarted(ctx)
	if err != nil {
		return fmt.Errorf("list started workers: %w", err)
	}
	started := make(map[string]bool, len(startedList))
	for _, n := range startedList {
		started[n] = true
	}
	pool := make([]PoolWorker, 0, len(startedList))
	inPool := map[string]bool{}
	var seenIDs []string
	now := f.now()
	unknown := map[string]bool{}

	if f.cfg.API.Token != "" {
		for _, w := range v1Workers {
			if !poolStatuses[w.Status] || !f.ownWorker(w.HatcheryName) || inPool[w.Name] {
				continue
			}
			seenIDs = append(seenIDs, w.ID)
			if w.HatcheryName == f.cfg.Name && !started[w.Name] && !hasKey(local, w.Name) {
				unknown[w.Name] = true
				if f.unknownLong(w.Name, now) {
					f.disableInconsistent(ctx, w)
				}
				continue
			}
			jobID := ""
			if w.JobRunID != nil {
				jobID = fmt.Sprint(*w.JobRunID)
			}
			pool = append(pool, PoolWorker{Name: w.Name, Status: w.Status, Source: PoolSourceAPI, ID: w.ID, JobID: jobID})
			inPool[w.Name] = true
		}
	}
	if f.cfg.API.TokenV2 != "" {
		for _, w := range v2Workers {
			if !poolStatuses[w.Status] || !f.ownWorker(w.HatcheryName) || inPool[w.Name] {
				continue
			}
			if w.HatcheryName == f.cfg.Name && !started[w.Name] && !hasKey(local, w.Name) {
				// V2 has no disable route: leave it out of the pool.
				unknown[w.Name] = true
				if f.unknownLong(w.Name, now) {
					f.log.Warn("v2 worker registered but not started by this hatchery", logkey.VM, w.Name, logkey.Detail, "inconsistent")
				}
				continue
			}
			pool = append(pool, PoolWorker{Name: w.Name, Status: w.Status, Source: PoolSourceAPI, ID: w.ID, Model: w.ModelName, JobID: w.JobRunID})
			inPool[w.Name] = true
		}
	}
	for _, n := range startedList {
		if inPool[n] {
			continue
		}
		st := sdk.StatusPending
		if strings.HasPrefix(n, RegisterPrefix) {
			st = sdk.StatusRegistering
		}
		pool = append(pool, PoolWorker{Name: n, Status: st, Source: PoolSourceHatchery})
		inPool[n] = true
	}

	f.cap.disabledMu.Lock()
	for n := range f.cap.unknownSince {
		if !unknown[n] {
			delete(f.cap.unknownSince, n) // known now, or gone from the API
		}
	}
	f.cap.disabledMu.Unlock()
	if f.cfg.API.Token != "" {
		f.cap.disabledMu.Lock()
		keep := make(map[string]bool, len(seenIDs))
		for _, id := range seenIDs {
			if f.cap.disabled[id] {
				keep[id] = true
			}
		}
		f.cap.disabled = keep
		f.cap.disabledMu.Unlock()
	}

	f.cap.mu.Lock()
	if seq <= f.cap.installed {
		f.cap.mu.Unlock()
		return nil // a later refresh was installed already
	}
	f.cap.snapshot, f.cap.known, f.cap.installed = pool, true, seq
	f.cap.refreshes++
	// Spawns that ended before this refresh started are in its answers
	// (or gone): they no longer need counting apart.
	for n, e := range f.cap.ended {
		if e.seq < seq {
			delete(f.cap.ended, n)
		}
	}
	room := f.roomLocked()
	wakePolls := f.cap.capacitySkipped && room
	if wakePolls {
		f.cap.capacitySkipped = false
	}
	f.cap.mu.Unlock()
	if wakePolls {
		// Jobs were refused for capacity and there is room now: look at
		// the queue again instead of waiting for the next poll.
		wake(f.pollV1Now)
		wake(f.pollV2Now)
	}
	return nil
}

// roomLocked tells whether one more job worker would be admitted now, as
// far as counts go. The caller holds f.cap.mu.
func (f *Framework) roomLocked() bool {
	_, r := f.decideLocked(false)
	return r == nil
}

func hasKey(m map[string]bool, k string) bool { _, ok := m[k]; return ok }

// unknownLong tells whether the worker name, registered under this
// hatchery's name and unknown to it, has been so for UnknownWorkerGrace:
// until then it is taken for a worker of another instance of the same
// hatchery name (or one started just now) that the hatchery's listing does
// not show yet, and logged once at debug level.
func (f *Framework) unknownLong(name string, now time.Time) bool {
	f.cap.disabledMu.Lock()
	since, ok := f.cap.unknownSince[name]
	if !ok {
		f.cap.unknownSince[name] = now
	}
	f.cap.disabledMu.Unlock()
	if !ok {
		f.log.Debug("worker registered under this hatchery's name, its VM not listed yet", logkey.VM, name, logkey.Detail, "another instance's or just started")
		return false
	}
	return now.Sub(since) >= f.iv.UnknownWorkerGrace
}

// disableInconsistent disables a V1 worker the API says is this hatchery's
// but the hatchery does not know, once.
func (f *Framework) disableInconsistent(ctx context.Context, w sdk.Worker) {
	f.cap.disabledMu.Lock()
	done := f.cap.disabled[w.ID]
	f.cap.disabled[w.ID] = true
	f.cap.disabledMu.Unlock()
	if done {
		return
	}
	f.log.Warn("disabling worker registered but not started by this hatchery", logkey.VM, w.Name, logkey.Detail, "inconsistent")
	if err := f.client.WorkerDisable(ctx, w.ID); err != nil {
		f.cap.disabledMu.Lock()
		delete(f.cap.disabled, w.ID)
		f.cap.disabledMu.Unlock()
		f.log.Warn("disable inconsistent worker failed", logkey.VM, w.Name, logkey.Err, err)
	}
}

// slot is a capacity reservation for one spawn. Call spawned when
// SpawnWorker succeeded, then release (or release alone after a failure);
// extra calls do nothing.
type slot struct {
	f        *Framework
	name     string
	register bool
	once     sync.Once
}

// spawned ends the reservation of a spawn that succeeded: the provisioning
// slot frees at once, and the worker keeps counting in the pool until a
// snapshot taken after now is installed. It wakes the worker pool loop.
func (s *slot) spawned() { s.end(true) }

// release ends the reservation of a spawn that did not happen or failed.
func (s *slot) release() { s.end(false) }

func (s *slot) end(ok bool) {
	s.once.Do(func() {
		c := &s.f.cap
		c.mu.Lock()
		delete(c.inFlight, s.name)
		if s.register {
			c.registering--
		} else {
			c.toStart--
		}
		if ok {
			c.ended[s.name] = endedSpawn{seq: c.started, register: s.register}
		}
		c.mu.Unlock()
		wake(s.f.poolNow)
	})
}

// decideLocked is the count part of checkCapacities on the
// current pool: nil when one more worker (a registration when register)
// fits, else why not. The caller holds f.cap.mu.
func (f *Framework) decideLocked(register bool) (pool int, refusal *Refusal) {
	c := &f.cap
	p := f.cfg.Provision
	maxProv := max(p.MaxConcurrentProvisioning, 1)
	maxReg := p.MaxConcurrentRegistering
	if register {
		if maxReg == -1 {
			return 0, Refuse(ReasonMaxRegistering, "registration disabled (maxConcurrentRegistering = -1)")
		}
		if c.registering >= maxReg {
			return 0, Refuse(ReasonMaxRegistering, "max concurrent registering reached (%d)", maxReg)
		}
	} else if c.toStart >= maxProv {
		return 0, Refuse(ReasonMaxProvisioning, "max concurrent provisioning reached (%d spawns in flight)", maxProv)
	}
	if !c.known {
		return 0, Refuse(ReasonPoolUnknown, "worker pool not known yet")
	}
	all := c.poolLocked()
	var nbPending, nbRegistering int
	for _, w := range all {
		switch w.Status {
		case sdk.StatusPending:
			nbPending++
		case sdk.StatusRegistering:
			nbRegistering++
		}
	}
	switch {
	case p.MaxWorker > 0 && len(all) >= p.MaxWorker:
		return len(all), Refuse(ReasonMaxWorkers, "max workers reached (%d/%d)", len(all), p.MaxWorker)
	case !register && nbPending >= maxProv:
		return len(all), Refuse(ReasonMaxProvisioning, "max concurrent provisioning reached (%d pending)", nbPending)
	case register && nbRegistering >= maxReg:
		return len(all), Refuse(ReasonMaxRegistering, "max concurrent registering reached (%d registering)", nbRegistering)
	}
	return len(all), nil
}

// reserve is checkCapacities: it admits one more worker named
// name, or says why not. It decides in memory from the last worker pool
// snapshot and the spawns the framework knows, under one mutex, so
// concurrent starters cannot both take the last slot; it makes no network
// call. The slot counts in the pool as Pending (or Registering) until
// released, or, once spawned, until a later snapshot covers it.
func (f *Framework) reserve(name string, register bool) (*slot, *Refusal) {
	full := false
	defer func() { // after the unlock: observers are not called under c.mu
		if ho, ok := f.obs.(HealthObserver); ok && full {
			ho.MaxWorkersReached()
		}
	}()
	c := &f.cap
	c.mu.Lock()
	defer c.mu.Unlock()
	if pool, r := f.decideLocked(register); r != nil {
		if !register {
			c.capacitySkipped = true
			full = f.cfg.Provision.MaxWorker > 0 && pool >= f.cfg.Provision.MaxWorker
		}
		return nil, r
	}
	c.inFlight[name] = register
	if register {
		c.registering++
	} else {
		c.toStart++
	}
	return &slot{f: f, name: name, register: register}, nil
}

// spawnsInFlight is the number of job spawns in flight.
func (f *Framework) spawnsInFlight() int {
	f.cap.mu.Lock()
	defer f.cap.mu.Unlock()
	return f.cap.toStart
}
