package admission

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/capacity"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// poolHealth is the resource pool's readability as last seen: an outage is
// logged once when it starts and once when it ends, never per job.
type poolHealth struct {
	down  bool
	since time.Time
	err   string
	// unresolved: the outage is a topology problem
	// (vctypes.ErrPlacementUnresolved), whose start and end the vCenter
	// client logs.
	unresolved bool
	// unanswered: the outage began with vCenter not answering
	// (vctypes.Unanswered), whose start and end the vCenter client logs.
	unanswered bool
}

// readPool reads the resource pool runtime through the Port (the
// pool object is looked up once and kept until a read fails). It never
// fails: an unreadable pool is a snapshot with Readable false, and the
// static limits still apply (docs/design.md#capacity-degradation).
func (a Admission) readPool(ctx context.Context) capacity.Pool {
	snap, err := a.poolRuntime(ctx)
	if err != nil && ctx.Err() != nil {
		// Our caller gave up (shutdown, deadline): not a pool outage.
		return capacity.Pool{}
	}
	a.notePoolHealth(err)
	snap.Read = true
	a.State.mu.Lock()
	a.State.lastPool = snap
	a.State.mu.Unlock()
	return snap
}

// lastPool returns the last resource pool read without reaching vCenter.
func (a Admission) lastPool() capacity.Pool {
	a.State.mu.Lock()
	defer a.State.mu.Unlock()
	return a.State.lastPool
}

// poolRuntime reads the pool runtime, looking the pool up when needed.
func (a Admission) poolRuntime(ctx context.Context) (capacity.Pool, error) {
	s := a.State
	s.mu.Lock()
	pool := s.pool
	s.mu.Unlock()
	if pool == nil {
		p, err := a.Port.LoadResourcePool(ctx)
		if err != nil {
			return capacity.Pool{}, fmt.Errorf("load resource pool: %w", err)
		}
		if p.Value == "" {
			return capacity.Pool{}, errors.New("load resource pool: no pool returned")
		}
		pool = &p
		s.mu.Lock()
		s.pool = pool
		s.mu.Unlock()
	}
	rt, err := a.Port.ResourcePoolRuntime(ctx, *pool)
	if err == nil && rt == nil {
		err = errors.New("empty runtime")
	}
	if err != nil {
		s.mu.Lock()
		if s.pool == pool {
			s.pool = nil // look it up again next time: it may have been moved or renamed
		}
		s.mu.Unlock()
		return capacity.Pool{}, fmt.Errorf("read resource pool %s runtime: %w", poolRef(pool), err)
	}
	return capacity.Pool{
		Readable:              true,
		UnreservedMemoryBytes: rt.MemoryUnreservedBytes,
		UnreservedCPUMHz:      rt.CPUUnreservedMHz,
	}, nil
}

// poolRef names a pool reference in errors.
func poolRef(p *vctypes.Ref) string {
	if p == nil {
		return "<nil>"
	}
	return p.Value
}

// notePoolHealth records a read's outcome and logs the transitions only.
func (a Admission) notePoolHealth(err error) {
	s := a.State
	now := a.Now()
	s.mu.Lock()
	wasDown, since, wasUnresolved, wasUnanswered := s.poolHealth.down, s.poolHealth.since, s.poolHealth.unresolved, s.poolHealth.unanswered
	if err != nil {
		if !wasDown {
			s.poolHealth = poolHealth{down: true, since: now, unanswered: vctypes.Unanswered(err)}
		}
		s.poolHealth.err = err.Error()
		s.poolHealth.unresolved = errors.Is(err, vctypes.ErrPlacementUnresolved)
	} else {
		s.poolHealth = poolHealth{}
	}
	s.mu.Unlock()
	switch {
	case err != nil && !wasDown && errors.Is(err, vctypes.ErrPlacementUnresolved):
		// A topology problem: the vCenter client logged it once as an
		// ERROR and /mon/status shows it.
		a.Log.Debug("resource pool unresolved: capacity checks continue with static limits only", logkey.Err, err)
	case err != nil && !wasDown && vctypes.Unanswered(err):
		// vCenter down: the vCenter client logs the outage's start and
		// end (docs/operations.md#when-vcenter-restarts).
		a.Log.Debug("resource pool unreadable: capacity checks continue with static limits only", logkey.Err, err)
	case err != nil && !wasDown:
		a.Log.Warn("resource pool unreadable: capacity checks continue with static limits only", logkey.Err, err)
	case err != nil:
		a.Log.Debug("resource pool still unreadable", logkey.Err, err, "since", since)
	case wasDown && (wasUnresolved || wasUnanswered):
		a.Log.Debug("resource pool readable again", "unreadable_for", now.Sub(since).String())
	case wasDown:
		a.Log.Info("resource pool readable again", "unreadable_for", now.Sub(since).String())
	}
}

// poolRuntimeSource is an inventory that reads the resource pool's runtime
// along with the VMs (the watch inventory's probe).
type poolRuntimeSource interface {
	PoolRuntime() (*vctypes.PoolRuntime, time.Time)
}

// InventoryPoolRuntime returns the inventory's last reading of the pool
// runtime when it has one no older than two refresh intervals, else nil.
// Reports (metrics, headroom) use it and make no round trip of their own;
// decisions always read the pool live (readPool).
func (a Admission) InventoryPoolRuntime() *vctypes.PoolRuntime {
	src, ok := a.Inventory.(poolRuntimeSource)
	if !ok {
		return nil
	}
	rt, at := src.PoolRuntime()
	if rt == nil || a.Now().Sub(at) > 2*a.Config.InventoryRefreshIntervalDuration() {
		return nil
	}
	return rt
}

// reportPool is the pool reading of reports: the inventory's when recent,
// else a live read.
func (a Admission) reportPool(ctx context.Context) capacity.Pool {
	if rt := a.InventoryPoolRuntime(); rt != nil {
		return capacity.Pool{Readable: true, Read: true, UnreservedMemoryBytes: rt.MemoryUnreservedBytes, UnreservedCPUMHz: rt.CPUUnreservedMHz}
	}
	return a.readPool(ctx)
}
