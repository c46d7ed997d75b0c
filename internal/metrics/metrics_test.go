package metrics

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opencensus.io/stats/view"
)

func TestMetricsSpawnCounters(t *testing.T) {
	t.Parallel()
	m, err := New(testHatchery)
	require.NoError(t, err)
	t.Cleanup(m.Close)

	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { m.SpawnStarted("debian12") })
	}
	wg.Go(func() { m.SpawnStarted("shared.infra/ubuntu") })
	wg.Wait()
	m.SpawnSucceeded("debian12", 42*time.Second)
	m.SpawnSucceeded("debian12", 200*time.Second)
	m.SpawnFailed("debian12", SpawnFailureClone)
	m.SpawnFailed("shared.infra/ubuntu", SpawnFailureReason("password=hunter2")) // unknown: "other"

	fams := scrape(t, m)
	counter := func(name string, l labels) float64 {
		t.Helper()
		f := fams[name]
		require.NotNil(t, f, name)
		assert.Equal(t, dto.MetricType_COUNTER, f.GetType(), name)
		v, ok := series(fams, name, l)
		assert.True(t, ok, "%s%v", name, l)
		return v
	}
	assert.Equal(t, 3.0, counter("cds_hatchery_vsphere_spawns_started", svc(testHatchery, "worker_model", "debian12")))
	assert.Equal(t, 1.0, counter("cds_hatchery_vsphere_spawns_started", svc(testHatchery, "worker_model", "shared.infra/ubuntu")))
	assert.Equal(t, 2.0, counter("cds_hatchery_vsphere_spawns_succeeded", svc(testHatchery, "worker_model", "debian12")))
	assert.Equal(t, 1.0, counter("cds_hatchery_vsphere_spawns_failed", svc(testHatchery, "worker_model", "debian12", "reason", "clone")))
	assert.Equal(t, 1.0, counter("cds_hatchery_vsphere_spawns_failed", svc(testHatchery, "worker_model", "shared.infra/ubuntu", "reason", "other")))

	h := fams["cds_hatchery_vsphere_spawn_duration_seconds"]
	require.NotNil(t, h)
	require.Equal(t, dto.MetricType_HISTOGRAM, h.GetType())
	hist := h.GetMetric()[0].GetHistogram()
	assert.Equal(t, uint64(2), hist.GetSampleCount())
	assert.Equal(t, 242.0, hist.GetSampleSum())
	buckets := map[float64]uint64{}
	for _, b := range hist.GetBucket() {
		buckets[b.GetUpperBound()] = b.GetCumulativeCount()
	}
	assert.Equal(t, uint64(0), buckets[30])
	assert.Equal(t, uint64(1), buckets[45])
	assert.Equal(t, uint64(1), buckets[180])
	assert.Equal(t, uint64(2), buckets[240])

	// No secret-looking or free-form reason reached a label.
	for _, f := range fams {
		for _, mt := range f.GetMetric() {
			for _, lp := range mt.GetLabel() {
				assert.NotContains(t, lp.GetValue(), "hunter2")
			}
		}
	}
}

func TestMetricsRecordAfterCloseIsDropped(t *testing.T) {
	t.Parallel()
	m, err := New(testHatchery)
	require.NoError(t, err)
	m.SpawnStarted("debian12")
	m.Close()
	m.Close()
	m.SpawnStarted("debian12") // must not panic on the stopped meter
	v, ok := series(scrape(t, m), "cds_hatchery_vsphere_spawns_started", svc(testHatchery))
	assert.True(t, ok)
	assert.Equal(t, 1.0, v)
}

func TestTagValue(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "a_b", tagValue("a\nb"))
	assert.Equal(t, "caf__", tagValue("café"))
	assert.Len(t, tagValue(strings.Repeat("x", 300)), 255)
	assert.Equal(t, "shared.infra/ubuntu", tagValue("shared.infra/ubuntu"))
}

func TestNewMetricsNeedsName(t *testing.T) {
	t.Parallel()
	_, err := New("")
	assert.Error(t, err)
}

func ExampleMetrics_SpawnFailed() {
	m, err := New("my-hatchery")
	if err != nil {
		panic(err)
	}
	defer m.Close()
	m.SpawnFailed("debian12", SpawnFailureGuestNotReady)
	fmt.Println(SpawnFailureReason("disk full").known())
	// Output: other
}

// TestMetricsHeartbeatFailures: heartbeat_failures counts consecutive
// failures and goes back to 0 on a success.
func TestMetricsHeartbeatFailures(t *testing.T) {
	t.Parallel()
	m, err := New(testHatchery)
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
	m, err := New(testHatchery)
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
	l, err := New(testHatchery)
	require.NoError(t, err)
	t.Cleanup(l.Close)
	l.Health = func() Health { return Health{VCenterUp: true, InventoryAge: -1} }
	fams = scrape(t, l)
	_, ok = series(fams, "cds_hatchery_vsphere_vcenter_up", svc(testHatchery))
	assert.True(t, ok)
	assert.NotContains(t, fams, "cds_hatchery_vsphere_inventory_stale")
	assert.NotContains(t, fams, "cds_hatchery_vsphere_inventory_age_seconds")
}

// TestMetricsViewNamesAreTheSpecs pins the OpenCensus view names that docs/md documents.
func TestMetricsViewNamesAreTheSpecs(t *testing.T) {
	t.Parallel()
	spec := []string{
		"worker_vcpus", "worker_memory_mb", "allocated_vcpus", "allocated_memory_mb", "vm_count",
		"provisioned_vm_count", "template_vcpus", "template_memory_mb", "template_count",
		"pool_total_vcpus", "pool_total_memory_mb", "pool_total_vm_count",
		"resource_pool_cpu_max_mhz", "resource_pool_cpu_usage_mhz", "resource_pool_cpu_unreserved_mhz",
		"resource_pool_memory_max_bytes", "resource_pool_memory_usage_bytes", "resource_pool_memory_unreserved_bytes",
		"ip_used_count", "ip_total_count",
	}
	views := map[string]*view.View{}
	for _, d := range viewDefs {
		v := d.newView()
		views[v.Name] = v
	}
	for _, name := range spec {
		v, ok := views["cds/hatchery/vsphere/"+name]
		if assert.True(t, ok, name) {
			assert.Equal(t, "LastValue", v.Aggregation.Type.String(), name)
			assert.ElementsMatch(t, []string{"service_name", "service_type"}, tagNames(v)[:2], name)
		}
	}
	for _, name := range []string{"worker_vcpus", "worker_memory_mb"} {
		assert.Equal(t, []string{"service_name", "service_type", "worker_name", "worker_model"},
			tagNames(views["cds/hatchery/vsphere/"+name]), name)
	}
}

func tagNames(v *view.View) []string {
	var out []string
	for _, k := range v.TagKeys {
		out = append(out, k.Name())
	}
	return out
}
