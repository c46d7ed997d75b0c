package metrics

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMetricsCountersStartAtZero checks that counters with a known label
// set are exported at 0 before anything happened, so that a ratio or an
// increase() over them answers 0 rather than no data: collection_errors
// for every source from the start, and, once a model's first spawn
// started, spawns_succeeded and spawns_failed for every reason of it.
func TestMetricsCountersStartAtZero(t *testing.T) {
	t.Parallel()
	m, err := New(testHatchery)
	require.NoError(t, err)
	t.Cleanup(m.Close)

	fams := scrape(t, m)
	for _, src := range []string{"inventory", "resource_pool", "headroom", "ip_range"} {
		v, ok := series(fams, "cds_hatchery_vsphere_collection_errors", svc(testHatchery, "source", src))
		assert.True(t, ok, "collection_errors{source=%q} exported from the start", src)
		assert.Zero(t, v, src)
	}
	for _, res := range CapacityResources {
		v, ok := series(fams, "cds_hatchery_vsphere_capacity_refusals", svc(testHatchery, "resource", string(res)))
		assert.True(t, ok, "capacity_refusals{resource=%q} exported from the start", res)
		assert.Zero(t, v, res)
	}
	v, ok := series(fams, "cds_hatchery_vsphere_heartbeat_failures", svc(testHatchery))
	assert.True(t, ok, "heartbeat_failures exported from the start")
	assert.Zero(t, v)

	m.SpawnStarted("debian12")
	m.SpawnSucceeded("debian12", 0)
	fams = scrape(t, m)
	for _, r := range SpawnFailureReasons {
		v, ok := series(fams, "cds_hatchery_vsphere_spawns_failed", svc(testHatchery, "worker_model", "debian12", "reason", string(r)))
		assert.True(t, ok, "spawns_failed{reason=%q} exported once the model spawned", r)
		assert.Zero(t, v, r)
	}
	v, ok = series(fams, "cds_hatchery_vsphere_spawns_succeeded", svc(testHatchery, "worker_model", "debian12"))
	assert.True(t, ok)
	assert.Equal(t, 1.0, v)

	// A failure after the zeros counts from them, once.
	m.SpawnStarted("debian12")
	m.SpawnFailed("debian12", SpawnFailureClone)
	fams = scrape(t, m)
	v, _ = series(fams, "cds_hatchery_vsphere_spawns_failed", svc(testHatchery, "worker_model", "debian12", "reason", "clone"))
	assert.Equal(t, 1.0, v)
	v, _ = series(fams, "cds_hatchery_vsphere_spawns_started", svc(testHatchery, "worker_model", "debian12"))
	assert.Equal(t, 2.0, v)
}
