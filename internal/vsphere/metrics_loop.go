package vsphere

import (
	"context"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
)

// RunMetrics collects m every interval (metrics.Interval when every <= 0),
// the first time at once, until ctx ends. It is the hatchery's one metrics
// collector (internal/collector): the daemon starts it in one goroutine
// next to Run and joins it at shutdown.
func (h *HatcheryVSphere) RunMetrics(ctx context.Context, m *metrics.Metrics, every time.Duration) {
	if m == nil {
		return
	}
	if every <= 0 {
		every = metrics.Interval
	}
	runEvery(ctx, h.log, "metrics", every, func(ctx context.Context) { h.collectMetrics(ctx, m) })
}

// collectMetrics is one collection pass (collector.Collector.Collect).
func (h *HatcheryVSphere) collectMetrics(ctx context.Context, m *metrics.Metrics) {
	h.collector.Collect(ctx, m)
}
