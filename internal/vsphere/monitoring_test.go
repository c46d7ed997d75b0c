package vsphere

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory/inventorytest"
	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"

	"github.com/golang/mock/gomock"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/mock_vsphere"
	hatcherysdk "github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
)

// setInv makes inv serve vms, or fail with err when err is not nil.
func setInv(inv *inventorytest.Fixed, vms []inventory.VM, err error) {
	inv.Set(vms...)
	inv.SetErr(err)
}

// syncBuffer is the shared concurrency-safe output sink.
type syncBuffer = testutil.SyncBuffer

const testHatchery = testutil.Hatchery

func poweredOn() vctypes.PowerState  { return vctypes.PoweredOn }
func poweredOff() vctypes.PowerState { return vctypes.PoweredOff }

// fixtureVMs is a datacenter: this hatchery's workers, a pre-provisioned
// VM and a model template; another hatchery's worker; foreign VMs and a
// foreign template.
func fixtureVMs() []inventory.VM {
	ours := func(a inventory.Annotation) *inventory.Annotation { a.HatcheryName = testHatchery; return &a }
	return []inventory.VM{
		{Name: "worker-1", NumCPU: 2, MemoryMB: 4096, PowerState: poweredOn(),
			Annotation: ours(inventory.Annotation{VMwareModelPath: "debian12", IPAddress: "192.168.0.10"})},
		{Name: "worker-2", NumCPU: 4, MemoryMB: 8192, PowerState: poweredOn(),
			Annotation: ours(inventory.Annotation{WorkerModelPath: "shared.infra/ubuntu"}), IPAddresses: []string{"192.168.0.11", "172.17.0.1"}},
		{Name: "warmpool-v2-abc", NumCPU: 2, MemoryMB: 2048, PowerState: poweredOff(),
			Annotation: ours(inventory.Annotation{VMwareModelPath: "debian12", Provisioning: true, IPAddress: "192.168.0.12"})},
		{Name: "shared.infra-ubuntu", Template: true, NumCPU: 1, MemoryMB: 1024, PowerState: poweredOff(),
			Annotation: ours(inventory.Annotation{WorkerModelPath: "shared.infra/ubuntu", Model: true})},
		{Name: "other-worker", NumCPU: 8, MemoryMB: 16384, PowerState: poweredOn(),
			Annotation: &inventory.Annotation{HatcheryName: "hatch-b", VMwareModelPath: "debian12", IPAddress: "192.168.0.20"}},
		{Name: "db-server", NumCPU: 16, MemoryMB: 32768, PowerState: poweredOn(), IPAddresses: []string{"10.0.0.5"}},
		{Name: "debian12", Template: true, NumCPU: 2, MemoryMB: 2048, PowerState: poweredOff()},
		{Name: "old-vm", NumCPU: 1, MemoryMB: 512, PowerState: poweredOff()},
	}
}

func fixtureRuntime() *vctypes.PoolRuntime {
	return &vctypes.PoolRuntime{
		CPUMaxMHz: 10000, CPUUsageMHz: 2500, CPUUnreservedMHz: 7000,
		MemoryMaxBytes: 64 << 30, MemoryUsageBytes: 16 << 30, MemoryUnreservedBytes: 40 << 30,
	}
}

// fixtureConfig has 14 addresses in iprange and 2 in a [[networks]] range.
func fixtureConfig(name string) *config.Config {
	return &config.Config{
		CommonConfiguration: hatcherysdk.CommonConfiguration{Name: name},
		IPRange:             "192.168.0.0/28",
		Networks:            []config.Network{{IPRange: "192.168.0.20/31"}},
	}
}

type testEnv struct {
	h    *HatcheryVSphere
	m    *metrics.Metrics
	vs   *mock_vsphere.MockPort
	inv  *inventorytest.Fixed
	logs *syncBuffer
	pool vctypes.Ref
}

func newTestEnv(t *testing.T, cfg *config.Config) *testEnv {
	t.Helper()
	ctrl := gomock.NewController(t)
	e := &testEnv{
		vs:   mock_vsphere.NewMockPort(ctrl),
		inv:  inventorytest.New(),
		logs: &syncBuffer{},
		pool: vctypes.Ref{Type: "ResourcePool", Value: "resgroup-8"},
	}
	expectIPLocks(e.vs, cfg)
	h, err := New(Options{Config: cfg, Client: e.vs, Inventory: e.inv,
		Logger: slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	require.NoError(t, err)
	e.h = h
	checkLifeBugs(t, h)
	m, err := metrics.New(cfg.CommonConfiguration.Name)
	require.NoError(t, err)
	t.Cleanup(m.Close)
	e.m = m
	return e
}

// expectPool makes the resource pool readable (loaded once, read every pass).
func (e *testEnv) expectPool(rt *vctypes.PoolRuntime) {
	e.vs.EXPECT().LoadResourcePool(gomock.Any()).Return(e.pool, nil).MaxTimes(1)
	e.vs.EXPECT().ResourcePoolRuntime(gomock.Any(), e.pool).Return(rt, nil).AnyTimes()
}

// scrape fetches the Handler over HTTP and parses the Prometheus text.
func scrape(t *testing.T, m *metrics.Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	return testutil.Scrape(t, m.Handler())
}

type labels = testutil.Labels

var (
	series     = testutil.Series
	findMetric = testutil.FindMetric
	svc        = testutil.ServiceLabels
)

func TestMetricsScrapeMatchesFixture(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fixtureConfig(testHatchery))
	setInv(e.inv, fixtureVMs(), nil)
	e.expectPool(fixtureRuntime())

	e.h.collectMetrics(context.Background(), e.m)
	fams := scrape(t, e.m)

	tests := []struct {
		metric string
		labels labels
		want   float64
	}{
		{"cds_hatchery_vsphere_worker_vcpus", svc(testHatchery, "worker_name", "worker-1", "worker_model", "debian12"), 2},
		{"cds_hatchery_vsphere_worker_memory_mb", svc(testHatchery, "worker_name", "worker-1", "worker_model", "debian12"), 4096},
		{"cds_hatchery_vsphere_worker_vcpus", svc(testHatchery, "worker_name", "worker-2", "worker_model", "shared.infra/ubuntu"), 4},
		{"cds_hatchery_vsphere_worker_memory_mb", svc(testHatchery, "worker_name", "worker-2", "worker_model", "shared.infra/ubuntu"), 8192},
		{"cds_hatchery_vsphere_worker_vcpus", svc(testHatchery, "worker_name", "warmpool-v2-abc", "worker_model", "debian12"), 2},
		{"cds_hatchery_vsphere_worker_memory_mb", svc(testHatchery, "worker_name", "warmpool-v2-abc", "worker_model", "debian12"), 2048},
		// Ours, powered on: worker-1 + worker-2.
		{"cds_hatchery_vsphere_allocated_vcpus", svc(testHatchery), 6},
		{"cds_hatchery_vsphere_allocated_memory_mb", svc(testHatchery), 12288},
		// Ours, templates excluded: two workers + one provisioned.
		{"cds_hatchery_vsphere_vm_count", svc(testHatchery), 3},
		// The provisioned vm is powered off; every state has its series.
		{"cds_hatchery_vsphere_provisioned_vm_count", svc(testHatchery, "state", "poweredOff"), 1},
		{"cds_hatchery_vsphere_provisioned_vm_count", svc(testHatchery, "state", "suspended"), 0},
		{"cds_hatchery_vsphere_provisioned_vm_count", svc(testHatchery, "state", "poweredOn"), 0},
		{"cds_hatchery_vsphere_template_vcpus", svc(testHatchery), 1},
		{"cds_hatchery_vsphere_template_memory_mb", svc(testHatchery), 1024},
		{"cds_hatchery_vsphere_template_count", svc(testHatchery), 1},
		// Every non-template VM: 6; powered on: worker-1, worker-2, other-worker, db-server.
		{"cds_hatchery_vsphere_pool_total_vm_count", svc(testHatchery), 6},
		{"cds_hatchery_vsphere_pool_total_vcpus", svc(testHatchery), 2 + 4 + 8 + 16},
		{"cds_hatchery_vsphere_pool_total_memory_mb", svc(testHatchery), 4096 + 8192 + 16384 + 32768},
		{"cds_hatchery_vsphere_resource_pool_cpu_max_mhz", svc(testHatchery), 10000},
		{"cds_hatchery_vsphere_resource_pool_cpu_usage_mhz", svc(testHatchery), 2500},
		{"cds_hatchery_vsphere_resource_pool_cpu_unreserved_mhz", svc(testHatchery), 7000},
		{"cds_hatchery_vsphere_resource_pool_memory_max_bytes", svc(testHatchery), 64 << 30},
		{"cds_hatchery_vsphere_resource_pool_memory_usage_bytes", svc(testHatchery), 16 << 30},
		{"cds_hatchery_vsphere_resource_pool_memory_unreserved_bytes", svc(testHatchery), 40 << 30},
		// .10 (annotation), .11 (guest), .12 (annotation, powered off),
		// .20 (another hatchery's VM); 10.0.0.5 and 172.17.0.1 are out of range.
		{"cds_hatchery_vsphere_ip_used_count", svc(testHatchery), 4},
		{"cds_hatchery_vsphere_ip_total_count", svc(testHatchery), 14 + 2},
	}
	for _, tt := range tests {
		got, ok := series(fams, tt.metric, tt.labels)
		if assert.True(t, ok, "%s%v missing", tt.metric, tt.labels) {
			assert.Equal(t, tt.want, got, "%s%v", tt.metric, tt.labels)
		}
		assert.Equal(t, dto.MetricType_GAUGE, fams[tt.metric].GetType(), tt.metric)
	}

	// Only our non-template VMs have per-worker series.
	assert.Len(t, fams["cds_hatchery_vsphere_worker_vcpus"].GetMetric(), 3)
	for _, name := range []string{"other-worker", "db-server", "debian12", "old-vm", "shared.infra-ubuntu"} {
		_, ok := series(fams, "cds_hatchery_vsphere_worker_vcpus", labels{"worker_name": name})
		assert.False(t, ok, "unexpected per-worker series for %s", name)
	}
	// No source failed: every collection_errors series is still at its 0.
	assert.Len(t, fams["cds_hatchery_vsphere_collection_errors"].GetMetric(), 4)
	for _, mt := range fams["cds_hatchery_vsphere_collection_errors"].GetMetric() {
		assert.Zero(t, mt.GetCounter().GetValue(), "collection_errors%v", mt.GetLabel())
	}
}

func TestMetricsDestroyedWorkerSeriesGone(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fixtureConfig(testHatchery))
	setInv(e.inv, fixtureVMs(), nil)
	e.expectPool(fixtureRuntime())

	e.h.collectMetrics(context.Background(), e.m)
	_, ok := series(scrape(t, e.m), "cds_hatchery_vsphere_worker_vcpus", labels{"worker_name": "worker-1"})
	require.True(t, ok)

	var remaining []inventory.VM
	for _, v := range fixtureVMs() {
		if v.Name != "worker-1" {
			remaining = append(remaining, v)
		}
	}
	setInv(e.inv, remaining, nil)
	e.h.collectMetrics(context.Background(), e.m)
	fams := scrape(t, e.m)

	for _, metric := range []string{"cds_hatchery_vsphere_worker_vcpus", "cds_hatchery_vsphere_worker_memory_mb"} {
		_, ok := series(fams, metric, labels{"worker_name": "worker-1"})
		assert.False(t, ok, "%s of the destroyed worker is still exported", metric)
		_, ok = series(fams, metric, labels{"worker_name": "worker-2"})
		assert.True(t, ok, "%s of a live worker is gone", metric)
	}
	vmCount, _ := series(fams, "cds_hatchery_vsphere_vm_count", svc(testHatchery))
	assert.Equal(t, 2.0, vmCount)
	alloc, _ := series(fams, "cds_hatchery_vsphere_allocated_vcpus", svc(testHatchery))
	assert.Equal(t, 4.0, alloc)
}

func TestMetricsResourcePoolUnreadable(t *testing.T) {
	t.Parallel()
	rpMetrics := []string{
		"cds_hatchery_vsphere_resource_pool_cpu_max_mhz",
		"cds_hatchery_vsphere_resource_pool_cpu_usage_mhz",
		"cds_hatchery_vsphere_resource_pool_cpu_unreserved_mhz",
		"cds_hatchery_vsphere_resource_pool_memory_max_bytes",
		"cds_hatchery_vsphere_resource_pool_memory_usage_bytes",
		"cds_hatchery_vsphere_resource_pool_memory_unreserved_bytes",
	}
	denied := errors.New("permission to read pool denied")

	tests := []struct {
		name   string
		expect func(e *testEnv)
	}{
		{"load fails", func(e *testEnv) {
			e.vs.EXPECT().LoadResourcePool(gomock.Any()).Return(vctypes.Ref{}, denied)
		}},
		{"runtime fails", func(e *testEnv) {
			e.vs.EXPECT().LoadResourcePool(gomock.Any()).Return(e.pool, nil)
			e.vs.EXPECT().ResourcePoolRuntime(gomock.Any(), e.pool).Return(nil, denied)
		}},
		{"readable then fails", func(e *testEnv) {
			e.vs.EXPECT().LoadResourcePool(gomock.Any()).Return(e.pool, nil)
			gomock.InOrder(
				e.vs.EXPECT().ResourcePoolRuntime(gomock.Any(), e.pool).Return(fixtureRuntime(), nil),
				e.vs.EXPECT().ResourcePoolRuntime(gomock.Any(), e.pool).Return(nil, denied),
			)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newTestEnv(t, fixtureConfig(testHatchery))
			setInv(e.inv, fixtureVMs(), nil)
			tt.expect(e)
			if tt.name == "readable then fails" {
				e.h.collectMetrics(context.Background(), e.m)
				_, ok := series(scrape(t, e.m), rpMetrics[0], svc(testHatchery))
				require.True(t, ok)
			}

			e.h.collectMetrics(context.Background(), e.m)
			fams := scrape(t, e.m)

			for _, metric := range rpMetrics {
				assert.NotContains(t, fams, metric)
			}
			vmCount, ok := series(fams, "cds_hatchery_vsphere_vm_count", svc(testHatchery))
			assert.True(t, ok)
			assert.Equal(t, 3.0, vmCount)
			_, ok = series(fams, "cds_hatchery_vsphere_ip_used_count", svc(testHatchery))
			assert.True(t, ok)
			_, ok = series(fams, "cds_hatchery_vsphere_worker_vcpus", labels{"worker_name": "worker-1"})
			assert.True(t, ok)
			errs, ok := series(fams, "cds_hatchery_vsphere_collection_errors", svc(testHatchery, "source", "resource_pool"))
			assert.True(t, ok)
			assert.Equal(t, 1.0, errs)

			logs := e.logs.String()
			assert.Contains(t, logs, "level=WARN")
			assert.Contains(t, logs, "resource pool unreadable")
			assert.Contains(t, logs, denied.Error())
		})
	}
}

func TestMetricsResourcePoolReloadedAfterFailure(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fixtureConfig(testHatchery))
	setInv(e.inv, fixtureVMs(), nil)
	gomock.InOrder(
		e.vs.EXPECT().LoadResourcePool(gomock.Any()).Return(e.pool, nil),
		e.vs.EXPECT().ResourcePoolRuntime(gomock.Any(), e.pool).Return(nil, errors.New("pool gone")),
		e.vs.EXPECT().LoadResourcePool(gomock.Any()).Return(e.pool, nil),
		e.vs.EXPECT().ResourcePoolRuntime(gomock.Any(), e.pool).Return(fixtureRuntime(), nil),
		// Loaded pool is kept: the third pass reads the runtime only.
		e.vs.EXPECT().ResourcePoolRuntime(gomock.Any(), e.pool).Return(fixtureRuntime(), nil),
	)
	for range 3 {
		e.h.collectMetrics(context.Background(), e.m)
	}
	v, ok := series(scrape(t, e.m), "cds_hatchery_vsphere_resource_pool_memory_max_bytes", svc(testHatchery))
	assert.True(t, ok)
	assert.Equal(t, float64(64<<30), v)
}

func TestMetricsInventoryUnreadable(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fixtureConfig(testHatchery))
	e.expectPool(fixtureRuntime())
	setInv(e.inv, fixtureVMs(), nil)
	e.h.collectMetrics(context.Background(), e.m)

	setInv(e.inv, nil, errors.New("vcenter unreachable"))
	e.h.collectMetrics(context.Background(), e.m)
	fams := scrape(t, e.m)

	for _, metric := range []string{
		"cds_hatchery_vsphere_worker_vcpus", "cds_hatchery_vsphere_vm_count",
		"cds_hatchery_vsphere_pool_total_vm_count", "cds_hatchery_vsphere_ip_used_count",
	} {
		assert.NotContains(t, fams, metric, "stale value of an unreadable inventory")
	}
	_, ok := series(fams, "cds_hatchery_vsphere_resource_pool_cpu_max_mhz", svc(testHatchery))
	assert.True(t, ok)
	n, _ := series(fams, "cds_hatchery_vsphere_collection_errors", svc(testHatchery, "source", "inventory"))
	assert.Equal(t, 1.0, n)
	assert.Contains(t, e.logs.String(), "vcenter unreachable")
}

func TestMetricsCanceledPassChangesNothing(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fixtureConfig(testHatchery))
	e.expectPool(fixtureRuntime())
	setInv(e.inv, fixtureVMs(), nil)
	e.h.collectMetrics(context.Background(), e.m)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	setInv(e.inv, nil, ctx.Err())
	e.h.collectMetrics(ctx, e.m)

	v, ok := series(scrape(t, e.m), "cds_hatchery_vsphere_vm_count", svc(testHatchery))
	assert.True(t, ok)
	assert.Equal(t, 3.0, v)
}

func TestMetricsNoIPRangeNoIPGauges(t *testing.T) {
	t.Parallel()
	cfg := fixtureConfig(testHatchery)
	cfg.IPRange, cfg.Networks = "", nil
	e := newTestEnv(t, cfg)
	e.expectPool(fixtureRuntime())
	setInv(e.inv, fixtureVMs(), nil)
	e.h.collectMetrics(context.Background(), e.m)
	fams := scrape(t, e.m)
	assert.NotContains(t, fams, "cds_hatchery_vsphere_ip_used_count")
	assert.NotContains(t, fams, "cds_hatchery_vsphere_ip_total_count")
	assert.Contains(t, fams, "cds_hatchery_vsphere_vm_count")
}

func TestMetricsFlavorHeadroom(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fixtureConfig(testHatchery))
	e.expectPool(fixtureRuntime())
	setInv(e.inv, fixtureVMs(), nil)

	var mu sync.Mutex
	headroom, headroomErr := map[string]int{"small": 3, "medium": 1, "large": 0}, error(nil)
	e.m.Headroom = func(ctx context.Context) (map[string]int, error) {
		mu.Lock()
		defer mu.Unlock()
		return headroom, headroomErr
	}

	e.h.collectMetrics(context.Background(), e.m)
	fams := scrape(t, e.m)
	for flavor, want := range map[string]float64{"small": 3, "medium": 1, "large": 0} {
		got, ok := series(fams, "cds_hatchery_vsphere_flavor_headroom", svc(testHatchery, "flavor", flavor))
		if assert.True(t, ok, flavor) {
			assert.Equal(t, want, got, flavor)
		}
	}

	mu.Lock()
	headroom, headroomErr = nil, errors.New("capacity check failed")
	mu.Unlock()
	e.h.collectMetrics(context.Background(), e.m)
	fams = scrape(t, e.m)
	assert.NotContains(t, fams, "cds_hatchery_vsphere_flavor_headroom")
	n, _ := series(fams, "cds_hatchery_vsphere_collection_errors", svc(testHatchery, "source", "headroom"))
	assert.Equal(t, 1.0, n)
	assert.Contains(t, fams, "cds_hatchery_vsphere_vm_count")
}

func TestMetricsHeadroomNilNotRecorded(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fixtureConfig(testHatchery))
	e.expectPool(fixtureRuntime())
	setInv(e.inv, fixtureVMs(), nil)
	e.h.collectMetrics(context.Background(), e.m)
	fams := scrape(t, e.m)
	assert.NotContains(t, fams, "cds_hatchery_vsphere_flavor_headroom")
	assert.NotContains(t, fams, "cds_hatchery_vsphere_soap_requests")
}

func TestMetricsSOAPCounters(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fixtureConfig(testHatchery))
	e.expectPool(fixtureRuntime())
	setInv(e.inv, fixtureVMs(), nil)
	snapshots := []map[string]metrics.SOAPCount{
		{"RetrievePropertiesEx": {Requests: 10, Bytes: 5000}, "CloneVM_Task": {Requests: 1, Bytes: 800}},
		{"RetrievePropertiesEx": {Requests: 25, Bytes: 12000}, "CloneVM_Task": {Requests: 1, Bytes: 800}},
		// The client restarted: its counters start over.
		{"RetrievePropertiesEx": {Requests: 3, Bytes: 1000}, "CloneVM_Task": {Requests: 1, Bytes: 800}},
	}
	var i int
	e.m.SOAP = func() map[string]metrics.SOAPCount { return snapshots[i] } // called by the pass only

	want := []struct{ retrieve, retrieveBytes, clone float64 }{{10, 5000, 1}, {25, 12000, 1}, {28, 13000, 1}}
	for i = range snapshots {
		e.h.collectMetrics(context.Background(), e.m)
		fams := scrape(t, e.m)
		assert.Equal(t, dto.MetricType_COUNTER, fams["cds_hatchery_vsphere_soap_requests"].GetType())
		got, _ := series(fams, "cds_hatchery_vsphere_soap_requests", svc(testHatchery, "method", "RetrievePropertiesEx"))
		assert.Equal(t, want[i].retrieve, got, "pass %d", i)
		got, _ = series(fams, "cds_hatchery_vsphere_soap_bytes", svc(testHatchery, "method", "RetrievePropertiesEx"))
		assert.Equal(t, want[i].retrieveBytes, got, "pass %d", i)
		got, _ = series(fams, "cds_hatchery_vsphere_soap_requests", svc(testHatchery, "method", "CloneVM_Task"))
		assert.Equal(t, want[i].clone, got, "pass %d", i)
	}
}

func TestMetricsInstancesDoNotInterfere(t *testing.T) {
	t.Parallel()
	// Two hatcheries in one process, and a third with the same name as the
	// first (as two tests may have): each scrape shows its own data only.
	a := newTestEnv(t, fixtureConfig("hatch-a"))
	b := newTestEnv(t, fixtureConfig("hatch-b"))
	c := newTestEnv(t, fixtureConfig("hatch-a"))
	for _, e := range []*testEnv{a, b, c} {
		e.expectPool(fixtureRuntime())
		setInv(e.inv, fixtureVMs(), nil)
	}
	setInv(c.inv, fixtureVMs()[:1], nil) // hatch-a again, one worker only

	var wg sync.WaitGroup
	for _, e := range []*testEnv{a, b, c} {
		wg.Go(func() {
			e.h.collectMetrics(context.Background(), e.m)
			e.m.SpawnStarted("debian12")
		})
	}
	wg.Wait()

	scrapes := make([]map[string]*dto.MetricFamily, 3)
	for i, e := range []*testEnv{a, b, c} {
		wg.Go(func() { scrapes[i] = scrape(t, e.m) })
	}
	wg.Wait()

	want := []struct {
		service         string
		vmCount, starts float64
		workers         []string
	}{
		{"hatch-a", 3, 1, []string{"warmpool-v2-abc", "worker-1", "worker-2"}},
		{"hatch-b", 1, 1, []string{"other-worker"}},
		{"hatch-a", 1, 1, []string{"worker-1"}},
	}
	for i, w := range want {
		fams := scrapes[i]
		for _, f := range fams {
			for _, mt := range f.GetMetric() {
				for _, lp := range mt.GetLabel() {
					if lp.GetName() == "service_name" {
						assert.Equal(t, w.service, lp.GetValue(), "instance %d exports %s of another instance", i, f.GetName())
					}
				}
			}
		}
		n, _ := series(fams, "cds_hatchery_vsphere_vm_count", svc(w.service))
		assert.Equal(t, w.vmCount, n, "instance %d", i)
		n, _ = series(fams, "cds_hatchery_vsphere_spawns_started", svc(w.service))
		assert.Equal(t, w.starts, n, "instance %d", i)
		var workers []string
		for _, mt := range fams["cds_hatchery_vsphere_worker_vcpus"].GetMetric() {
			for _, lp := range mt.GetLabel() {
				if lp.GetName() == "worker_name" {
					workers = append(workers, lp.GetValue())
				}
			}
		}
		sort.Strings(workers)
		assert.Equal(t, w.workers, workers, "instance %d", i)
	}
}

func TestRunMetricsCollectsUntilCanceled(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fixtureConfig(testHatchery))
	e.expectPool(fixtureRuntime())
	setInv(e.inv, fixtureVMs(), nil)
	calls := make(chan struct{})
	e.inv.SetHook(func(ctx context.Context) error {
		select {
		case calls <- struct{}{}:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.h.RunMetrics(ctx, e.m, time.Millisecond)
	}()
	// Two passes: the first at once, the second from the ticker.
	for range 2 {
		select {
		case <-calls:
		case <-time.After(10 * time.Second):
			t.Fatal("no collection pass")
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("RunMetrics did not return after cancel")
	}
	assert.Contains(t, scrape(t, e.m), "cds_hatchery_vsphere_vm_count")
}
