package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// statusSource renders the daemon's own /mon/status lines (the framework's
// ExtraStatus): the vCenter connection, the configured topology on it
// (topology.line) and, in shared inventory mode, the inventory's freshness.
type statusSource struct {
	service  string
	hostname string
	vc       *vcenter.Client
	inv      *inventory.Shared // nil in listing mode
	topo     *topology         // the "vCenter topology" line
	interval time.Duration     // inventory refresh interval
	now      func() time.Time
}

// lines implements hatchery.Options.ExtraStatus.
func (s *statusSource) lines(context.Context) []sdk.MonitoringStatusLine {
	out := []sdk.MonitoringStatusLine{vcenterLine(s.vc.Status())}
	if s.topo != nil {
		out = append(out, s.topo.line())
	}
	if s.inv != nil {
		out = append(out, inventoryLine(s.inv.Stats(), s.interval, s.now()))
	}
	for i := range out {
		out[i].Type, out[i].Service, out[i].Hostname = "hatchery", s.service, s.hostname
	}
	return out
}

// inventoryLine is "vCenter inventory": OK when the last refresh succeeded,
// WARN when it failed but the snapshot is still usable, AL when readers
// refuse it (never read, or stale by the inventory's own rule: st.Stale).
func inventoryLine(st inventory.Stats, interval time.Duration, now time.Time) sdk.MonitoringStatusLine {
	l := sdk.MonitoringStatusLine{Component: "vCenter inventory"}
	switch {
	case st.LastOK.IsZero() && st.LastErr == nil:
		l.Status, l.Value = sdk.MonitoringStatusWarn, "not read yet"
	case st.LastOK.IsZero():
		l.Status, l.Value = sdk.MonitoringStatusAlert, fmt.Sprintf("never read: %v", st.LastErr)
	case st.Stale != nil:
		l.Status, l.Value = sdk.MonitoringStatusAlert, st.Stale.Error()
	case st.LastErr != nil:
		l.Status = sdk.MonitoringStatusWarn
		l.Value = fmt.Sprintf("%d VMs, refreshed %s ago; last refresh failed: %v", st.VMs, now.Sub(st.LastOK).Round(time.Second), st.LastErr)
	default:
		l.Status = sdk.MonitoringStatusOK
		l.Value = fmt.Sprintf("%d VMs, refreshed %s ago (every %s)", st.VMs, now.Sub(st.LastOK).Round(time.Second), interval)
	}
	return l
}

// health is what the scrape-time gauges show (metrics.Metrics.Health): the
// vCenter link as the "vCenter" status line judges it (vcUp), and the
// shared inventory's staleness as the "vCenter inventory" line does (inv
// nil: listing mode, no inventory gauges).
func health(vcUp bool, inv *inventory.Stats, now time.Time) metrics.Health {
	hl := metrics.Health{VCenterUp: vcUp, InventoryAge: -1}
	if inv == nil {
		return hl
	}
	hl.Inventory = true
	hl.InventoryStale = inv.Stale != nil || (inv.LastOK.IsZero() && inv.LastErr != nil)
	if !inv.LastOK.IsZero() {
		hl.InventoryAge = now.Sub(inv.LastOK)
	}
	return hl
}
