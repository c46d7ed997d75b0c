package daemon

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// TestInventoryLine: the status line follows the inventory's own staleness
// verdict (inventory.Stats.Stale), so /mon/status never says AL while
// decisions still read the snapshot, nor OK while they are refused.
// Not parallel: the daemon tests count this package's goroutines after a
// shutdown, and a paused parallel test would be one.
func TestInventoryLine(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	stale := fmt.Errorf("%w: last successful refresh 5m0s ago (limit 4m0s): last refresh failed: down", inventory.ErrStale)
	tests := []struct {
		name       string
		st         inventory.Stats
		wantStatus string
		wantValue  string
	}{
		{"not read yet", inventory.Stats{}, sdk.MonitoringStatusWarn, "not read yet"},
		{"never read", inventory.Stats{LastErr: errors.New("down")}, sdk.MonitoringStatusAlert, "never read: down"},
		{"fresh", inventory.Stats{VMs: 3, LastOK: now.Add(-10 * time.Second)}, sdk.MonitoringStatusOK, "3 VMs, refreshed 10s ago (every 1m0s)"},
		{"failing but usable", inventory.Stats{VMs: 3, LastOK: now.Add(-2 * time.Minute), LastErr: errors.New("down")}, sdk.MonitoringStatusWarn,
			"3 VMs, refreshed 2m0s ago; last refresh failed: down"},
		{"stale", inventory.Stats{VMs: 3, LastOK: now.Add(-5 * time.Minute), LastErr: errors.New("down"), Stale: stale}, sdk.MonitoringStatusAlert, stale.Error()},
		{"old but a refresh runs within its grace", inventory.Stats{VMs: 3, LastOK: now.Add(-4*time.Minute - 10*time.Second)}, sdk.MonitoringStatusOK,
			"3 VMs, refreshed 4m10s ago (every 1m0s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := inventoryLine(tt.st, time.Minute, now)
			assert.Equal(t, tt.wantStatus, l.Status)
			assert.Equal(t, tt.wantValue, l.Value)
			assert.Equal(t, "vCenter inventory", l.Component)
		})
	}
}
