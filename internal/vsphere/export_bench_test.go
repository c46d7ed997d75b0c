package vsphere

import (
	"context"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/internal/spawntiming"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// Hooks for the external benchmarks and the simulator tests run in both
// inventory modes, compiled into tests only.

// InventoryOf returns the inventory the hatchery reads.
func (h *HatcheryVSphere) InventoryOf() inventory.Inventory { return h.inv }

// BenchKillDisabledWorkersPass runs one disabled-workers cleanup pass.
func (h *HatcheryVSphere) BenchKillDisabledWorkersPass(ctx context.Context) {
	h.killDisabledWorkers(ctx)
}

// BenchCollectMetrics runs one metrics collection pass.
func (h *HatcheryVSphere) BenchCollectMetrics(ctx context.Context, m *metrics.Metrics) {
	h.collectMetrics(ctx, m)
}

// WatchResyncInterval is inventory.WatchResyncInterval, for the benchmark's idle
// figure (the resync's cost counts once per interval).
const WatchResyncInterval = inventory.WatchResyncInterval

// BenchOnSpawnTimed makes the hatchery hand every successful spawn's
// timing to fn; call it before the first spawn.
func (h *HatcheryVSphere) BenchOnSpawnTimed(fn func(spawn.Arguments, spawntiming.Timing)) {
	h.onTimed = fn
}
