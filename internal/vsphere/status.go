package vsphere

import (
	"context"
	"fmt"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// Status returns the hatchery's /mon/status lines about capacity: vCPUs and
// RAM allocated against maxCpus/maxMemoryMB (or "unlimited"), the resource
// pool's readability (WARN when unreadable) and the spawns in flight; then
// one line in alert per quarantined template, saying why and until when;
// one line per placement (placementStatusLines); one per warm pool (poolStatusLines: target, reason, hit ratio);
// with static IPs, the address locks held and known taken by another.
// The framework adds the workers N/maxWorker line itself.
//
// It reaches no vCenter: heartbeats and /mon/status must answer while
// vCenter is slow or down. The resource pool line shows the last reading,
// taken by capacity decisions and by the metrics pass.
func (h *HatcheryVSphere) Status(ctx context.Context) []sdk.MonitoringStatusLine {
	u, err := h.admission().LastUsage(ctx)
	if err != nil {
		return append([]sdk.MonitoringStatusLine{{
			Component: "vsphere/capacity",
			Value:     fmt.Sprintf("unknown: %v", err),
			Status:    sdk.MonitoringStatusWarn,
		}}, h.otherStatusLines()...)
	}
	return append(capacityStatusLines(u), h.otherStatusLines()...)
}

// otherStatusLines are the quarantine's lines, the placements' (from the
// placement set's memory), the warm pools', then the address locks'.
func (h *HatcheryVSphere) otherStatusLines() []sdk.MonitoringStatusLine {
	lines := append(h.quarantineStatusLines(), placementStatusLines(h.ShownPlacements())...)
	lines = append(lines, poolStatusLines(h.PoolStatus())...)
	if h.ips.Enabled() {
		// From memory, as of the last lock call and cleanup pass
		// (docs/high-availability.md#static-ips).
		held, taken := h.ips.Locks()
		lines = append(lines, sdk.MonitoringStatusLine{
			Component: "vsphere/ip-locks",
			Value:     fmt.Sprintf("%d held by this instance, %d taken by another", held, taken),
			Status:    sdk.MonitoringStatusOK,
		})
	}
	return lines
}

// capacityStatusLines renders a usage snapshot.
func capacityStatusLines(u CapacityUsage) []sdk.MonitoringStatusLine {
	limitLine := func(component string, used, max int64, unit string) sdk.MonitoringStatusLine {
		l := sdk.MonitoringStatusLine{Component: component, Status: sdk.MonitoringStatusOK}
		if max <= 0 {
			l.Value = fmt.Sprintf("%d%s/unlimited", used, unit)
			return l
		}
		l.Value = fmt.Sprintf("%d%s/%d%s", used, unit, max, unit)
		if used > max {
			l.Status = sdk.MonitoringStatusWarn
		}
		return l
	}
	lines := []sdk.MonitoringStatusLine{
		limitLine("vsphere/capacity/vcpus", u.CPUs, u.MaxCPUs, ""),
		limitLine("vsphere/capacity/memory", u.MemoryMB, u.MaxMemoryMB, " MB"),
	}
	pool := sdk.MonitoringStatusLine{Component: "vsphere/capacity/resource-pool", Status: sdk.MonitoringStatusOK}
	if u.PoolNotRead {
		pool.Value = "not read yet"
	} else if u.PoolReadable {
		pool.Value = fmt.Sprintf("readable: %d MB memory and %d MHz cpu unreserved for VMs",
			u.PoolUnreservedMemoryBytes>>20, u.PoolUnreservedCPUMHz)
	} else {
		pool.Status = sdk.MonitoringStatusWarn
		pool.Value = "unreadable: static limits only"
		if !u.PoolUnreadableSince.IsZero() {
			pool.Value += " since " + u.PoolUnreadableSince.UTC().Format(time.RFC3339)
		}
		if u.PoolError != "" {
			pool.Value += ": " + u.PoolError
		}
	}
	lines = append(lines, pool, sdk.MonitoringStatusLine{
		Component: "vsphere/capacity/in-flight",
		Status:    sdk.MonitoringStatusOK,
		Value:     fmt.Sprintf("%d spawns reserving %d vCPUs, %d MB", u.InFlight, u.InFlightCPUs, u.InFlightMemoryMB),
	})
	return lines
}
