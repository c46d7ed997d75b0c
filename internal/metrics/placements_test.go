package metrics

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCollectRecordsPlacements: each placement has its usage gauges, its
// headroom only when known, one placement_state series per state (1 for
// its own), its clone counters from the first pass and its datastores'
// gauges; the counters grow by what is new between passes, and the gauges
// of a pass without placements are absent while the counters stay.
func TestCollectRecordsPlacements(t *testing.T) {
	t.Parallel()
	m, err := New(testHatchery)
	require.NoError(t, err)
	t.Cleanup(m.Close)
	states := []string{"active", "cordoned", "backing-off", "probing"}

	require.NoError(t, m.Collect(Pass{PlacementStates: states, Placements: []Placement{
		{Name: "cluster-a", State: "active", VMs: 3, VCPUs: 6, MemoryMB: 12288, HeadroomVCPUs: 10, HeadroomMemoryMB: 20480,
			TasksInFlight: 2, Clones: PlacementClones{Clones: 5, Failures: 1},
			Datastores: []Datastore{{Name: "ds-a1", FreeBytes: 100 << 30, CapacityBytes: 500 << 30, FloorBytes: 50 << 30, Accessible: true}}},
		{Name: "cluster-b", State: "backing-off", HeadroomVCPUs: -1, HeadroomMemoryMB: -1,
			Datastores: []Datastore{{Name: "ds-b1", CapacityBytes: 200 << 30}}},
	}}))
	fams := scrape(t, m)
	a := func(kv ...string) labels {
		return svc(testHatchery, append([]string{"placement", "cluster-a"}, kv...)...)
	}
	b := func(kv ...string) labels {
		return svc(testHatchery, append([]string{"placement", "cluster-b"}, kv...)...)
	}
	for name, want := range map[string]float64{
		"cds_hatchery_vsphere_placement_vm_count":           3,
		"cds_hatchery_vsphere_placement_vcpus":              6,
		"cds_hatchery_vsphere_placement_memory_mb":          12288,
		"cds_hatchery_vsphere_placement_headroom_vcpus":     10,
		"cds_hatchery_vsphere_placement_headroom_memory_mb": 20480,
		"cds_hatchery_vsphere_placement_tasks_in_flight":    2,
		"cds_hatchery_vsphere_placement_clones":             5,
		"cds_hatchery_vsphere_placement_clone_failures":     1,
	} {
		v, ok := series(fams, name, a())
		assert.True(t, ok, name)
		assert.Equal(t, want, v, name)
	}
	for name, want := range map[string]float64{
		"cds_hatchery_vsphere_datastore_free_bytes":     100 << 30,
		"cds_hatchery_vsphere_datastore_capacity_bytes": 500 << 30,
		"cds_hatchery_vsphere_datastore_floor_bytes":    50 << 30,
		"cds_hatchery_vsphere_datastore_accessible":     1,
	} {
		v, ok := series(fams, name, a("datastore", "ds-a1"))
		assert.True(t, ok, name)
		assert.Equal(t, want, v, name)
	}
	v, ok := series(fams, "cds_hatchery_vsphere_datastore_accessible", b("datastore", "ds-b1"))
	assert.True(t, ok)
	assert.Zero(t, v)
	for _, st := range states {
		want := map[string]float64{"active": 1}[st]
		v, ok := series(fams, "cds_hatchery_vsphere_placement_state", a("state", st))
		assert.True(t, ok, st)
		assert.Equal(t, want, v, "cluster-a %s", st)
		want = map[string]float64{"backing-off": 1}[st]
		v, _ = series(fams, "cds_hatchery_vsphere_placement_state", b("state", st))
		assert.Equal(t, want, v, "cluster-b %s", st)
	}
	_, ok = series(fams, "cds_hatchery_vsphere_placement_headroom_vcpus", b())
	assert.False(t, ok, "an unknown headroom is not exported")
	_, ok = series(fams, "cds_hatchery_vsphere_placement_headroom_memory_mb", b())
	assert.False(t, ok, "an unknown headroom is not exported")
	v, ok = series(fams, "cds_hatchery_vsphere_placement_clones", b())
	assert.True(t, ok, "the counters of a placement exist at 0 from its first pass")
	assert.Zero(t, v)

	// The next pass: cluster-a cloned twice more, one failed.
	require.NoError(t, m.Collect(Pass{PlacementStates: states, Placements: []Placement{
		{Name: "cluster-a", State: "cordoned", Clones: PlacementClones{Clones: 7, Failures: 2}},
	}}))
	fams = scrape(t, m)
	v, _ = series(fams, "cds_hatchery_vsphere_placement_clones", a())
	assert.Equal(t, 7.0, v, "the totals become a counter, not a sum of totals")
	v, _ = series(fams, "cds_hatchery_vsphere_placement_clone_failures", a())
	assert.Equal(t, 2.0, v)
	v, _ = series(fams, "cds_hatchery_vsphere_placement_state", a("state", "cordoned"))
	assert.Equal(t, 1.0, v)
	_, ok = series(fams, "cds_hatchery_vsphere_placement_vm_count", b())
	assert.False(t, ok, "a placement no longer listed has no gauge")
	_, ok = series(fams, "cds_hatchery_vsphere_datastore_free_bytes", a("datastore", "ds-a1"))
	assert.False(t, ok, "a datastore no longer read has no gauge")

	// Without placements (no set): the gauges are gone, the counters stay.
	require.NoError(t, m.Collect(Pass{}))
	fams = scrape(t, m)
	assert.NotContains(t, fams, "cds_hatchery_vsphere_placement_state")
	assert.NotContains(t, fams, "cds_hatchery_vsphere_placement_vm_count")
	v, _ = series(fams, "cds_hatchery_vsphere_placement_clones", a())
	assert.Equal(t, 7.0, v)

	// Listed again with the same totals: nothing new is counted.
	require.NoError(t, m.Collect(Pass{PlacementStates: states, Placements: []Placement{
		{Name: "cluster-b", State: "active", Clones: PlacementClones{Clones: 0}},
		{Name: "cluster-a", State: "active", Clones: PlacementClones{Clones: 7, Failures: 2}},
	}}))
	fams = scrape(t, m)
	v, _ = series(fams, "cds_hatchery_vsphere_placement_clones", a())
	assert.Equal(t, 7.0, v)
}
