package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
)

// TestHealthFollowsStatusLines: inventory_stale is 1 exactly when the
// "vCenter inventory" status line is AL; the age is absent before a first
// refresh; listing mode has no inventory gauges. Not parallel (see
// TestInventoryLine).
func TestHealthFollowsStatusLines(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	stale := fmt.Errorf("%w: last successful refresh 5m0s ago (limit 4m0s): last refresh failed: down", inventory.ErrStale)
	for _, st := range []inventory.Stats{
		{},
		{LastErr: errors.New("down")},
		{VMs: 3, LastOK: now.Add(-10 * time.Second)},
		{VMs: 3, LastOK: now.Add(-2 * time.Minute), LastErr: errors.New("down")},
		{VMs: 3, LastOK: now.Add(-5 * time.Minute), LastErr: errors.New("down"), Stale: stale},
	} {
		hl := health(true, &st, now)
		assert.True(t, hl.Inventory)
		assert.True(t, hl.VCenterUp)
		assert.Equal(t, inventoryLine(st, time.Minute, now).Status == sdk.MonitoringStatusAlert, hl.InventoryStale, "%+v", st)
		if st.LastOK.IsZero() {
			assert.Negative(t, hl.InventoryAge)
		} else {
			assert.Equal(t, now.Sub(st.LastOK), hl.InventoryAge)
		}
	}
	hl := health(false, nil, now)
	assert.Equal(t, metrics.Health{VCenterUp: false, Inventory: false, InventoryAge: -1}, hl)
}

// TestMetricsObserverHealth: the daemon's observer turns the framework's
// heartbeats and maxWorker refusals into the hatchery's metrics, and
// forwards them to the next observer; a maxWorker refusal, told both as
// MaxWorkersReached and as JobSkipped, counts once. Not parallel (see TestInventoryLine).
func TestMetricsObserverHealth(t *testing.T) {
	m, err := metrics.New("hatch-obs")
	require.NoError(t, err)
	defer m.Close()
	next := &countingHealthObserver{}
	var obs hatchery.Observer = metricsObserver{m: m, ctx: t.Context(), next: next}
	ho, ok := obs.(hatchery.HealthObserver)
	require.True(t, ok, "the daemon's observer is a HealthObserver")
	ho.HeartbeatSent(false)
	ho.HeartbeatSent(false)
	ho.MaxWorkersReached()
	obs.JobSkipped(refusal.ReasonMaxWorkers)

	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	text := string(body)
	assert.Contains(t, text, `cds_hatchery_vsphere_heartbeat_failures{service_name="hatch-obs",service_type="hatchery"} 2`)
	assert.Contains(t, text, `cds_hatchery_vsphere_capacity_refusals{resource="count",service_name="hatch-obs",service_type="hatchery"} 1`)
	assert.Contains(t, text, `cds_hatchery_vsphere_capacity_refusals{resource="cpu",service_name="hatch-obs",service_type="hatchery"} 0`)
	assert.Equal(t, 2, next.heartbeats)
	assert.Equal(t, 1, next.full)
}

// TestMetricsObserverSpawnFailureReason: the daemon's observer counts a
// failed spawn under the reason its error carries (the step the spawn
// path marked, a refusal's code), and canceled once the daemon stops. It
// fails if the reason went back to "other" for every failure. Not
// parallel (see TestInventoryLine).
func TestMetricsObserverSpawnFailureReason(t *testing.T) {
	m, err := metrics.New("hatch-fail")
	require.NoError(t, err)
	defer m.Close()
	ctx, cancel := context.WithCancel(t.Context())
	obs := metricsObserver{m: m, ctx: ctx}
	fail := func(err error) {
		obs.SpawnFailed(hatchery.SpawnEvent{Model: "debian12", JobID: "1", Err: err}, time.Second)
	}
	fail(fmt.Errorf("spawn worker: create vm: %w", metrics.MarkSpawnFailure(metrics.SpawnFailureClone, errors.New("boom"))))
	fail(fmt.Errorf("spawn worker: %w", refusal.Refuse(refusal.ReasonIP, "no address left")))
	fail(errors.New("unmarked"))
	cancel()
	fail(fmt.Errorf("spawn worker: launch worker: %w", metrics.MarkSpawnFailure(metrics.SpawnFailureLaunch, context.Canceled)))

	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	text := string(body)
	for reason, n := range map[metrics.SpawnFailureReason]int{
		metrics.SpawnFailureClone: 1, metrics.SpawnFailureIP: 1, metrics.SpawnFailureOther: 1, metrics.SpawnFailureCanceled: 1,
		metrics.SpawnFailureLaunch: 0, metrics.SpawnFailurePowerOn: 0,
	} {
		assert.Contains(t, text, fmt.Sprintf(`cds_hatchery_vsphere_spawns_failed{reason=%q,service_name="hatch-fail",service_type="hatchery",worker_model="debian12"} %d`, reason, n))
	}
}

type countingHealthObserver struct {
	hatchery.NopObserver
	heartbeats, full int
}

func (c *countingHealthObserver) HeartbeatSent(bool) { c.heartbeats++ }
func (c *countingHealthObserver) MaxWorkersReached() { c.full++ }
