package vsphere

import (
	"context"
	"errors"
	"github.com/cds-contrib/hatchery-vsphere/internal/capacity"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// resAllocate asks AllocateResources for one job of flavor.
func resAllocate(t *testing.T, env *capEnv, flavor, job string) (spawn.Reservation, error) {
	t.Helper()
	return env.h.AllocateResources(context.Background(), capV2(flavor), job, nil)
}

// resReserved is ReservedFootprint as one value.
type resReserved struct {
	n         int
	cpus, mem int64
}

func resFootprint(env *capEnv) resReserved {
	n, c, m := env.h.ReservedFootprint()
	return resReserved{n, c, m}
}

// TestAllocateResourcesReleaseFreesAtOnce: a reservation the framework
// gives back (booking lost, job gone, shutdown) frees its footprint for
// the very next decision, in every inventory mode — unlike a spawn's end,
// which keeps it counted for the shared inventory's grace. Before the
// framework could release, such a footprint stayed reserved for
// capacity.ReservationTTL.
func TestAllocateResourcesReleaseFreesAtOnce(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{config.InventoryListing, config.InventoryShared, config.InventoryWatch} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			env := newCapEnv(t, config.Config{MaxCPUs: 16, Flavors: capFlavors(), InventoryMode: mode})
			r1, err := resAllocate(t, env, "large", "j1")
			require.NoError(t, err)
			require.NotNil(t, r1)
			require.Equal(t, resReserved{1, 8, 16384}, resFootprint(env))
			r2, err := resAllocate(t, env, "large", "j2")
			require.NoError(t, err)
			require.Equal(t, resReserved{2, 16, 32768}, resFootprint(env))

			_, err = resAllocate(t, env, "large", "j3")
			var ref *refusal.Refusal
			require.True(t, errors.As(err, &ref), "a refusal is typed: %v", err)
			require.Equal(t, refusal.ReasonCapacityCPU, ref.Reason)
			require.Equal(t, capacity.DetailCPULimit, ref.Detail)
			require.True(t, ref.Reason.Waits())

			r1.Release(refusal.ReasonBooked) // j1 lost to another hatchery
			require.Equal(t, resReserved{1, 8, 16384}, resFootprint(env))
			r3, err := resAllocate(t, env, "large", "j3") // same instant: no grace, no expiry
			require.NoError(t, err, "j1's footprint is free at once")
			r1.Release(refusal.ReasonBooked) // again: nothing more is freed
			require.Equal(t, resReserved{2, 16, 32768}, resFootprint(env))

			r2.Release(refusal.ReasonShutdown)
			r3.Release(refusal.ReasonJobGone)
			require.Equal(t, resReserved{}, resFootprint(env))
		})
	}
}

// TestAllocateResourcesReleaseAfterSpawnDoesNothing: once SpawnWorker
// released the reservation (its VM may be powered on and not yet in a
// lagging snapshot), a late Release through the framework's handle must
// not forget the footprint the grace still counts.
func TestAllocateResourcesReleaseAfterSpawnDoesNothing(t *testing.T) {
	t.Parallel()
	env := newCapEnv(t, config.Config{MaxCPUs: 16, Flavors: capFlavors(), InventoryMode: config.InventoryShared})
	r1, err := resAllocate(t, env, "large", "j1")
	require.NoError(t, err)
	env.h.releaseCapacity("j1") // the spawn ended; the snapshot does not show its VM yet
	r1.Release(refusal.ReasonAbandoned)
	_, err = resAllocate(t, env, "large", "j2")
	require.NoError(t, err)
	_, err = resAllocate(t, env, "large", "j3")
	require.Error(t, err, "j1's VM is still counted through its released reservation")
	env.clock.Advance(env.h.releaseGrace())
	_, err = resAllocate(t, env, "large", "j3")
	require.NoError(t, err, "after the grace the snapshot would show the VM")
}

// TestAllocateResourcesReplacedReservation: a handle whose reservation was
// replaced by a newer decision for the same job frees nothing.
func TestAllocateResourcesReplacedReservation(t *testing.T) {
	t.Parallel()
	env := newCapEnv(t, config.Config{MaxCPUs: 16, Flavors: capFlavors()})
	old, err := resAllocate(t, env, "large", "j1")
	require.NoError(t, err)
	_, err = resAllocate(t, env, "large", "j1")
	require.NoError(t, err)
	old.Release(refusal.ReasonBooked)
	require.Equal(t, resReserved{1, 8, 16384}, resFootprint(env))
}

// TestAllocateResourcesOutcomes: the typed answers besides a fit.
func TestAllocateResourcesOutcomes(t *testing.T) {
	t.Parallel()
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		env := newCapEnv(t, config.Config{MaxMemoryMB: 8192, Flavors: capFlavors()})
		_, err := resAllocate(t, env, "large", "j1")
		var ref *refusal.Refusal
		require.True(t, errors.As(err, &ref), "%v", err)
		require.Equal(t, refusal.ReasonCapacityMemory, ref.Reason)
		require.Equal(t, resReserved{}, resFootprint(env))
	})
	t.Run("resource pool cpu", func(t *testing.T) {
		t.Parallel()
		env := newCapEnv(t, config.Config{Flavors: capFlavors()})
		env.pool.set(1<<20, 0)
		_, err := resAllocate(t, env, "small", "j1")
		var ref *refusal.Refusal
		require.True(t, errors.As(err, &ref), "%v", err)
		require.Equal(t, refusal.ReasonCapacityCPU, ref.Reason)
		require.Equal(t, capacity.DetailPoolCPU, ref.Detail)
	})
	t.Run("unknown flavor reserves nothing", func(t *testing.T) {
		t.Parallel()
		env := newCapEnv(t, config.Config{MaxCPUs: 1, Flavors: capFlavors()})
		r, err := resAllocate(t, env, "huge", "j1")
		require.NoError(t, err)
		require.Nil(t, r)
		require.Equal(t, resReserved{}, resFootprint(env))
	})
	t.Run("inventory error is not a refusal", func(t *testing.T) {
		t.Parallel()
		env := newCapEnv(t, config.Config{MaxCPUs: 16, Flavors: capFlavors()})
		env.inv.SetErr(capError("vcenter down"))
		r, err := resAllocate(t, env, "small", "j1")
		require.Nil(t, r)
		var ref *refusal.Refusal
		require.False(t, errors.As(err, &ref))
		require.Equal(t, refusal.ReasonResources, refusal.AsRefusal(err).Reason)
	})
	t.Run("expiry stays the safety net", func(t *testing.T) {
		t.Parallel()
		env := newCapEnv(t, config.Config{MaxCPUs: 16, Flavors: capFlavors()})
		r, err := resAllocate(t, env, "large", "j1")
		require.NoError(t, err)
		env.clock.Advance(capacity.ReservationTTL + time.Second)
		_, err = resAllocate(t, env, "xlarge", "j2") // expires j1 first
		require.NoError(t, err)
		r.Release(refusal.ReasonAbandoned) // the expired one: nothing to free
		require.Equal(t, resReserved{1, 16, 32768}, resFootprint(env))
	})
}
