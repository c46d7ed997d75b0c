package vsphere

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/placement"
	"github.com/cds-contrib/hatchery-vsphere/internal/placement/placementtest"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// TestPlacementStatusLines: one line per placement, its level from its
// state (backing off and probing in alert, cordoned WARN, active OK but
// WARN with a datastore inaccessible or below its floor), its value
// saying the state, why and until when, usage, headroom and datastores.
func TestPlacementStatusLines(t *testing.T) {
	t.Parallel()
	until := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	ds := func(name string, freeGB, floorGB int64, ok bool) placement.DatastoreStatus {
		return placement.DatastoreStatus{Name: name, FreeBytes: freeGB << 30, CapacityBytes: 500 << 30, FloorBytes: floorGB << 30, Accessible: ok}
	}
	for _, tc := range []struct {
		name   string
		st     placement.Status
		status string
		value  string
	}{
		{"active", placement.Status{Name: "cluster-a", State: placement.StateActive, VMs: 3, CPUs: 6, MemoryMB: 12288,
			HeadroomCPUs: 10, HeadroomMemoryMB: 20480, TasksInFlight: 1, Clones: 5, CloneFailures: 1,
			Datastores: []placement.DatastoreStatus{ds("ds-a1", 120, 50, true), ds("ds-a2", 300, 50, true)}},
			sdk.MonitoringStatusOK,
			"active; 3 VMs (6 vCPUs, 12288 MB), headroom 10 vCPUs and 20480 MB, clones: 1 in flight, 5 sent, 1 failed; datastores ds-a1 120/500 GB free (floor 50 GB), ds-a2 300/500 GB free (floor 50 GB)"},
		{"active, a datastore below its floor", placement.Status{Name: "cluster-a", State: placement.StateActive,
			HeadroomCPUs: placement.Unknown, HeadroomMemoryMB: placement.Unknown,
			Datastores: []placement.DatastoreStatus{ds("ds-a1", 40, 50, true)}},
			sdk.MonitoringStatusWarn,
			"active; 0 VMs (0 vCPUs, 0 MB), headroom no vCPU limit and no memory limit, clones: 0 in flight, 0 sent, 0 failed; datastores ds-a1 40/500 GB free (floor 50 GB) below its floor"},
		{"active, a datastore inaccessible", placement.Status{Name: "cluster-a", State: placement.StateActive,
			Datastores: []placement.DatastoreStatus{ds("ds-a1", 0, 50, false)}},
			sdk.MonitoringStatusWarn,
			"active; 0 VMs (0 vCPUs, 0 MB), headroom 0 vCPUs and 0 MB, clones: 0 in flight, 0 sent, 0 failed; datastores ds-a1 inaccessible"},
		{"active, a datastore not read", placement.Status{Name: "cluster-a", State: placement.StateActive,
			Datastores: []placement.DatastoreStatus{{Name: "ds-a1", FloorBytes: 50 << 30}}},
			sdk.MonitoringStatusWarn,
			"active; 0 VMs (0 vCPUs, 0 MB), headroom 0 vCPUs and 0 MB, clones: 0 in flight, 0 sent, 0 failed; datastores ds-a1 not read"},
		{"cordoned", placement.Status{Name: "cluster-b", State: placement.StateCordoned, Reason: "cordoned by ctl uid 0", VMs: 1},
			sdk.MonitoringStatusWarn,
			"cordoned: cordoned by ctl uid 0; 1 VMs (0 vCPUs, 0 MB), headroom 0 vCPUs and 0 MB, clones: 0 in flight, 0 sent, 0 failed"},
		{"backing off", placement.Status{Name: "cluster-b", State: placement.StateBackingOff, Until: until, Reason: "datastore unavailable", CloneFailures: 3, Clones: 3},
			sdk.MonitoringStatusAlert,
			"backing-off until 2026-11-28T08:00:00Z: datastore unavailable; 0 VMs (0 vCPUs, 0 MB), headroom 0 vCPUs and 0 MB, clones: 0 in flight, 3 sent, 3 failed"},
		{"probing", placement.Status{Name: "cluster-b", State: placement.StateProbing, Reason: "host unavailable", TasksInFlight: 1},
			sdk.MonitoringStatusAlert,
			"probing: host unavailable; 0 VMs (0 vCPUs, 0 MB), headroom 0 vCPUs and 0 MB, clones: 1 in flight, 0 sent, 0 failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := placementStatusLine(tc.st)
			assert.Equal(t, "placement/"+tc.st.Name, l.Component)
			assert.Equal(t, tc.status, l.Status)
			assert.Equal(t, tc.value, l.Value)
		})
	}
}

// withPlacements stores h's configuration again with [[placements]]
// entries of these names.
func withPlacements(h *HatcheryVSphere, names ...string) {
	cfg := *h.conf()
	cfg.Placements = nil
	for _, n := range names {
		cfg.Placements = append(cfg.Placements, config.Placement{Name: n})
	}
	h.cfg.Store(&cfg)
}

// TestStatusShowsPlacements: with [[placements]] the hatchery's status has
// one line per placement of its set, in the set's order, after the
// capacity lines; without entries (the one default placement, which no
// decision reads or steers) or without a set, none, and no failure.
func TestStatusShowsPlacements(t *testing.T) {
	t.Parallel()
	env := newCapEnv(t, config.Config{MaxCPUs: 16, MaxMemoryMB: 32768, Flavors: capFlavors()})
	env.pool.set(10240, 500)
	placementLines := func() []sdk.MonitoringStatusLine {
		var out []sdk.MonitoringStatusLine
		for _, l := range env.h.Status(context.Background()) {
			if strings.HasPrefix(l.Component, "placement/") {
				out = append(out, l)
			}
		}
		return out
	}
	set := placementtest.NewPlacements(
		placement.Status{Name: "cluster-b", State: placement.StateBackingOff, Reason: "no disk space"},
		placement.Status{Name: "cluster-a", State: placement.StateActive})
	env.h.placements = set
	assert.Nil(t, env.h.ShownPlacements(), "without [[placements]]")
	assert.Empty(t, placementLines(), "without [[placements]]")

	withPlacements(env.h, "cluster-b", "cluster-a")
	lines := placementLines()
	require.Len(t, lines, 2)
	assert.Equal(t, "placement/cluster-b", lines[0].Component)
	assert.Equal(t, sdk.MonitoringStatusAlert, lines[0].Status)
	assert.Equal(t, "placement/cluster-a", lines[1].Component)
	assert.Equal(t, sdk.MonitoringStatusOK, lines[1].Status)

	require.NoError(t, set.Cordon("cluster-a", "ctl uid 0"))
	lines = placementLines()
	assert.Equal(t, sdk.MonitoringStatusWarn, lines[1].Status)
	assert.True(t, strings.HasPrefix(lines[1].Value, "cordoned: cordoned by ctl uid 0;"), lines[1].Value)

	env.h.placements = nil
	assert.Empty(t, placementLines(), "without a set")
}
