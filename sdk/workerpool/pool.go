package workerpool

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
)

// RegisterPrefix starts the name of a worker that only registers a model:
// such a worker counts as Registering, not Pending.
const RegisterPrefix = "register-"

// Sources of a Worker.
const (
	// SourceAPI is a worker registered on the CDS API.
	SourceAPI = "api"
	// SourceHatchery is a worker the hatchery started that has not
	// registered yet.
	SourceHatchery = "hatchery"
	// SourceStarting is a spawn in flight (SpawnWorker not returned).
	SourceStarting = "starting"
	// SourceHeld is a VM of a failed spawn held for inspection.
	SourceHeld = "held"
)

// Worker is one worker of the pool, as /mon/workers shows it. It holds no
// secret.
type Worker struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Source string `json:"source"`
	ID     string `json:"id,omitempty"`
	Model  string `json:"model,omitempty"`
	JobID  string `json:"job_id,omitempty"`
	// Reason is why a held VM is held (the failed spawn step); set only
	// for Source SourceHeld.
	Reason string `json:"reason,omitempty"`
	// HeldUntil is when a held VM's hold expires; set only for Source
	// SourceHeld.
	HeldUntil *time.Time `json:"held_until,omitempty"`
}

// poolStatuses are the API statuses counted in the pool.
var poolStatuses = map[string]bool{
	sdk.StatusChecking: true, sdk.StatusWaiting: true, sdk.StatusBuilding: true,
	sdk.StatusPending: true, sdk.StatusRegistering: true,
}

// Limits are the counts the pool is held to (the provision section of the
// common configuration).
type Limits struct {
	// MaxWorker caps the workers in the pool; 0 is unlimited.
	MaxWorker int
	// MaxConcurrentProvisioning caps the job spawns in flight and the
	// workers still Pending; below 1 counts as 1.
	MaxConcurrentProvisioning int
	// MaxConcurrentRegistering caps the registrations in flight and the
	// workers still Registering; -1 refuses every registration.
	MaxConcurrentRegistering int
}

// API is the part of the CDS API the pool reads and writes.
type API interface {
	// WorkerList lists the V1 workers.
	WorkerList(ctx context.Context) ([]sdk.Worker, error)
	// V2WorkerList lists the V2 workers.
	V2WorkerList(ctx context.Context) ([]sdk.V2Worker, error)
	// WorkerDisable disables a V1 worker.
	WorkerDisable(ctx context.Context, id string) error
}

// Config is what New needs.
type Config struct {
	// HatcheryName is this hatchery's name: the API workers of that name
	// (or of no name) are its own.
	HatcheryName string
	// V1 and V2 tell which API worker lists are read (the hatchery signed
	// in with a V1 or V2 token).
	V1, V2 bool
	// Limits are the counts admission checks.
	Limits Limits
	// API reaches the CDS API.
	API API
	// Started returns the names of the workers the hatchery started and
	// has not destroyed yet (the hatchery's WorkersStarted).
	Started func(ctx context.Context) ([]string, error)
	// SpawnEnded is called, without any lock held, when a reservation
	// ends: the owner asks for a refresh soon. Nil does nothing.
	SpawnEnded func()
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
	// UnknownGrace is how long a worker the API lists under this
	// hatchery's name may stay unknown to the hatchery (not started by it,
	// no spawn of its in flight) before Refresh calls it inconsistent (V1:
	// disabled; V2: logged). Another instance of the same hatchery name
	// starts workers whose VMs this one lists only at its next inventory
	// update. 0: inconsistent at first sight.
	UnknownGrace time.Duration
}

// Pool is the admission state of the hatchery. The per-job decision is
// made in memory under mu from three sets: the last worker-pool snapshot
// (API workers and the hatchery's started workers, taken by Refresh), the
// spawns in flight (reserved under mu before the spawn) and the spawns
// ended since the snapshot was taken (kept until a snapshot started after
// their end is installed). mu is never held across a call that leaves the
// process: Refresh reads the API and the hatchery without it and installs
// the result under it.
type Pool struct {
	cfg Config
	log *slog.Logger

	mu sync.Mutex
	// snapshot is the pool of the last successful refresh (API and
	// hatchery workers, no spawn in flight); known tells it exists.
	snapshot []Worker
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
	// toStart counts job spawns in flight; registering counts
	// registrations in flight.
	toStart     int
	registering int
	// refreshes counts installed snapshots (tests and logs).
	refreshes uint64
	// capacitySkipped is set when a job was refused since the last
	// refresh: a refresh that finds room then tells its caller.
	capacitySkipped bool

	disabledMu sync.Mutex
	disabled   map[string]bool // API worker ids already disabled
	// unknownSince is when each worker the API lists under this
	// hatchery's name, unknown to the hatchery, was first seen so
	// (guarded by disabledMu).
	unknownSince map[string]time.Time
	// v2Reported holds the V2 workers already reported inconsistent:
	// V2 has no disable route, so the report is the one act, made once
	// per worker like a V1 worker's disable (guarded by disabledMu).
	v2Reported map[string]bool
	// lastStarted is the hatchery's started list of the last refresh and
	// gone the names it held that a later one no longer held (their VMs
	// destroyed): a worker the API still lists under such a name is this
	// hatchery's own worker that died without signing off, not a worker
	// someone else started under its name (guarded by disabledMu).
	lastStarted map[string]bool
	gone        map[string]bool
}

// endedSpawn is a spawn that returned; it counts in the pool until a
// snapshot taken after it is installed.
type endedSpawn struct {
	seq      uint64
	register bool
}

// New returns an empty pool: every job is refused (refusal.ReasonPoolUnknown)
// until the first Refresh succeeds.
func New(cfg Config) *Pool {
	p := &Pool{
		cfg:      cfg,
		log:      cfg.Logger,
		inFlight: map[string]bool{},
		ended:    map[string]endedSpawn{},
		disabled: map[string]bool{},

		unknownSince: map[string]time.Time{},
		v2Reported:   map[string]bool{},
		lastStarted:  map[string]bool{},
		gone:         map[string]bool{},
	}
	if p.log == nil {
		p.log = slog.Default()
	}
	if p.cfg.Now == nil {
		p.cfg.Now = time.Now
	}
	return p
}

// localNamesLocked returns the names of the spawns in flight or ended
// since the snapshot: workers the hatchery knows even if neither the API
// nor the started list shows them yet. The caller holds p.mu.
func (p *Pool) localNamesLocked() map[string]bool {
	m := make(map[string]bool, len(p.inFlight)+len(p.ended))
	for k, v := range p.inFlight {
		m[k] = v
	}
	for k, e := range p.ended {
		m[k] = e.register
	}
	return m
}

// workersLocked is the current pool: the snapshot, then the spawns ended
// since, then the spawns in flight. The caller holds p.mu.
func (p *Pool) workersLocked() []Worker {
	pool := make([]Worker, 0, len(p.snapshot)+len(p.ended)+len(p.inFlight))
	inPool := make(map[string]bool, cap(pool))
	for _, w := range p.snapshot {
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
			pool = append(pool, Worker{Name: n, Status: st, Source: source})
			inPool[n] = true
		}
	}
	ended := make(map[string]bool, len(p.ended))
	for n, e := range p.ended {
		ended[n] = e.register
	}
	add(ended, SourceHatchery)
	add(p.inFlight, SourceStarting)
	return pool
}

// Workers returns the current worker pool (for /mon/workers and the
// status): the last snapshot plus the spawns the snapshot does not show
// yet. It makes no network call.
func (p *Pool) Workers() []Worker {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.workersLocked()
}

// Refreshes is the number of snapshots installed so far (each one lists
// the API workers once and asks Started once).
func (p *Pool) Refreshes() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refreshes
}

// own tells whether an API worker belongs to this hatchery; an empty
// hatchery name (an API that does not say) counts as ours for capacity.
func (p *Pool) own(hatcheryName string) bool {
	return hatcheryName == "" || hatcheryName == p.cfg.HatcheryName
}

// forgetKnown ends, after a refresh, what Refresh remembers of the
// workers it found unknown: those no longer unknown (known now, or gone
// from the API) are forgotten, and of the V1 workers it disabled only
// those the API still lists (seenIDs) are remembered.
func (p *Pool) forgetKnown(unknown map[string]bool, seenIDs []string) {
	p.disabledMu.Lock()
	defer p.disabledMu.Unlock()
	for n := range p.unknownSince {
		if !unknown[n] {
			delete(p.unknownSince, n) // known now, or gone from the API
		}
	}
	for n := range p.v2Reported {
		if !unknown[n] {
			delete(p.v2Reported, n)
		}
	}
	for n := range p.gone {
		if !unknown[n] {
			delete(p.gone, n) // the API forgot it, or its name is listed again
		}
	}
	if p.cfg.V1 {
		keep := make(map[string]bool, len(seenIDs))
		for _, id := range seenIDs {
			if p.disabled[id] {
				keep[id] = true
			}
		}
		p.disabled = keep
	}
}

// Refresh takes a new snapshot of the worker pool and installs it: API
// workers of this hatchery in an active status, plus started workers not
// registered yet (Pending, or Registering for RegisterPrefix names). A V1
// worker registered with this hatchery's name but unknown to the hatchery
// (neither started nor spawning) for UnknownGrace is disabled (a V2 one is
// logged); within the grace it is taken for another instance's worker not
// listed yet (unknownLong). No lock is held during the
// calls. Its owner calls it from one goroutine at a time, so refreshes
// never overlap. room is true when jobs were refused since the last
// refresh and one more job worker fits now: the owner looks at the queue
// again instead of waiting for its next poll.
func (p *Pool) Refresh(ctx context.Context) (room bool, err error) {
	// The spawns known locally are read before the hatchery and the API
	// are asked, so a spawn ending meanwhile is seen by one of them, and
	// the refresh's sequence number tells which ended spawns it covers.
	p.mu.Lock()
	p.started++
	seq := p.started
	local := p.localNamesLocked()
	p.mu.Unlock()

	// The API first, the hatchery second: a worker registered at the time
	// of the API answer has its VM already, so the hatchery's answer shows
	// it and it is not mistaken for an inconsistent one.
	var v1Workers []sdk.Worker
	var v2Workers []sdk.V2Worker
	if p.cfg.V1 {
		if v1Workers, err = p.cfg.API.WorkerList(ctx); err != nil {
			return false, fmt.Errorf("list v1 workers: %w", err)
		}
	}
	if p.cfg.V2 {
		if v2Workers, err = p.cfg.API.V2WorkerList(ctx); err != nil {
			return false, fmt.Errorf("list v2 workers: %w", err)
		}
	}
	startedList, err := p.cfg.Started(ctx)
	if err != nil {
		return false, fmt.Errorf("list started workers: %w", err)
	}
	started := make(map[string]bool, len(startedList))
	for _, n := range startedList {
		started[n] = true
	}
	p.noteStarted(started)
	pool := make([]Worker, 0, len(startedList))
	inPool := map[string]bool{}
	var seenIDs []string
	now := p.cfg.Now()
	unknown := map[string]bool{}

	if p.cfg.V1 {
		for _, w := range v1Workers {
			if !poolStatuses[w.Status] || !p.own(w.HatcheryName) || inPool[w.Name] {
				continue
			}
			seenIDs = append(seenIDs, w.ID)
			if w.HatcheryName == p.cfg.HatcheryName && !started[w.Name] && !hasKey(local, w.Name) {
				unknown[w.Name] = true
				if p.unknownLong(w.Name, now) {
					p.disableInconsistent(ctx, w)
				}
				continue
			}
			jobID := ""
			if w.JobRunID != nil {
				jobID = fmt.Sprint(*w.JobRunID)
			}
			pool = append(pool, Worker{Name: w.Name, Status: w.Status, Source: SourceAPI, ID: w.ID, JobID: jobID})
			inPool[w.Name] = true
		}
	}
	if p.cfg.V2 {
		for _, w := range v2Workers {
			if !poolStatuses[w.Status] || !p.own(w.HatcheryName) || inPool[w.Name] {
				continue
			}
			if w.HatcheryName == p.cfg.HatcheryName && !started[w.Name] && !hasKey(local, w.Name) {
				// V2 has no disable route: leave it out of the pool,
				// and say so once.
				unknown[w.Name] = true
				if p.unknownLong(w.Name, now) {
					p.reportV2Inconsistent(w.Name)
				}
				continue
			}
			pool = append(pool, Worker{Name: w.Name, Status: w.Status, Source: SourceAPI, ID: w.ID, Model: w.ModelName, JobID: w.JobRunID})
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
		pool = append(pool, Worker{Name: n, Status: st, Source: SourceHatchery})
		inPool[n] = true
	}

	p.forgetKnown(unknown, seenIDs)

	p.mu.Lock()
	defer p.mu.Unlock()
	if seq <= p.installed {
		return false, nil // a later refresh was installed already
	}
	p.snapshot, p.known, p.installed = pool, true, seq
	p.refreshes++
	// Spawns that ended before this refresh started are in its answers
	// (or gone): they no longer need counting apart.
	for n, e := range p.ended {
		if e.seq < seq {
			delete(p.ended, n)
		}
	}
	_, r := p.decideLocked(false)
	room = p.capacitySkipped && r == nil
	if room {
		p.capacitySkipped = false
	}
	return room, nil
}

func hasKey(m map[string]bool, k string) bool { _, ok := m[k]; return ok }

// unknownLong tells whether the worker name, registered under this
// hatchery's name and unknown to it, has been so for UnknownGrace: until
// then it is taken for a worker of another instance of the same hatchery
// name (or one started just now) that the hatchery's listing does not show
// yet, and logged once at debug level.
func (p *Pool) unknownLong(name string, now time.Time) bool {
	if p.cfg.UnknownGrace <= 0 {
		return true
	}
	p.disabledMu.Lock()
	since, ok := p.unknownSince[name]
	if !ok {
		p.unknownSince[name] = now
	}
	p.disabledMu.Unlock()
	if !ok {
		p.log.Debug("worker registered under this hatchery's name, its VM not listed yet", logkey.VM, name, logkey.Detail, "another instance's or just started")
		return false
	}
	return now.Sub(since) >= p.cfg.UnknownGrace
}

// noteStarted records the hatchery's started list of this refresh: the
// names the last one held and this one does not are gone (their VMs were
// destroyed; see inconsistentLevel).
func (p *Pool) noteStarted(started map[string]bool) {
	p.disabledMu.Lock()
	defer p.disabledMu.Unlock()
	for n := range p.lastStarted {
		if !started[n] {
			p.gone[n] = true
		}
	}
	for n := range started {
		delete(p.gone, n)
	}
	p.lastStarted = started
}

// inconsistentLevel is the level an inconsistent worker is reported at,
// once: Info for a worker whose VM this hatchery listed before (its own,
// or another instance's of the same name, destroyed after its job while
// the worker did not sign off: the API lists it until its heartbeat
// lapses, an everyday event), Warn for a worker whose VM it never listed
// (someone else registers workers under this hatchery's name).
func (p *Pool) inconsistentLevel(name string) slog.Level {
	p.disabledMu.Lock()
	defer p.disabledMu.Unlock()
	if p.gone[name] {
		return slog.LevelInfo
	}
	return slog.LevelWarn
}

// reportV2Inconsistent reports a V2 worker the API says is this
// hatchery's but the hatchery does not know: once at inconsistentLevel
// while the API lists it, at Debug at the refreshes after (the V1 path
// disables such a worker once; V2 has no disable route, so the report is
// all there is to do).
func (p *Pool) reportV2Inconsistent(name string) {
	p.disabledMu.Lock()
	done := p.v2Reported[name]
	p.v2Reported[name] = true
	p.disabledMu.Unlock()
	if done {
		p.log.Debug("v2 worker registered but not started by this hatchery, still listed", logkey.VM, name, logkey.Detail, "inconsistent")
		return
	}
	p.log.Log(context.Background(), p.inconsistentLevel(name), "v2 worker registered but not started by this hatchery", logkey.VM, name, logkey.Detail, "inconsistent")
}

// disableInconsistent disables a V1 worker the API says is this hatchery's
// but the hatchery does not know, once (at inconsistentLevel).
func (p *Pool) disableInconsistent(ctx context.Context, w sdk.Worker) {
	p.disabledMu.Lock()
	done := p.disabled[w.ID]
	p.disabled[w.ID] = true
	p.disabledMu.Unlock()
	if done {
		return
	}
	p.log.Log(ctx, p.inconsistentLevel(w.Name), "disabling worker registered but not started by this hatchery", logkey.VM, w.Name, logkey.Detail, "inconsistent")
	if err := p.cfg.API.WorkerDisable(ctx, w.ID); err != nil {
		p.disabledMu.Lock()
		delete(p.disabled, w.ID)
		p.disabledMu.Unlock()
		p.log.Warn("disable inconsistent worker failed", logkey.VM, w.Name, logkey.Err, err)
	}
}

// Slot is a reservation for one spawn. Call Spawned when the spawn
// succeeded, or Release after a failure or when it did not happen; calls
// after the first do nothing.
type Slot struct {
	p        *Pool
	name     string
	register bool
	once     sync.Once
}

// Spawned ends the reservation of a spawn that succeeded: the provisioning
// slot frees at once, and the worker keeps counting in the pool until a
// snapshot taken after now is installed.
func (s *Slot) Spawned() { s.end(true) }

// Release ends the reservation of a spawn that did not happen or failed.
func (s *Slot) Release() { s.end(false) }

func (s *Slot) end(ok bool) {
	s.once.Do(func() {
		p := s.p
		p.mu.Lock()
		delete(p.inFlight, s.name)
		if s.register {
			p.registering--
		} else {
			p.toStart--
		}
		if ok {
			p.ended[s.name] = endedSpawn{seq: p.started, register: s.register}
		}
		p.mu.Unlock()
		if p.cfg.SpawnEnded != nil {
			p.cfg.SpawnEnded()
		}
	})
}

// Limits returns the limits the pool holds its workers to now.
func (p *Pool) Limits() Limits {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg.Limits
}

// SetMaxWorker makes n the cap on the workers in the pool (a reload); 0
// is unlimited. The next Reserve decides with it; slots already taken
// stay.
func (p *Pool) SetMaxWorker(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cfg.Limits.MaxWorker = n
}

// decideLocked is the count check on the current pool: nil when one more
// worker (a registration when register) fits, else why not. The caller
// holds p.mu.
func (p *Pool) decideLocked(register bool) (pool int, refused *refusal.Refusal) {
	l := p.cfg.Limits
	maxProv := max(l.MaxConcurrentProvisioning, 1)
	maxReg := l.MaxConcurrentRegistering
	if register {
		if maxReg == -1 {
			return 0, refusal.Refuse(refusal.ReasonMaxRegistering, "registration disabled (maxConcurrentRegistering = -1)")
		}
		if p.registering >= maxReg {
			return 0, refusal.Refuse(refusal.ReasonMaxRegistering, "max concurrent registering reached (%d)", maxReg)
		}
	} else if p.toStart >= maxProv {
		return 0, refusal.Refuse(refusal.ReasonMaxProvisioning, "max concurrent provisioning reached (%d spawns in flight)", maxProv)
	}
	if !p.known {
		return 0, refusal.Refuse(refusal.ReasonPoolUnknown, "worker pool not known yet")
	}
	all := p.workersLocked()
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
	case l.MaxWorker > 0 && len(all) >= l.MaxWorker:
		return len(all), refusal.Refuse(refusal.ReasonMaxWorkers, "max workers reached (%d/%d)", len(all), l.MaxWorker)
	case !register && nbPending >= maxProv:
		return len(all), refusal.Refuse(refusal.ReasonMaxProvisioning, "max concurrent provisioning reached (%d pending)", nbPending)
	case register && nbRegistering >= maxReg:
		return len(all), refusal.Refuse(refusal.ReasonMaxRegistering, "max concurrent registering reached (%d registering)", nbRegistering)
	}
	return len(all), nil
}

// Reserve admits one more worker named name (a registration when
// register), or says why not. It decides in memory from the last snapshot
// and the spawns the pool knows, under one mutex, so concurrent callers
// cannot both take the last slot; it makes no network call. The slot
// counts in the pool as Pending (or Registering) until released, or, once
// spawned, until a later snapshot covers it. A job refused for
// refusal.ReasonMaxWorkers means the pool holds Limits.MaxWorker workers.
func (p *Pool) Reserve(name string, register bool) (*Slot, *refusal.Refusal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, r := p.decideLocked(register); r != nil {
		if !register {
			p.capacitySkipped = true
		}
		return nil, r
	}
	p.inFlight[name] = register
	if register {
		p.registering++
	} else {
		p.toStart++
	}
	return &Slot{p: p, name: name, register: register}, nil
}

// SpawnsInFlight is the number of job spawns in flight.
func (p *Pool) SpawnsInFlight() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.toStart
}
