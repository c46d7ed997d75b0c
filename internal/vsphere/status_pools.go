package vsphere

import (
	"fmt"

	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/internal/warmpool"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// PoolStatus is every warm pool's sizing as of the provisioning loop's
// last pass: its target, the reason of that target and its hit ratio
// (docs/warm-pools.md). Empty before the first pass.
func (h *HatcheryVSphere) PoolStatus() []warmpool.PoolStatus { return h.pool.PoolStatus() }

// poolStatusLines are one /mon/status line per warm pool:
// vsphere/warm-pool/<model>[/<flavor>], its target, reason and hit
// ratio. From memory: no vCenter.
func poolStatusLines(pools []warmpool.PoolStatus) []sdk.MonitoringStatusLine {
	lines := make([]sdk.MonitoringStatusLine, 0, len(pools))
	for _, p := range pools {
		lines = append(lines, sdk.MonitoringStatusLine{
			Component: PoolComponent(p.Key),
			Value:     PoolStatusValue(p),
			Status:    sdk.MonitoringStatusOK,
		})
	}
	return lines
}

// PoolComponent is the status component of pool k.
func PoolComponent(k warmpool.Key) string {
	c := "vsphere/warm-pool/"
	if k.V1 {
		c += "v1/"
	}
	c += k.Model
	if k.Flavor != "" {
		c += "/" + k.Flavor
	}
	return c
}

// PoolStatusValue renders a pool's sizing: "target 4 (ahead: …), warm
// starts 93% of 120".
func PoolStatusValue(p warmpool.PoolStatus) string {
	v := fmt.Sprintf("target %d (%s: %s)", p.Target, p.Reason, p.Detail)
	if p.Starts == 0 {
		return v + ", no start yet"
	}
	return fmt.Sprintf("%s, warm starts %.0f%% of %d", v, 100*p.HitRatio, p.Starts)
}

// warmPoolGauges are the warm pools' sizing for the metrics
// (warm_pool_target, warm_pool_hit_ratio); a V1 pool's model is its path.
func (h *HatcheryVSphere) warmPoolGauges() []metrics.WarmPool {
	pools := h.PoolStatus()
	out := make([]metrics.WarmPool, 0, len(pools))
	for _, p := range pools {
		out = append(out, metrics.WarmPool{Model: p.Key.Model, Flavor: p.Key.Flavor, Reason: string(p.Reason), Target: int64(p.Target), HitRatio: p.HitRatio})
	}
	return out
}
