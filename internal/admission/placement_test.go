package admission_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/admission"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/modelref"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
)

// twoPlacements are placements a and b, each with its pool and one
// datastore of 1 TB free: a's pool holds memMBA unreserved, b's memMBB.
func twoPlacements(memMBA, memMBB int64) (*fakePlaces, []config.Placement) {
	ds := func(name string) *vctypes.DatastoreSpace {
		return &vctypes.DatastoreSpace{Name: name, FreeBytes: 1 << 40, CapacityBytes: 2 << 40, Accessible: true}
	}
	places := &fakePlaces{
		pools: map[string]*vctypes.PoolRuntime{
			"/dc/host/cluster-a": {MemoryUnreservedBytes: memMBA << 20, CPUUnreservedMHz: 10000},
			"/dc/host/cluster-b": {MemoryUnreservedBytes: memMBB << 20, CPUUnreservedMHz: 10000},
		},
		ds: map[string]*vctypes.DatastoreSpace{"ds-a": ds("ds-a"), "ds-b": ds("ds-b")},
	}
	return places, []config.Placement{
		{Name: "a", ResourcePool: "/dc/host/cluster-a", Datastores: []string{"ds-a"}},
		{Name: "b", ResourcePool: "/dc/host/cluster-b", Datastores: []string{"ds-b"}},
	}
}

// placedVM is a powered-on worker whose record says placement p.
func placedVM(name, p string, cpus, memMB int32) inventory.VM {
	v := worker(name, cpus, memMB)
	v.Annotation.Placement = p
	return v
}

// TestPlacementChoice: with [[placements]] an allowed clone takes the
// placement with the most headroom, counting the clones in flight there;
// a cordoned one is not a candidate; none fits: refused with `placement`,
// the detail naming each placement and why (docs/placements.md, "The
// decision").
func TestPlacementChoice(t *testing.T) {
	t.Parallel()
	places, ps := twoPlacements(2*8192, 3*8192) // a: 2 mediums, b: 3
	e := newEnv(noReserve(0, 0), nil)
	book := e.withPlacements(places, ps...)

	var got []string
	for _, id := range []string{"job-1", "job-2", "job-3", "job-4", "job-5"} {
		out, res := e.admit(t, id, "medium")
		require.True(t, out.allowed, "%s: %+v", id, out)
		name, ds, ok := admission.PlacementOf(res)
		require.True(t, ok)
		assert.Equal(t, "ds-"+name, ds, "the placement's datastore")
		p, pds, ok := e.a.JobPlacement(id)
		require.True(t, ok)
		assert.Equal(t, [2]string{name, ds}, [2]string{p, pds}, "the ledger agrees")
		got = append(got, name)
	}
	// b 3 against a 2: b; then 2 against 2, a tie to fewer VMs (a); then
	// b (2 against 1); then a tie again...
	assert.Equal(t, []string{"b", "a", "b", "a", "b"}, got)
	line := e.log.Lines(`msg="capacity decision"`, "job=job-1")
	require.Len(t, line, 1)
	assert.Contains(t, line[0], "placement=b")
	assert.Contains(t, line[0], "placement_reason=")

	out, _ := e.admit(t, "job-6", "medium")
	assert.Equal(t, refusal.ReasonPlacement, out.reason, "both pools full of clones in flight")
	assert.True(t, strings.HasPrefix(out.detail, "no placement fits: "), out.detail)
	assert.Contains(t, out.detail, "a: ")
	assert.Contains(t, out.detail, "; b: ")

	e2 := newEnv(noReserve(0, 0), nil)
	places2, ps2 := twoPlacements(8*8192, 8*8192)
	book = e2.withPlacements(places2, ps2...)
	require.NoError(t, book.Cordon("b", "uid 1000"))
	out, res := e2.admit(t, "job-1", "medium")
	require.True(t, out.allowed)
	name, _, _ := admission.PlacementOf(res)
	assert.Equal(t, "a", name, "b is cordoned")
	require.NoError(t, book.Cordon("a", "uid 1000"))
	out, _ = e2.admit(t, "job-2", "medium")
	assert.Equal(t, refusal.ReasonPlacement, out.reason)
	assert.Contains(t, out.detail, "a: cordoned by uid 1000")
	assert.Contains(t, out.detail, "b: cordoned by uid 1000")
}

// TestPlacementCountsRecordedVMs: this hatchery's VMs count in the
// placement their record names (an empty one in default); the capacity
// checks pass before the placement decision.
func TestPlacementCountsRecordedVMs(t *testing.T) {
	t.Parallel()
	places, ps := twoPlacements(8*8192, 8*8192)
	ps[0].MaxVMs, ps[1].MaxVMs = 2, 2
	e := newEnv(noReserve(0, 0), nil, placedVM("w-a1", "a", 4, 8192), placedVM("w-a2", "a", 4, 8192), placedVM("w-b1", "b", 4, 8192))
	e.withPlacements(places, ps...)
	out, res := e.admit(t, "job-1", "medium")
	require.True(t, out.allowed)
	name, _, _ := admission.PlacementOf(res)
	assert.Equal(t, "b", name, "a holds its maxVMs")
	out, _ = e.admit(t, "job-2", "medium")
	assert.Equal(t, refusal.ReasonPlacement, out.reason, "b holds 1 VM and 1 clone in flight")

	e = newEnv(noReserve(4, 0), nil, worker("w", 4, 1024))
	places, ps = twoPlacements(8*8192, 8*8192)
	e.withPlacements(places, ps...)
	out, _ = e.admit(t, "job-1", "medium")
	assert.Equal(t, refusal.ReasonCapacityCPU, out.reason, "the hatchery's maxCpus refuses first")
}

// TestPlacementFiguresReadOncePerTTL: a placement's pool and datastores
// are read once per admission.FiguresTTL, whatever the decisions.
func TestPlacementFiguresReadOncePerTTL(t *testing.T) {
	t.Parallel()
	places, ps := twoPlacements(8*8192, 8*8192)
	e := newEnv(noReserve(0, 0), nil)
	e.withPlacements(places, ps...)
	e.admit(t, "job-1", "small")
	first := places.readCount()
	assert.Equal(t, 4, first, "two pools, two datastores")
	e.admit(t, "job-2", "small")
	e.clock.Advance(admission.FiguresTTL - 1)
	e.admit(t, "job-3", "small")
	assert.Equal(t, first, places.readCount(), "within the TTL: not read again")
	e.clock.Advance(1)
	e.admit(t, "job-4", "small")
	assert.Equal(t, 2*first, places.readCount(), "the TTL passed: read again")
}

// TestProvisioningPinnedToPlacement: ReserveProvisioningAt sends an
// instant parent to its own placement even when another has more room,
// refuses when that one is cordoned, and ReserveProvisioning lets the
// decision choose (docs/instant-clones.md).
func TestProvisioningPinnedToPlacement(t *testing.T) {
	t.Parallel()
	places, ps := twoPlacements(2*8192, 8*8192)
	e := newEnv(noReserve(0, 0), nil, template("debian12", 4, 8192))
	book := e.withPlacements(places, ps...)
	ctx := context.Background()
	tpl := modelref.Template{Name: "debian12"}

	d, err := e.a.ReserveProvisioningAt(ctx, "parent-a", "a", tpl, nil, "debian12", "")
	require.NoError(t, err)
	require.True(t, d.Allowed, d.Detail)
	p, _, ok := e.a.ProvisionPlacement("parent-a")
	require.True(t, ok)
	assert.Equal(t, "a", p, "pinned, though b has more headroom")

	d, err = e.a.ReserveProvisioning(ctx, "warm-1", tpl, nil, "debian12", "")
	require.NoError(t, err)
	require.True(t, d.Allowed)
	p, _, _ = e.a.ProvisionPlacement("warm-1")
	assert.Equal(t, "b", p, "unpinned: the most headroom")

	require.NoError(t, book.Cordon("a", "uid 1000"))
	d, err = e.a.ReserveProvisioningAt(ctx, "parent-a2", "a", tpl, nil, "debian12", "")
	require.NoError(t, err)
	assert.False(t, d.Allowed)
	assert.Equal(t, refusal.ReasonPlacement, refusal.Reason(d.Reason))
	assert.Contains(t, d.Detail, "a: cordoned by uid 1000")
	assert.Contains(t, d.Detail, "b: not the placement of", "b is not a's")
	_, _, ok = e.a.ProvisionPlacement("parent-a2")
	assert.False(t, ok, "nothing reserved")
}

// TestWithoutPlacementsNoChoice: without [[placements]] no figure is read
// and no reservation carries a placement.
func TestWithoutPlacementsNoChoice(t *testing.T) {
	t.Parallel()
	places, _ := twoPlacements(8192, 8192)
	e := newEnv(noReserve(0, 0), nil)
	e.a.Places = places
	_, res := e.admit(t, "job-1", "small")
	require.NotNil(t, res)
	_, _, ok := admission.PlacementOf(res)
	assert.False(t, ok)
	assert.Zero(t, places.readCount())
	_, _, ok = e.a.JobPlacement("job-1")
	assert.False(t, ok)
}
