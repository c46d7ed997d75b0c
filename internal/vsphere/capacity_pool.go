package vsphere

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/capacity"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/vmware/govmomi/vim25/types"
)

// poolHealth is the resource pool's readability as last seen: an outage is
// logged once when it starts and once when it ends, never per job.
type poolHealth struct {
	down  bool
	since time.Time
	err   string
}

// readPool reads the resource pool runtime through the vcenter.Port (the
// pool object is looked up once and kept until a read fails). It never
// fails: an unreadable pool is a snapshot with Readable false, and the
// static limits still apply (docs/design.md#capacity-degradation).
func (h *HatcheryVSphere) readPool(ctx context.Context) capacity.Pool {
	snap, err := h.poolRuntime(ctx)
	if err != nil && ctx.Err() != nil {
		// Our caller gave up (shutdown, deadline): not a pool outage.
		return capacity.Pool{}
	}
	h.notePoolHealth(err)
	snap.Read = true
	h.capacity.mu.Lock()
	h.capacity.lastPool = snap
	h.capacity.mu.Unlock()
	return snap
}

// lastPool returns the last resource pool read without reaching vCenter.
func (h *HatcheryVSphere) lastPool() capacity.Pool {
	h.capacity.mu.Lock()
	defer h.capacity.mu.Unlock()
	return h.capacity.lastPool
}

func (h *HatcheryVSphere) poolRuntime(ctx context.Context) (capacity.Pool, error) {
	s := h.capacity
	s.mu.Lock()
	pool := s.pool
	s.mu.Unlock()
	if pool == nil {
		p, err := h.vs.LoadResourcePool(ctx)
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
	rt, err := h.vs.ResourcePoolRuntime(ctx, *pool)
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
		UnreservedMemoryBytes: rt.Memory.UnreservedForVm,
		UnreservedCPUMHz:      rt.Cpu.UnreservedForVm,
	}, nil
}

func poolRef(p *types.ManagedObjectReference) string {
	if p == nil {
		return "<nil>"
	}
	return p.Reference().Value
}

// notePoolHealth records a read's outcome and logs the transitions only.
func (h *HatcheryVSphere) notePoolHealth(err error) {
	s := h.capacity
	now := h.now()
	s.mu.Lock()
	wasDown, since := s.poolHealth.down, s.poolHealth.since
	if err != nil {
		if !wasDown {
			s.poolHealth = poolHealth{down: true, since: now}
		}
		s.poolHealth.err = err.Error()
	} else {
		s.poolHealth = poolHealth{}
	}
	s.mu.Unlock()
	switch {
	case err != nil && !wasDown:
		h.log.Warn("resource pool unreadable: capacity checks continue with static limits only", logkey.Err, err)
	case err != nil:
		h.log.Debug("resource pool still unreadable", logkey.Err, err, "since", since)
	case wasDown:
		h.log.Info("resource pool readable again", "unreadable_for", now.Sub(since).String())
	}
}

// poolRuntimeSource is an inventory that reads the resource pool's runtime
// along with the VMs (the watch inventory's probe).
type poolRuntimeSource interface {
	PoolRuntime() (*types.ResourcePoolRuntimeInfo, time.Time)
}

// inventoryPoolRuntime returns the inventory's last reading of the pool
// runtime when it has one no older than two refresh intervals, else nil.
// Reports (metrics, headroom) use it and make no round trip of their own;
// decisions always read the pool live (readPool).
func (h *HatcheryVSphere) inventoryPoolRuntime() *types.ResourcePoolRuntimeInfo {
	src, ok := h.inv.(poolRuntimeSource)
	if !ok {
		return nil
	}
	rt, at := src.PoolRuntime()
	if rt == nil || h.now().Sub(at) > 2*h.cfg.InventoryRefreshIntervalDuration() {
		return nil
	}
	return rt
}

// reportPool is the pool reading of reports: the inventory's when recent,
// else a live read.
func (h *HatcheryVSphere) reportPool(ctx context.Context) capacity.Pool {
	if rt := h.inventoryPoolRuntime(); rt != nil {
		return capacity.Pool{Readable: true, Read: true, UnreservedMemoryBytes: rt.Memory.UnreservedForVm, UnreservedCPUMHz: rt.Cpu.UnreservedForVm}
	}
	return h.readPool(ctx)
}
