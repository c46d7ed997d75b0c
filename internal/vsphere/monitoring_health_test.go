package vsphere

import (
	"context"
	"testing"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refusals returns capacity_refusals by resource from a scrape of m.
func refusals(t *testing.T, m *metrics.Metrics, hatchery string) map[metrics.CapacityResource]float64 {
	t.Helper()
	fams := scrape(t, m)
	out := map[metrics.CapacityResource]float64{}
	for _, r := range metrics.CapacityResources {
		v, ok := series(fams, "cds_hatchery_vsphere_capacity_refusals", svc(hatchery, "resource", string(r)))
		require.True(t, ok, "capacity_refusals{resource=%q}", r)
		out[r] = v
	}
	return out
}

// TestCapacityRefusalsByResource: each refusal of AllocateResources
// carries the code of the resource it found exhausted (which the daemon's
// observer counts, once, under capacity_refusals: metrics.CapacityResourceOf);
// the hatchery itself counts nothing, the framework's report of the
// refusal being capacity_refusals' one door (internal/daemon).
func TestCapacityRefusalsByResource(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		cfg    config.Config
		used   []inventory.VM
		pool   func(*capPool)
		flavor string
		want   metrics.CapacityResource // "" allowed
	}{
		{name: "fits", cfg: config.Config{MaxCPUs: 16}, flavor: "small"},
		{name: "maxCpus", cfg: config.Config{MaxCPUs: 4}, used: capUsedVMs(1, 4, 1024), flavor: "small", want: metrics.CapacityCPU},
		{name: "maxMemoryMB", cfg: config.Config{MaxMemoryMB: 4096}, used: capUsedVMs(1, 1, 4096), flavor: "small", want: metrics.CapacityMemory},
		{name: "cpu reserve for smaller flavors", cfg: config.Config{MaxCPUs: 15, CountSmallerFlavorToKeep: 2}, used: capUsedVMs(1, 8, 1024), flavor: "medium", want: metrics.CapacityCPU},
		{name: "resource pool cpu", pool: func(p *capPool) { p.set(1<<20, 0) }, flavor: "small", want: metrics.CapacityCPU},
		{name: "resource pool memory", pool: func(p *capPool) { p.set(1, 100000) }, flavor: "small", want: metrics.CapacityMemory},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.cfg.Flavors = capFlavors()
			env := newCapEnv(t, tc.cfg)
			m, err := metrics.New(capHatcheryName)
			require.NoError(t, err)
			t.Cleanup(m.Close)
			env.h.metrics = m
			env.inv.Set(tc.used...)
			if tc.pool != nil {
				tc.pool(env.pool)
			}
			res, err := env.h.AllocateResources(context.Background(), capV2(tc.flavor), "job", nil)
			if tc.want == "" {
				require.NoError(t, err)
				res.Release(refusal.ReasonShutdown)
			} else {
				var r *refusal.Refusal
				require.ErrorAs(t, err, &r)
				got, counted := metrics.CapacityResourceOf(r.Reason)
				require.True(t, counted, "%q names an exhausted resource", r.Reason)
				assert.Equal(t, tc.want, got)
			}
			want := map[metrics.CapacityResource]float64{}
			for _, r := range metrics.CapacityResources {
				want[r] = 0
			}
			assert.Equal(t, want, refusals(t, m, capHatcheryName), "the hatchery counts no refusal itself")
		})
	}
}

// TestCapacityRefusalsNoFreeIP: CanSpawn refusing for want of a static IP
// gives the code counted as resource="ip", and counts nothing itself (the
// framework reports the refusal to capacity_refusals' one door).
func TestCapacityRefusalsNoFreeIP(t *testing.T) {
	t.Parallel()
	cfg := spConfig()
	cfg.IPRange = "10.0.0.1/30"
	f := newSpFixture(t, cfg)
	m, err := metrics.New(cfg.CommonConfiguration.Name)
	require.NoError(t, err)
	t.Cleanup(m.Close)
	f.h.metrics = m
	f.inv.Set([]inventory.VM{
		{Name: "a", PowerState: vctypes.PoweredOff, Annotation: &inventory.Annotation{HatcheryName: spHatchery, IPAddress: "10.0.0.1"}},
		{Name: "b", IPAddresses: []string{"10.0.0.2"}},
	}...)
	require.Equal(t, refusal.ReasonIP, f.h.CanSpawn(context.Background(), spV2Args().Model, "run-1", nil).Reason)
	require.Equal(t, refusal.ReasonIP, f.h.CanSpawn(context.Background(), spV2Args().Model, "run-2", nil).Reason)
	res, _ := metrics.CapacityResourceOf(refusal.ReasonIP)
	assert.Equal(t, metrics.CapacityIP, res)
	got := refusals(t, m, cfg.CommonConfiguration.Name)
	assert.Zero(t, got[metrics.CapacityIP]+got[metrics.CapacityCPU]+got[metrics.CapacityMemory]+got[metrics.CapacityCount])
}

// TestCapacityRefusedNilMetrics: a hatchery without metrics refuses just
// the same.
func TestCapacityRefusedNilMetrics(t *testing.T) {
	t.Parallel()
	var m *metrics.Metrics
	m.Refused(refusal.ReasonCapacityCPU) // must not panic
	env := newCapEnv(t, config.Config{MaxCPUs: 4, Flavors: capFlavors()})
	env.inv.Set(capUsedVMs(1, 4, 1024)...)
	ok, err := env.h.CanAllocateResources(context.Background(), capV2("small"), "job", nil)
	require.NoError(t, err)
	assert.False(t, ok)
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
		setInv(e.inv, fixtureVMs(), nil)
		e.expectPool(fixtureRuntime())
		e.h.collectMetrics(context.Background(), e.m)
		v, ok := series(scrape(t, e.m), "cds_hatchery_vsphere_provisioned_vm_target", svc(testHatchery))
		assert.True(t, ok)
		assert.Equal(t, tc.want, v)
	}
}
