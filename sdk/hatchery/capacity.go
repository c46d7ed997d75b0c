package hatchery

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
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
)

// PoolWorker is one worker of the pool (001 §6.4.1), as /mon/workers shows
// it. It holds no secret.
type PoolWorker struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Source string `json:"source"`
	ID     string `json:"id,omitempty"`
	Model  string `json:"model,omitempty"`
	JobID  string `json:"job_id,omitempty"`
}

// poolStatuses are the API statuses counted in the pool.
var poolStatuses = map[string]bool{
	sdk.StatusChecking: true, sdk.StatusWaiting: true, sdk.StatusBuilding: true,
	sdk.StatusPending: true, sdk.StatusRegistering: true,
}

// capacity is the admission state of 001 §6.4. Admissions are serialised
// by mu: computing the pool (an API round trip) and reserving a slot is one
// step, so concurrent starters cannot both take the last slot. Spawns
// themselves run in parallel.
type capacity struct {
	mu sync.Mutex
	// reserved maps the names of spawns in flight to RegisterOnly.
	reservedMu sync.Mutex
	reserved   map[string]bool
	// toStart counts spawns about to start or starting (nbWorkerToStart);
	// registering counts registrations in flight.
	toStart     atomic.Int64
	registering atomic.Int64

	snapMu   sync.Mutex
	snapshot []PoolWorker
	disabled map[string]bool // API worker ids already disabled
}

func (c *capacity) init() {
	c.reserved = map[string]bool{}
	c.disabled = map[string]bool{}
}

func (c *capacity) reservedCopy() map[string]bool {
	c.reservedMu.Lock()
	defer c.reservedMu.Unlock()
	m := make(map[string]bool, len(c.reserved))
	for k, v := range c.reserved {
		m[k] = v
	}
	return m
}

// Pool returns the last computed worker pool (for /mon/workers).
func (f *Framework) Pool() []PoolWorker {
	f.cap.snapMu.Lock()
	defer f.cap.snapMu.Unlock()
	return append([]PoolWorker(nil), f.cap.snapshot...)
}

// ownWorker tells whether an API worker belongs to this hatchery; an empty
// hatchery name (an API that does not say) counts as ours for capacity.
func (f *Framework) ownWorker(hatcheryName string) bool {
	return hatcheryName == "" || hatcheryName == f.cfg.Name
}

// workerPool builds the pool: API workers of this hatchery in an active
// status, plus started workers not registered yet (Pending, or Registering
// for "register-" names), plus the spawns in flight in reserved. A V1
// worker registered with this hatchery's name but unknown to the hatchery
// is disabled (001 §6.4.1). reserved must be read before the hatchery and
// the API are asked, so a spawn finishing meanwhile is seen by one of them.
func (f *Framework) workerPool(ctx context.Context, reserved map[string]bool) ([]PoolWorker, error) {
	if reserved == nil {
		reserved = f.cap.reservedCopy()
	}
	// The API first, the hatchery second: a worker registered at the time
	// of the API answer has its VM already, so the hatchery's answer shows
	// it and it is not mistaken for an inconsistent one.
	var v1Workers []sdk.Worker
	var v2Workers []sdk.V2Worker
	var err error
	if f.cfg.API.Token != "" {
		if v1Workers, err = f.client.WorkerList(ctx); err != nil {
			return nil, fmt.Errorf("list v1 workers: %w", err)
		}
	}
	if f.cfg.API.TokenV2 != "" {
		if v2Workers, err = f.client.V2WorkerList(ctx); err != nil {
			return nil, fmt.Errorf("list v2 workers: %w", err)
		}
	}
	startedList, err := f.h.WorkersStarted(ctx)
	if err != nil {
		return nil, fmt.Errorf("list started workers: %w", err)
	}
	started := make(map[string]bool, len(startedList))
	for _, n := range startedList {
		started[n] = true
	}
	pool := make([]PoolWorker, 0, len(startedList)+len(reserved))
	inPool := map[string]bool{}
	var seenIDs []string

	if f.cfg.API.Token != "" {
		for _, w := range v1Workers {
			if !poolStatuses[w.Status] || !f.ownWorker(w.HatcheryName) || inPool[w.Name] {
				continue
			}
			seenIDs = append(seenIDs, w.ID)
			if w.HatcheryName == f.cfg.Name && !started[w.Name] && !hasKey(reserved, w.Name) {
				f.disableInconsistent(ctx, w)
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
			if w.HatcheryName == f.cfg.Name && !started[w.Name] && !hasKey(reserved, w.Name) {
				// V2 has no disable route: leave it out of the pool.
				f.log.Warn("v2 worker registered but not started by this hatchery", "worker", w.Name, "reason", "inconsistent")
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
	names := make([]string, 0, len(reserved))
	for n := range reserved {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if inPool[n] {
			continue
		}
		st := sdk.StatusPending
		if reserved[n] {
			st = sdk.StatusRegistering
		}
		pool = append(pool, PoolWorker{Name: n, Status: st, Source: PoolSourceStarting})
		inPool[n] = true
	}

	f.cap.snapMu.Lock()
	f.cap.snapshot = pool
	if f.cfg.API.Token != "" {
		keep := make(map[string]bool, len(seenIDs))
		for _, id := range seenIDs {
			if f.cap.disabled[id] {
				keep[id] = true
			}
		}
		f.cap.disabled = keep
	}
	f.cap.snapMu.Unlock()
	return pool, nil
}

func hasKey(m map[string]bool, k string) bool { _, ok := m[k]; return ok }

// disableInconsistent disables a V1 worker the API says is this hatchery's
// but the hatchery does not know, once.
func (f *Framework) disableInconsistent(ctx context.Context, w sdk.Worker) {
	f.cap.snapMu.Lock()
	done := f.cap.disabled[w.ID]
	f.cap.disabled[w.ID] = true
	f.cap.snapMu.Unlock()
	if done {
		return
	}
	f.log.Warn("disabling worker registered but not started by this hatchery", "worker", w.Name, "reason", "inconsistent")
	if err := f.client.WorkerDisable(ctx, w.ID); err != nil {
		f.cap.snapMu.Lock()
		delete(f.cap.disabled, w.ID)
		f.cap.snapMu.Unlock()
		f.log.Warn("disable inconsistent worker failed", "worker", w.Name, "reason", err.Error())
	}
}

// slot is a capacity reservation for one spawn; release it exactly once
// (extra calls do nothing).
type slot struct {
	f        *Framework
	name     string
	register bool
	once     sync.Once
}

func (s *slot) release() {
	s.once.Do(func() {
		s.f.cap.reservedMu.Lock()
		delete(s.f.cap.reserved, s.name)
		s.f.cap.reservedMu.Unlock()
		if s.register {
			s.f.cap.registering.Add(-1)
		} else {
			s.f.cap.toStart.Add(-1)
		}
	})
}

// reserve is checkCapacities (001 §6.4): it admits one more worker named
// name, or says why not. The slot counts in the pool as Pending (or
// Registering) until released.
func (f *Framework) reserve(ctx context.Context, name string, register bool) (*slot, string, error) {
	p := f.cfg.Provision
	maxProv := int64(max(p.MaxConcurrentProvisioning, 1))
	maxReg := int64(p.MaxConcurrentRegistering)
	if register {
		if maxReg == -1 {
			return nil, "registration disabled (maxConcurrentRegistering = -1)", nil
		}
		if f.cap.registering.Load() >= maxReg {
			return nil, fmt.Sprintf("max concurrent registering reached (%d)", maxReg), nil
		}
	} else if f.cap.toStart.Load() >= maxProv {
		return nil, fmt.Sprintf("max concurrent provisioning reached (%d spawns in flight)", maxProv), nil
	}

	f.cap.mu.Lock()
	defer f.cap.mu.Unlock()
	reserved := f.cap.reservedCopy()
	pool, err := f.workerPool(ctx, reserved)
	if err != nil {
		return nil, "", fmt.Errorf("check capacities: %w", err)
	}
	var nbPending, nbRegistering int64
	for _, w := range pool {
		switch w.Status {
		case sdk.StatusPending:
			nbPending++
		case sdk.StatusRegistering:
			nbRegistering++
		}
	}
	switch {
	case p.MaxWorker > 0 && len(pool) >= p.MaxWorker:
		return nil, fmt.Sprintf("max workers reached (%d/%d)", len(pool), p.MaxWorker), nil
	case !register && nbPending >= maxProv:
		return nil, fmt.Sprintf("max concurrent provisioning reached (%d pending)", nbPending), nil
	case !register && f.cap.toStart.Load() >= maxProv:
		return nil, fmt.Sprintf("max concurrent provisioning reached (%d spawns in flight)", maxProv), nil
	case register && nbRegistering >= maxReg:
		return nil, fmt.Sprintf("max concurrent registering reached (%d registering)", nbRegistering), nil
	case register && f.cap.registering.Load() >= maxReg:
		return nil, fmt.Sprintf("max concurrent registering reached (%d)", maxReg), nil
	}
	f.cap.reservedMu.Lock()
	f.cap.reserved[name] = register
	f.cap.reservedMu.Unlock()
	if register {
		f.cap.registering.Add(1)
	} else {
		f.cap.toStart.Add(1)
	}
	return &slot{f: f, name: name, register: register}, "", nil
}
