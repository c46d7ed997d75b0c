package vsphere

import (
	"context"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"
)

// refusals returns capacity_refusals by resource from a scrape of m.
func refusals(t *testing.T, m *Metrics, hatchery string) map[CapacityResource]float64 {
	t.Helper()
	fams := scrape(t, m)
	out := map[CapacityResource]float64{}
	for _, r := range CapacityResources {
		v, ok := series(fams, "cds_hatchery_vsphere_capacity_refusals", svc(hatchery, "resource", string(r)))
		require.True(t, ok, "capacity_refusals{resource=%q}", r)
		out[r] = v
	}
	return out
}

// TestCapacityRefusalsByResource: each refusal of CanAllocateResources
// counts once under the resource it found exhausted; an allowed worker
// counts nothing.
func TestCapacityRefusalsByResource(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		cfg    config.Config
		used   []inventory.VM
		pool   func(*capPool)
		flavor string
		want   CapacityResource // "" allowed
	}{
		{name: "fits", cfg: config.Config{MaxCPUs: 16}, flavor: "small"},
		{name: "maxCpus", cfg: config.Config{MaxCPUs: 4}, used: capUsedVMs(1, 4, 1024), flavor: "small", want: CapacityCPU},
		{name: "maxMemoryMB", cfg: config.Config{MaxMemoryMB: 4096}, used: capUsedVMs(1, 1, 4096), flavor: "small", want: CapacityMemory},
		{name: "cpu reserve for smaller flavors", cfg: config.Config{MaxCPUs: 15, CountSmallerFlavorToKeep: 2}, used: capUsedVMs(1, 8, 1024), flavor: "medium", want: CapacityCPU},
		{name: "resource pool cpu", pool: func(p *capPool) { p.set(1<<20, 0) }, flavor: "small", want: CapacityCPU},
		{name: "resource pool memory", pool: func(p *capPool) { p.set(1, 100000) }, flavor: "small", want: CapacityMemory},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.cfg.Flavors = capFlavors()
			env := newCapEnv(t, tc.cfg)
			m, err := NewMetrics(capHatcheryName)
			require.NoError(t, err)
			t.Cleanup(m.Close)
			env.h.metrics = m
			env.inv.set(tc.used...)
			if tc.pool != nil {
				tc.pool(env.pool)
			}
			ok, err := env.h.CanAllocateResources(context.Background(), capV2(tc.flavor), "job", nil)
			require.NoError(t, err)
			require.Equal(t, tc.want == "", ok)
			want := map[CapacityResource]float64{CapacityCPU: 0, CapacityMemory: 0, CapacityIP: 0, CapacityCount: 0}
			if tc.want != "" {
				want[tc.want] = 1
			}
			assert.Equal(t, want, refusals(t, m, capHatcheryName))
		})
	}
}

// TestCapacityRefusalsNoFreeIP: CanSpawn refusing for want of a static IP
// counts resource="ip".
func TestCapacityRefusalsNoFreeIP(t *testing.T) {
	t.Parallel()
	cfg := spConfig()
	cfg.IPRange = "10.0.0.1/30"
	f := newSpFixture(t, cfg)
	m, err := NewMetrics(cfg.CommonConfiguration.Name)
	require.NoError(t, err)
	t.Cleanup(m.Close)
	f.h.metrics = m
	f.inv.vms = []inventory.VM{
		{Name: "a", PowerState: types.VirtualMachinePowerStatePoweredOff, Annotation: &inventory.Annotation{HatcheryName: spHatchery, IPAddress: "10.0.0.1"}},
		{Name: "b", IPAddresses: []string{"10.0.0.2"}},
	}
	require.False(t, f.h.CanSpawn(context.Background(), spV2Args().Model, "run-1", nil))
	require.False(t, f.h.CanSpawn(context.Background(), spV2Args().Model, "run-2", nil))
	got := refusals(t, m, cfg.CommonConfiguration.Name)
	assert.Equal(t, 2.0, got[CapacityIP])
	assert.Zero(t, got[CapacityCPU]+got[CapacityMemory]+got[CapacityCount])
}

// TestCapacityRefusedNilMetrics: a hatchery without metrics refuses just
// the same.
func TestCapacityRefusedNilMetrics(t *testing.T) {
	t.Parallel()
	var m *Metrics
	m.CapacityRefused(CapacityCPU) // must not panic
	env := newCapEnv(t, config.Config{MaxCPUs: 4, Flavors: capFlavors()})
	env.inv.set(capUsedVMs(1, 4, 1024)...)
	ok, err := env.h.CanAllocateResources(context.Background(), capV2("small"), "job", nil)
	require.NoError(t, err)
	assert.False(t, ok)
}

// TestMetricsHeartbeatFailures: heartbeat_failures counts consecutive
// failures and goes back to 0 on a success.
func TestMetricsHeartbeatFailures(t *testing.T) {
	t.Parallel()
	m, err := NewMetrics(testHatchery)
	require.NoError(t, err)
	t.Cleanup(m.Close)
	get := func() float64 {
		t.Helper()
		v, ok := series(scrape(t, m), "cds_hatchery_vsphere_heartbeat_failures", svc(testHatchery))
		require.True(t, ok)
		return v
	}
	assert.Zero(t, get())
	m.HeartbeatSent(false)
	m.HeartbeatSent(false)
	assert.Equal(t, 2.0, get())
	m.HeartbeatSent(true)
	assert.Zero(t, get())
	m.HeartbeatSent(false)
	assert.Equal(t, 1.0, get())
}

// TestMetricsHealthReadAtScrape: the health gauges follow the Health hook
// at every scrape, with no collection pass; without a shared inventory the
// inventory gauges are absent, and so is the age before a first refresh.
func TestMetricsHealthReadAtScrape(t *testing.T) {
	t.Parallel()
	m, err := NewMetrics(testHatchery)
	require.NoError(t, err)
	t.Cleanup(m.Close)

	fams := scrape(t, m)
	assert.NotContains(t, fams, "cds_hatchery_vsphere_vcenter_up", "no hook, no gauge")

	hl := make(chan Health, 1)
	m.Health = func() Health { return <-hl }
	hl <- Health{VCenterUp: true, Inventory: true, InventoryAge: 90 * time.Second}
	fams = scrape(t, m)
	v, ok := series(fams, "cds_hatchery_vsphere_vcenter_up", svc(testHatchery))
	assert.True(t, ok)
	assert.Equal(t, 1.0, v)
	v, ok = series(fams, "cds_hatchery_vsphere_inventory_stale", svc(testHatchery))
	assert.True(t, ok)
	assert.Zero(t, v)
	v, ok = series(fams, "cds_hatchery_vsphere_inventory_age_seconds", svc(testHatchery))
	assert.True(t, ok)
	assert.Equal(t, 90.0, v)

	hl <- Health{VCenterUp: false, Inventory: true, InventoryStale: true, InventoryAge: 300 * time.Second}
	fams = scrape(t, m)
	v, _ = series(fams, "cds_hatchery_vsphere_vcenter_up", svc(testHatchery))
	assert.Zero(t, v)
	v, _ = series(fams, "cds_hatchery_vsphere_inventory_stale", svc(testHatchery))
	assert.Equal(t, 1.0, v)
	v, _ = series(fams, "cds_hatchery_vsphere_inventory_age_seconds", svc(testHatchery))
	assert.Equal(t, 300.0, v)

	// Listing mode, on a fresh Metrics: no inventory gauges at all.
	l, err := NewMetrics(testHatchery)
	require.NoError(t, err)
	t.Cleanup(l.Close)
	l.Health = func() Health { return Health{VCenterUp: true, InventoryAge: -1} }
	fams = scrape(t, l)
	_, ok = series(fams, "cds_hatchery_vsphere_vcenter_up", svc(testHatchery))
	assert.True(t, ok)
	assert.NotContains(t, fams, "cds_hatchery_vsphere_inventory_stale")
	assert.NotContains(t, fams, "cds_hatchery_vsphere_inventory_age_seconds")
}

// TestMetricsWarmPoolTarget: provisioned_vm_target is the sum of the
// configured warm pools, 0 without any.
func TestMetricsWarmPoolTarget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pools []config.WorkerProvisioning
		want  float64
	}{
		{nil, 0},
		{[]config.WorkerProvisioning{{ModelVMWare: "debian12", Number: 2}, {ModelPath: "shared.infra/m", Number: 3, Flavor: "large"}}, 5},
	} {
		cfg := fixtureConfig(testHatchery)
		cfg.WorkerProvisioning = tc.pools
		e := newTestEnv(t, cfg)
		e.inv.set(fixtureVMs(), nil)
		e.expectPool(fixtureRuntime())
		e.h.collectMetrics(context.Background(), e.m)
		v, ok := series(scrape(t, e.m), "cds_hatchery_vsphere_provisioned_vm_target", svc(testHatchery))
		assert.True(t, ok)
		assert.Equal(t, tc.want, v)
	}
}
