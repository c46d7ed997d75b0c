package vsphere

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/admission"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/modelref"
	"github.com/cds-contrib/hatchery-vsphere/internal/placement"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
)

// newPlacementEnv is newCapEnv with placements: each placement's pool
// (PoolRuntimeAt) is the mock's one pool, and each datastore's space is
// freeGB[name] GB free of 1000.
func newPlacementEnv(t *testing.T, cfg config.Config, freeGB map[string]int64) *capEnv {
	t.Helper()
	env := newCapEnv(t, cfg)
	env.mock.EXPECT().PoolRuntimeAt(gomock.Any(), gomock.Any()).DoAndReturn(func(context.Context, string) (*vctypes.PoolRuntime, error) {
		return env.poolRuntime()
	}).AnyTimes()
	env.mock.EXPECT().DatastoreSpaceOf(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, name string) (*vctypes.DatastoreSpace, error) {
		return &vctypes.DatastoreSpace{Ref: vctypes.Ref{Type: "Datastore", Value: name}, Name: name, FreeBytes: freeGB[name] << 30, CapacityBytes: 1000 << 30, Accessible: true}, nil
	}).AnyTimes()
	return env
}

// TestAllocateChoosesPlacementByHeadroom: each admitted job's reservation
// names the placement with the most headroom (counting the clones in
// flight, so that the decisions spread), the datastore with the most free
// space above the floor, and the decision line says so; once every
// placement is full the job is refused with the placement code.
func TestAllocateChoosesPlacementByHeadroom(t *testing.T) {
	t.Parallel()
	cfg := config.Config{Flavors: capFlavors(), DatastoreFloorGB: 50, Placements: []config.Placement{
		{Name: "a", MaxVMs: 4, Datastores: []string{"ds1", "ds2"}},
		{Name: "b", MaxVMs: 2, Datastores: []string{"ds3"}},
	}}
	env := newPlacementEnv(t, cfg, map[string]int64{"ds1": 100, "ds2": 300, "ds3": 60})
	ctx := context.Background()
	counts := map[string]int{}
	for i := range 6 {
		res, err := env.h.AllocateResources(ctx, capV2("small"), fmt.Sprintf("job-%d", i), nil)
		require.NoError(t, err, i)
		name, ds, ok := admission.PlacementOf(res)
		require.True(t, ok)
		counts[name]++
		assert.Equal(t, map[string]string{"a": "ds2", "b": "ds3"}[name], ds, "the datastore with the most free space above the floor")
	}
	assert.Equal(t, map[string]int{"a": 4, "b": 2}, counts)

	_, err := env.h.AllocateResources(ctx, capV2("small"), "job-full", nil)
	var r *refusal.Refusal
	require.True(t, errors.As(err, &r), "%v", err)
	assert.Equal(t, refusal.ReasonPlacement, r.Reason)
	assert.Contains(t, r.Detail, "a: maxVMs 4 reached")
	assert.Contains(t, r.Detail, "b: maxVMs 2 reached")
	assert.True(t, r.Reason.Waits())

	lines := env.logs.records(t, "capacity decision")
	require.Len(t, lines, 7)
	assert.Equal(t, "a", lines[0]["placement"])
	assert.Equal(t, "ds2", lines[0]["datastore"])
	assert.Contains(t, lines[0]["placement_reason"], "b: less headroom")
	assert.Equal(t, "placement", lines[6]["reason"])

	// The Book shows what the last decision read.
	st := env.h.Placements().Statuses()
	require.Len(t, st, 2)
	assert.Equal(t, 4, st[0].VMs)
	assert.Equal(t, 2, st[1].TasksInFlight)
	assert.Equal(t, int64(50<<30), st[0].Datastores[0].FloorBytes)
}

// TestAllocateSkipsCordonedAndFlooredPlacements: a cordoned placement and
// one whose datastores are at their floor take no clone; uncordoned, the
// first takes them again, without a restart.
func TestAllocateSkipsCordonedAndFlooredPlacements(t *testing.T) {
	t.Parallel()
	cfg := config.Config{Flavors: capFlavors(), DatastoreFloorGB: 50, Placements: []config.Placement{
		{Name: "a", Datastores: []string{"ds1"}},
		{Name: "b", Datastores: []string{"ds2"}},
		{Name: "c", Datastores: []string{"ds3"}, Weight: 10},
	}}
	env := newPlacementEnv(t, cfg, map[string]int64{"ds1": 500, "ds2": 500, "ds3": 50})
	ctx := context.Background()
	require.NoError(t, env.h.Placements().Cordon("a", "uid 1000"))
	for i := range 3 {
		res, err := env.h.AllocateResources(ctx, capV2("small"), fmt.Sprintf("job-%d", i), nil)
		require.NoError(t, err)
		name, _, _ := admission.PlacementOf(res)
		assert.Equal(t, "b", name)
	}
	line := env.logs.records(t, "capacity decision")[0]
	assert.Contains(t, line["placement_reason"], "a: cordoned by uid 1000")
	assert.Contains(t, line["placement_reason"], "c: datastore ds3 at its floor")
	require.NoError(t, env.h.Placements().Uncordon("a", "uid 1000"))
	res, err := env.h.AllocateResources(ctx, capV2("small"), "job-after", nil)
	require.NoError(t, err)
	name, _, _ := admission.PlacementOf(res)
	assert.Equal(t, "a", name, "a has fewer vms than b at the same (unlimited) headroom")
	assert.Equal(t, placement.StateActive, env.h.Placements().Statuses()[0].State)
}

// TestWithoutPlacementsNoPlacementIsChosen: without [[placements]] the
// admission reads no placement figure (the mock would fail on a
// ResourcePoolAt or DatastoreSpace call) and its reservation names none.
func TestWithoutPlacementsNoPlacementIsChosen(t *testing.T) {
	t.Parallel()
	env := newCapEnv(t, config.Config{Flavors: capFlavors()})
	res, err := env.h.AllocateResources(context.Background(), capV2("small"), "job-1", nil)
	require.NoError(t, err)
	_, _, ok := admission.PlacementOf(res)
	assert.False(t, ok)
	st := env.h.Placements().Statuses()
	require.Len(t, st, 1)
	assert.Equal(t, config.DefaultPlacementName, st[0].Name)
	assert.NotContains(t, env.logs.records(t, "capacity decision")[0], "placement")
}

// TestPlacementLimitAcrossInstances: two instances of one hatchery
// deciding at the same moment exceed a placement's own maxVMs by at most
// one clone per other instance (each sees its own clones in flight, not
// the other's), never more; once both VMs are listed, with their records'
// placement, neither admits another there (docs/placements.md, "Two
// instances").
func TestPlacementLimitAcrossInstances(t *testing.T) {
	t.Parallel()
	cfg := func() config.Config {
		return config.Config{Flavors: capFlavors(), Placements: []config.Placement{{Name: "a", MaxVMs: 1}}}
	}
	one, two := newPlacementEnv(t, cfg(), nil), newPlacementEnv(t, cfg(), nil)
	ctx := context.Background()
	admitted := func(env *capEnv, job string) bool {
		_, err := env.h.AllocateResources(ctx, capV2("small"), job, nil)
		var r *refusal.Refusal
		if errors.As(err, &r) {
			assert.Equal(t, refusal.ReasonPlacement, r.Reason)
			return false
		}
		require.NoError(t, err)
		return true
	}
	assert.True(t, admitted(one, "job-1"))
	assert.True(t, admitted(two, "job-2"), "the other instance's clone in flight is invisible: one over")
	assert.False(t, admitted(one, "job-3"), "its own clone in flight is counted")
	assert.False(t, admitted(two, "job-4"), "its own clone in flight is counted")

	// Both VMs listed, the spawns ended.
	vm1, vm2 := capVM("w-1", "job-1", 2, 4096), capVM("w-2", "job-2", 2, 4096)
	vm1.Annotation.Placement, vm2.Annotation.Placement = "a", "a"
	for _, env := range []*capEnv{one, two} {
		env.inv.Set(vm1, vm2)
	}
	one.h.releaseCapacity("job-1")
	two.h.releaseCapacity("job-2")
	assert.False(t, admitted(one, "job-5"))
	assert.False(t, admitted(two, "job-6"))
	assert.Equal(t, 2, one.h.Placements().Statuses()[0].VMs)
}

// TestPlacementFiguresReadOncePerTTL: a placement's pool and datastores
// are read once, then stand for admission.FiguresTTL across decisions
// (every queued job is a decision at every poll), and are read again
// after it.
func TestPlacementFiguresReadOncePerTTL(t *testing.T) {
	t.Parallel()
	env := newCapEnv(t, config.Config{Flavors: capFlavors(), Placements: []config.Placement{
		{Name: "a", ResourcePool: "/dc/host/a", Datastores: []string{"ds1"}},
		{Name: "b", ResourcePool: "/dc/host/b", Datastores: []string{"ds2"}},
	}})
	var pools, spaces atomic.Int32
	env.mock.EXPECT().PoolRuntimeAt(gomock.Any(), gomock.Any()).DoAndReturn(func(context.Context, string) (*vctypes.PoolRuntime, error) {
		pools.Add(1)
		return env.poolRuntime()
	}).AnyTimes()
	env.mock.EXPECT().DatastoreSpaceOf(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, name string) (*vctypes.DatastoreSpace, error) {
		spaces.Add(1)
		return &vctypes.DatastoreSpace{Ref: vctypes.Ref{Type: "Datastore", Value: name}, Name: name, FreeBytes: 100 << 30, CapacityBytes: 1000 << 30, Accessible: true}, nil
	}).AnyTimes()
	ctx := context.Background()
	for i := range 10 {
		_, err := env.h.AllocateResources(ctx, capV2("small"), fmt.Sprintf("job-%d", i), nil)
		require.NoError(t, err)
	}
	assert.EqualValues(t, 2, pools.Load(), "one pool read per placement for ten decisions")
	assert.EqualValues(t, 2, spaces.Load(), "one space read per datastore")
	env.clock.Advance(admission.FiguresTTL)
	_, err := env.h.AllocateResources(ctx, capV2("small"), "job-later", nil)
	require.NoError(t, err)
	assert.EqualValues(t, 4, pools.Load(), "read again after FiguresTTL")
	assert.EqualValues(t, 4, spaces.Load())
}

// TestReserveProvisioningAtPinsPlacement: an instant parent's reservation
// (ReserveProvisioningAt) is placed in its own placement even where
// another has more headroom, and refused with the placement code while
// that placement is cordoned (no parent built there); without a pinned
// placement the decision chooses by headroom.
func TestReserveProvisioningAtPinsPlacement(t *testing.T) {
	t.Parallel()
	cfg := config.Config{Flavors: capFlavors(), DatastoreFloorGB: 50, Placements: []config.Placement{
		{Name: "a", Datastores: []string{"ds1"}},
		{Name: "b", Datastores: []string{"ds2"}},
	}}
	env := newPlacementEnv(t, cfg, map[string]int64{"ds1": 900, "ds2": 100})
	ctx := context.Background()
	adm := env.h.admission()
	small := env.h.conf().FlavorNamed("small")
	require.NotNil(t, small)

	d, err := adm.ReserveProvisioningAt(ctx, "parent-b", "b", modelref.Template{Name: "tpl"}, small, "m", "")
	require.NoError(t, err)
	require.True(t, d.Allowed, "%+v", d)
	name, ds, ok := adm.ProvisionPlacement("parent-b")
	require.True(t, ok)
	assert.Equal(t, "b", name, "pinned to its placement, not a's larger headroom")
	assert.Equal(t, "ds2", ds)

	d, err = adm.ReserveProvisioningAt(ctx, "refill", "", modelref.Template{Name: "tpl"}, small, "m", "")
	require.NoError(t, err)
	require.True(t, d.Allowed)
	name, _, _ = adm.ProvisionPlacement("refill")
	assert.Equal(t, "a", name, "unpinned: the most headroom")

	require.NoError(t, env.h.Placements().Cordon("b", "uid 1000"))
	d, err = adm.ReserveProvisioningAt(ctx, "parent-b2", "b", modelref.Template{Name: "tpl"}, small, "m", "")
	require.NoError(t, err)
	assert.False(t, d.Allowed)
	assert.Equal(t, string(refusal.ReasonPlacement), string(d.Reason))
	_, _, ok = adm.ProvisionPlacement("parent-b2")
	assert.False(t, ok, "a refusal reserves nothing")
}
