package admission_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/admission"
	"github.com/cds-contrib/hatchery-vsphere/internal/capacity"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/modelref"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
)

// noReserve is exampleConfig without the starvation reserve.
func noReserve(maxCPUs int, maxMemoryMB int64) *config.Config {
	c := exampleConfig(maxCPUs, maxMemoryMB)
	c.CountSmallerFlavorToKeep = 0
	return c
}

// held is ReservedFootprint as one value.
func held(a admission.Admission) [3]int64 {
	n, cpus, mem := a.ReservedFootprint()
	return [3]int64{int64(n), cpus, mem}
}

// TestReservationsPreventOvershoot: an allowed decision reserves its
// footprint, so the next decisions count it; the handle given back by
// the framework frees it at once (a second Release frees nothing), as
// does the spawn's Release with the listing inventory
// (docs/flavors-and-capacity.md, "Reservation lifecycle").
func TestReservationsPreventOvershoot(t *testing.T) {
	t.Parallel()
	e := newEnv(noReserve(8, 0), nil)
	a, resA := e.admit(t, "job-a", "medium")
	b, _ := e.admit(t, "job-b", "medium")
	c, _ := e.admit(t, "job-c", "medium")
	assert.Equal(t, allowed(), a)
	assert.Equal(t, allowed(), b)
	assert.Equal(t, refused(refusal.ReasonCapacityCPU, capacity.DetailCPULimit), c, "the two reservations fill maxCpus")
	assert.Equal(t, [3]int64{2, 8, 16384}, held(e.a))

	resA.Release(refusal.ReasonBooked) // another hatchery won job-a's booking
	assert.Equal(t, [3]int64{1, 4, 8192}, held(e.a), "given back at once")
	c, _ = e.admit(t, "job-c", "medium")
	assert.Equal(t, allowed(), c)
	resA.Release(refusal.ReasonAbandoned)
	assert.Equal(t, [3]int64{2, 8, 16384}, held(e.a), "a second Release frees nothing")

	e.a.Release("job-b") // the spawn ended; listing: no grace
	assert.Zero(t, e.a.ReleaseGrace())
	d, _ := e.admit(t, "job-d", "medium")
	assert.Equal(t, allowed(), d)
	e.a.Release("no-such-job") // does nothing
	assert.Equal(t, [3]int64{2, 8, 16384}, held(e.a))
}

// TestReleaseGrace: with a shared inventory a spawn's released footprint
// stays counted for four refresh intervals, unless the inventory shows
// its VM powered on, which then counts once (as a VM).
func TestReleaseGrace(t *testing.T) {
	t.Parallel()
	shared := func() *config.Config {
		c := noReserve(4, 0)
		c.InventoryMode = config.InventoryShared
		c.InventoryRefreshInterval = 30
		return c
	}
	t.Run("not shown", func(t *testing.T) {
		t.Parallel()
		e := newEnv(shared(), nil)
		require.Equal(t, 2*time.Minute, e.a.ReleaseGrace(), "four refresh intervals")
		got, _ := e.admit(t, "job-a", "medium")
		require.True(t, got.allowed)
		e.a.Release("job-a")
		assert.Equal(t, [3]int64{0, 0, 0}, held(e.a), "no reservation held any more")
		got, _ = e.admit(t, "job-b", "medium")
		assert.Equal(t, refused(refusal.ReasonCapacityCPU, capacity.DetailCPULimit), got, "still counted within the grace")
		e.clock.Advance(2*time.Minute + time.Second)
		got, _ = e.admit(t, "job-b", "medium")
		assert.Equal(t, allowed(), got, "the grace passed")
	})
	t.Run("shown powered on", func(t *testing.T) {
		t.Parallel()
		e := newEnv(shared(), nil)
		got, _ := e.admit(t, "job-a", "small")
		require.True(t, got.allowed)
		w := worker("w-a", 2, 4096)
		w.Annotation.JobID = "job-a"
		e.inv.Add(w)
		u, err := e.a.Usage(context.Background())
		require.NoError(t, err)
		assert.Equal(t, int64(2), u.CPUs, "the VM and its reservation count once")
		assert.Equal(t, 1, u.VMs)
		e.a.Release("job-a")
		u, err = e.a.Usage(context.Background())
		require.NoError(t, err)
		assert.Equal(t, int64(2), u.CPUs, "released: the VM alone")
		got, _ = e.admit(t, "job-b", "small")
		assert.Equal(t, allowed(), got, "2 + 2 ≤ 4: the released footprint is not counted twice")
	})
}

// TestReservationExpires: a reservation still held after
// capacity.ReservationTTL is dropped with one WARN line (the safety net
// of a lost spawn).
func TestReservationExpires(t *testing.T) {
	t.Parallel()
	e := newEnv(noReserve(4, 0), nil)
	got, _ := e.admit(t, "job-lost", "medium")
	require.True(t, got.allowed)
	got, _ = e.admit(t, "job-b", "small")
	require.False(t, got.allowed)
	assert.Empty(t, e.log.Lines("reservation expired"))
	e.clock.Advance(capacity.ReservationTTL + time.Second)
	got, _ = e.admit(t, "job-b", "small")
	assert.Equal(t, allowed(), got)
	lines := e.log.Lines("level=WARN", `msg="in-flight capacity reservation expired"`, "job=job-lost")
	require.Len(t, lines, 1)
	assert.Contains(t, lines[0], "flavor=medium")
	assert.Contains(t, lines[0], "cpus=4")
}

// TestResourcePoolOutage: an unreadable pool leaves the static limits
// (Graceful degradation); the outage is logged once when it starts (WARN)
// and once when it ends (INFO), the pool is looked up again after each
// failed read, and the usage report says since when it is unreadable.
func TestResourcePoolOutage(t *testing.T) {
	t.Parallel()
	pool := unreadable()
	e := newEnv(noReserve(4, 0), pool)
	var outcomes []bool
	for _, id := range []string{"job-1", "job-2", "job-3"} {
		got, _ := e.admit(t, id, "small")
		outcomes = append(outcomes, got.allowed)
		e.clock.Advance(10 * time.Second)
	}
	assert.Equal(t, []bool{true, true, false}, outcomes, "maxCpus 4 still applies: two smalls")
	assert.Len(t, e.log.Lines("level=WARN", "resource pool unreadable: capacity checks continue with static limits only"), 1, "logged once")
	loads, _ := pool.counts()
	assert.Equal(t, 3, loads, "looked up again after each failure")

	u, err := e.a.Usage(context.Background())
	require.NoError(t, err)
	assert.False(t, u.PoolReadable)
	assert.Contains(t, u.PoolError, "permission denied")
	assert.Equal(t, testutil.Epoch, u.PoolUnreadableSince, "since the first failed read")

	pool.set(&vctypes.PoolRuntime{MemoryUnreservedBytes: 1 << 40, CPUUnreservedMHz: 1000}, nil)
	e.clock.Advance(30 * time.Second)
	e.a.Release("job-1")
	got, _ := e.admit(t, "job-4", "small")
	assert.True(t, got.allowed)
	back := e.log.Lines("level=INFO", "resource pool readable again")
	require.Len(t, back, 1)
	assert.Contains(t, back[0], "unreadable_for=1m0s")

	loads, reads := pool.counts()
	_, err = e.a.LastUsage(context.Background())
	require.NoError(t, err)
	got, _ = e.admit(t, "job-5", "small")
	assert.False(t, got.allowed)
	loads2, reads2 := pool.counts()
	assert.Equal(t, loads, loads2, "a readable pool is kept, not looked up again")
	assert.Equal(t, reads+1, reads2, "LastUsage reaches no vCenter; a decision reads the pool live")
	assert.Len(t, e.log.Lines("resource pool readable again"), 1, "the end is logged once")
	u, err = e.a.LastUsage(context.Background())
	require.NoError(t, err)
	assert.True(t, u.PoolReadable)
	assert.Empty(t, u.PoolError)
}

// TestReserveProvisioning: a warm-pool clone reserves its footprint (its
// flavor's, else its template's hardware) against the static limits, and
// spawns count it until it is dropped (powered off) or released (failed);
// without a static limit it is allowed without reading anything
// ("Warm pools and flavors").
func TestReserveProvisioning(t *testing.T) {
	t.Parallel()
	tpl := modelref.Template{Name: "debian12"}
	t.Run("no static limit", func(t *testing.T) {
		t.Parallel()
		e := newEnv(exampleConfig(0, 0), nil)
		reads := 0
		e.inv.SetHook(func(context.Context) error { reads++; return nil })
		d, err := e.a.ReserveProvisioning(context.Background(), "warm-1", tpl, &large, "debian12", "large")
		require.NoError(t, err)
		assert.Equal(t, capacity.Allow(capacity.DetailNoStaticLimit), d)
		assert.Zero(t, reads, "nothing read")
		assert.Equal(t, [3]int64{0, 0, 0}, held(e.a), "nothing reserved")
	})
	t.Run("static limits", func(t *testing.T) {
		t.Parallel()
		e := newEnv(noReserve(5, 0), nil, template("debian12", 2, 2048))
		ctx := context.Background()
		d, err := e.a.ReserveProvisioning(ctx, "warm-big", tpl, &large, "debian12", "large")
		require.NoError(t, err)
		assert.Equal(t, capacity.Refuse(refusal.ReasonCapacityCPU, capacity.DetailCPULimit), d, "8 vCPUs over maxCpus 5")
		d, err = e.a.ReserveProvisioning(ctx, "warm-1", tpl, nil, "debian12", "")
		require.NoError(t, err)
		assert.True(t, d.Allowed, d.Detail)
		assert.Equal(t, [3]int64{1, 2, 2048}, held(e.a), "the template's hardware")

		got, _ := e.admit(t, "job-1", "medium")
		assert.Equal(t, refused(refusal.ReasonCapacityCPU, capacity.DetailCPULimit), got, "2 + 4 > 5: the provisioning counts")
		e.a.DropProvisioning("warm-1")
		got, _ = e.admit(t, "job-1", "medium")
		assert.Equal(t, allowed(), got, "powered off: it holds nothing")

		d, err = e.a.ReserveProvisioning(ctx, "warm-2", tpl, nil, "debian12", "")
		require.NoError(t, err)
		assert.False(t, d.Allowed, "4 + 2 > 5")
		e.a.Release("job-1")
		d, err = e.a.ReserveProvisioning(ctx, "warm-2", tpl, nil, "debian12", "")
		require.NoError(t, err)
		require.True(t, d.Allowed)
		e.a.ReleaseProvisioning("warm-2")
		assert.Equal(t, [3]int64{0, 0, 0}, held(e.a), "a failed provisioning gives its footprint back")
	})
	t.Run("inventory unreadable", func(t *testing.T) {
		t.Parallel()
		e := newEnv(noReserve(5, 0), nil)
		e.inv.SetErr(errors.New("boom"))
		_, err := e.a.ReserveProvisioning(context.Background(), "warm-1", tpl, nil, "debian12", "")
		require.Error(t, err)
		assert.True(t, strings.Contains(err.Error(), `"warm-1"`), "the error names the vm: %v", err)
	})
}

// TestVMUsagesCountsHeldVMsByHardware: a held VM (kept for inspection)
// counts by its hardware but serves no job any more, so a new spawn of
// the job reserves its own footprint; another hatchery's VM is not ours.
func TestVMUsagesCountsHeldVMsByHardware(t *testing.T) {
	t.Parallel()
	e := newEnv(noReserve(0, 0), nil)
	w := worker("w-1", 2, 4096)
	w.Annotation.JobID = "job-1"
	h := worker("w-held", 4, 2048)
	until := testutil.Epoch.Add(time.Hour)
	h.Annotation.JobID, h.Annotation.HeldUntil = "job-2", &until
	other := vm("w-2", "hatch-b", 4, 8192, true)
	u := e.a.VMUsages([]inventory.VM{w, h, other})
	require.Len(t, u, 3)
	assert.Equal(t, capacity.VMUsage{Name: "w-1", CPUs: 2, MemoryMB: 4096, PoweredOn: true, Owned: true, JobID: "job-1"}, u[0])
	assert.Equal(t, capacity.VMUsage{Name: "w-held", CPUs: 4, MemoryMB: 2048, PoweredOn: true, Owned: true}, u[1], "held: no job")
	assert.Equal(t, capacity.VMUsage{Name: "w-2", CPUs: 4, MemoryMB: 8192, PoweredOn: true}, u[2], "another hatchery's: not ours")
}
