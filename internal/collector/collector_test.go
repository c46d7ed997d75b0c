package collector

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory/inventorytest"
	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/internal/placement"
	"github.com/cds-contrib/hatchery-vsphere/internal/placement/placementtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testHatchery = testutil.Hatchery

func TestSummarizeVMsEdgeCases(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		vms  []inventory.VM
		want vmSummary
	}{
		{"empty datacenter", nil, vmSummary{}},
		{"our vSphere template without model flag is neither worker nor model template",
			[]inventory.VM{{Name: "t", Template: true, NumCPU: 2, MemoryMB: 2, Annotation: &inventory.Annotation{HatcheryName: testHatchery}}},
			vmSummary{}},
		{"model VM not yet marked as template counts as a template and in the pool",
			[]inventory.VM{{Name: "reg", NumCPU: 2, MemoryMB: 1024, PowerState: vctypes.PoweredOn, Annotation: &inventory.Annotation{HatcheryName: testHatchery, Model: true}}},
			vmSummary{templateVCPUs: 2, templateMemoryMB: 1024, templateCount: 1, poolVCPUs: 2, poolMemoryMB: 1024, poolVMCount: 1}},
		{"empty hatchery name owns nothing",
			[]inventory.VM{{Name: "x", NumCPU: 1, MemoryMB: 1, Annotation: &inventory.Annotation{}}},
			vmSummary{poolVMCount: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, summarizeVMs(testHatchery, tt.vms))
		})
	}
}

// TestProvisionedCountByState: provisioned_vm_count's state label is the
// pool VM's power state; workers are not pool VMs.
func TestProvisionedCountByState(t *testing.T) {
	t.Parallel()
	pool := func(name, flavor string, idle string, state vctypes.PowerState) inventory.VM {
		return inventory.VM{Name: name, PowerState: state, Annotation: &inventory.Annotation{
			HatcheryName: testHatchery, WorkerName: name, Provisioning: true, VMwareModelPath: "debian12", Flavor: flavor, IdleState: idle}}
	}
	vms := []inventory.VM{
		pool("warmpool-v2-off", "", "", vctypes.PoweredOff),
		pool("warmpool-v2-susp-1", "large", config.IdleStateSuspended, vctypes.Suspended),
		pool("warmpool-v2-susp-2", "large", config.IdleStateSuspended, vctypes.Suspended),
		pool("warmpool-v2-run", "large", config.IdleStatePoweredOn, vctypes.PoweredOn),
		{Name: "worker-1", PowerState: vctypes.PoweredOn, Annotation: &inventory.Annotation{HatcheryName: testHatchery, WorkerName: "worker-1"}},
	}
	got := summarizeVMs(testHatchery, vms).gauges().ProvisionedVMs
	assert.Equal(t, map[string]int64{"poweredOff": 1, "suspended": 2, "poweredOn": 1}, got)
}

// poolPort answers every resource pool lookup with err.
type poolPort struct{ err error }

func (p poolPort) LoadResourcePool(context.Context) (vctypes.Ref, error) { return vctypes.Ref{}, p.err }

func (p poolPort) ResourcePoolRuntime(context.Context, vctypes.Ref) (*vctypes.PoolRuntime, error) {
	return nil, errors.New("not reached")
}

// TestUnresolvedPoolIsNoWarning: a pool the vCenter client cannot resolve
// (vctypes.ErrPlacementUnresolved: it logged it once as an ERROR, and
// /mon/status shows it) is counted as a failed source at every pass but
// logged at DEBUG, not as a WARN every 30 s; any other pool error is still
// a WARN. It fails if the collector warned on the topology problem.
func TestUnresolvedPoolIsNoWarning(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		warn bool
	}{
		{fmt.Errorf("find default resource pool: %w", vctypes.ErrPlacementUnresolved), false},
		{errors.New("connection reset"), true},
	} {
		var logs bytes.Buffer
		m, err := metrics.New("h")
		require.NoError(t, err)
		c := New(Options{Hatchery: "h", Config: &config.Config{}, Inventory: inventorytest.New(), Port: poolPort{tc.err},
			PoolRuntime: func() *vctypes.PoolRuntime { return nil },
			Log:         slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		for range 3 {
			c.Collect(context.Background(), m)
		}
		m.Close()
		assert.Equal(t, tc.warn, strings.Contains(logs.String(), "level=WARN"), "%v:\n%s", tc.err, logs.String())
		assert.Contains(t, logs.String(), "resource pool")
	}
}

// TestCollectReadsPlacements: a pass reads the placement set it is given
// (the statuses in metric terms, every state listed); without a set, or
// with the hatchery's set still nil, no placement gauge and no failure.
func TestCollectReadsPlacements(t *testing.T) {
	t.Parallel()
	set := placementtest.NewPlacements(placement.Status{Name: "cluster-a", State: placement.StateProbing, VMs: 2, CPUs: 4, MemoryMB: 8192,
		HeadroomCPUs: placement.Unknown, HeadroomMemoryMB: 1024, Clones: 3, CloneFailures: 2,
		Datastores: []placement.DatastoreStatus{{Name: "ds-a1", FreeBytes: 10, CapacityBytes: 100, FloorBytes: 5, Accessible: true}}})
	for _, tc := range []struct {
		name string
		set  func() placement.Set
		want bool
	}{
		{"a set", func() placement.Set { return set }, true},
		{"the hatchery's set not built yet", func() placement.Set { return nil }, false},
		{"no set", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, err := metrics.New("h")
			require.NoError(t, err)
			t.Cleanup(m.Close)
			var logs bytes.Buffer
			c := New(Options{Hatchery: "h", Config: &config.Config{}, Inventory: inventorytest.New(), Port: poolPort{nil},
				PoolRuntime: func() *vctypes.PoolRuntime { return &vctypes.PoolRuntime{} }, Placements: tc.set,
				Log: slog.New(slog.NewTextHandler(&logs, nil))})
			c.Collect(context.Background(), m)
			fams := testutil.Scrape(t, m.Handler())
			assert.NotContains(t, logs.String(), "level=WARN")
			if !tc.want {
				assert.NotContains(t, fams, "cds_hatchery_vsphere_placement_state")
				return
			}
			a := func(kv ...string) testutil.Labels {
				return testutil.ServiceLabels("h", append([]string{"placement", "cluster-a"}, kv...)...)
			}
			for _, st := range placement.States {
				v, ok := testutil.Series(fams, "cds_hatchery_vsphere_placement_state", a("state", string(st)))
				assert.True(t, ok, st)
				assert.Equal(t, map[placement.State]float64{placement.StateProbing: 1}[st], v, st)
			}
			v, _ := testutil.Series(fams, "cds_hatchery_vsphere_placement_vcpus", a())
			assert.Equal(t, 4.0, v)
			v, _ = testutil.Series(fams, "cds_hatchery_vsphere_placement_clone_failures", a())
			assert.Equal(t, 2.0, v)
			_, ok := testutil.Series(fams, "cds_hatchery_vsphere_placement_headroom_vcpus", a())
			assert.False(t, ok, "placement.Unknown headroom is not exported")
			v, _ = testutil.Series(fams, "cds_hatchery_vsphere_placement_headroom_memory_mb", a())
			assert.Equal(t, 1024.0, v)
			v, _ = testutil.Series(fams, "cds_hatchery_vsphere_datastore_floor_bytes", a("datastore", "ds-a1"))
			assert.Equal(t, 5.0, v)
		})
	}
}
