package vsphere

import (
	"context"
	"errors"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/internal/placement"
	"github.com/cds-contrib/hatchery-vsphere/internal/placement/placementtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/spawntiming"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// metricsDoc is the operator documentation of the metrics.
const metricsDoc = "../../docs/metrics.md"

var (
	docTableRow   = regexp.MustCompile("^\\| `(cds_hatchery_vsphere_[a-z0-9_]+)` \\| ([a-z]+) \\|")
	docMetricName = regexp.MustCompile(`cds_hatchery_vsphere_[a-z0-9_]+`)
)

// fullScrape scrapes a Metrics in which every metric has a series: every
// source readable in the last pass, one source failed in an earlier pass,
// spawns recorded.
func fullScrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	cfg := fixtureConfig(testHatchery)
	// A warm pool: its target and hit ratio (before any pass: its number).
	cfg.WorkerProvisioning = []config.WorkerProvisioning{{ModelVMWare: "debian12", Number: 1}}
	e := newTestEnv(t, cfg)
	setInv(e.inv, fixtureVMs(), nil)
	e.expectPool(fixtureRuntime())
	var mu sync.Mutex
	headroomErr := errors.New("capacity check failed")
	e.m.Headroom = func(context.Context) (map[string]int, error) {
		mu.Lock()
		defer mu.Unlock()
		return map[string]int{"small": 2}, headroomErr
	}
	e.m.SOAP = func() map[string]metrics.SOAPCount {
		return map[string]metrics.SOAPCount{"RetrievePropertiesEx": {Requests: 3, Bytes: 3000}}
	}
	e.m.Health = func() metrics.Health {
		return metrics.Health{VCenterUp: true, Inventory: true, InventoryAge: 5 * time.Second}
	}
	// Two placements: one with its headroom known, one backing off
	// with an inaccessible datastore.
	withPlacements(e.h, "cluster-a", "cluster-b")
	e.h.placements = placementtest.NewPlacements(
		placement.Status{Name: "cluster-a", State: placement.StateActive, VMs: 2, CPUs: 6, MemoryMB: 12288,
			HeadroomCPUs: 26, HeadroomMemoryMB: 50000, TasksInFlight: 1, Clones: 4, CloneFailures: 1,
			Datastores: []placement.DatastoreStatus{{Name: "ds-a1", FreeBytes: 300 << 30, CapacityBytes: 500 << 30, FloorBytes: 50 << 30, Accessible: true}}},
		placement.Status{Name: "cluster-b", State: placement.StateBackingOff, Reason: "datastore unavailable",
			HeadroomCPUs: placement.Unknown, HeadroomMemoryMB: placement.Unknown,
			Datastores: []placement.DatastoreStatus{{Name: "ds-b1", CapacityBytes: 200 << 30, FloorBytes: 20 << 30}}})
	e.h.collectMetrics(context.Background(), e.m)
	mu.Lock()
	headroomErr = nil
	mu.Unlock()
	e.h.collectMetrics(context.Background(), e.m)
	e.m.SpawnStarted("debian12")
	e.m.SpawnSucceeded("debian12", 40*time.Second)
	e.m.SpawnFailed("debian12", metrics.SpawnFailureIP)
	timing := spawntiming.Timing{
		Stages:   []spawntiming.StageDuration{{Stage: spawntiming.StageQueueToBook, D: 2 * time.Second}, {Stage: spawntiming.StageClone, D: 50 * time.Second}},
		JobStart: 52 * time.Second,
	}
	e.m.SpawnTimed("debian12", timing.MetricStages(), timing.JobStart)
	return scrape(t, e.m)
}

// TestMetricsDocMatchesScrape checks docs/metrics.md against a real scrape:
// every documented metric is exported with the documented type, every
// exported metric is documented, and every name used in a query exists.
func TestMetricsDocMatchesScrape(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(metricsDoc)
	require.NoError(t, err)
	fams := fullScrape(t)

	documented := map[string]string{} // name -> type
	for _, line := range strings.Split(string(doc), "\n") {
		if m := docTableRow.FindStringSubmatch(line); m != nil {
			assert.NotContains(t, documented, m[1], "documented twice")
			documented[m[1]] = m[2]
		}
	}
	require.NotEmpty(t, documented)

	promType := map[dto.MetricType]string{
		dto.MetricType_GAUGE: "gauge", dto.MetricType_COUNTER: "counter", dto.MetricType_HISTOGRAM: "histogram",
	}
	for name, typ := range documented {
		f, ok := fams[name]
		if assert.True(t, ok, "%s is documented but not exported", name) {
			assert.Equal(t, typ, promType[f.GetType()], "type of %s", name)
		}
	}
	var exported []string
	for name := range fams {
		exported = append(exported, name)
		assert.Contains(t, documented, name, "%s is exported but not documented", name)
	}
	sort.Strings(exported)
	assert.Len(t, exported, len(metrics.ViewNames()), "one Prometheus family per view: %v", exported)

	for _, name := range docMetricName.FindAllString(string(doc), -1) {
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if trimmed := strings.TrimSuffix(name, suffix); trimmed != name && fams[trimmed].GetType() == dto.MetricType_HISTOGRAM {
				base = trimmed
			}
		}
		assert.Contains(t, fams, base, "%s is used in docs/metrics.md but not exported", name)
	}
}
