package vsphere

import (
	"context"
	"testing"

	"github.com/cds-contrib/hatchery-vsphere/internal/admission"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
	"github.com/stretchr/testify/require"
)

// TestSpawnBuildsTheAdmittedFlavor: a job's flavor is resolved once, by
// the admission, and the spawn builds the flavor the admission reserved
// (spawn.Arguments.Reservation). The configuration changes between the two
// so that a second resolution answers otherwise (an unknown flavor): the
// spawn with the admission's reservation gets past its flavor, the same
// spawn without it fails there. It fails if SpawnWorker resolved the
// flavor again.
func TestSpawnBuildsTheAdmittedFlavor(t *testing.T) {
	t.Parallel()
	env := newCapEnv(t, config.Config{MaxCPUs: 64, Flavors: capFlavors(), DefaultFlavor: "medium"})
	env.inv.Set(inventory.VM{Name: "debian12", Template: true, NumCPU: 2, MemoryMB: 2048})
	ctx := context.Background()

	res, err := env.h.AllocateResources(ctx, capV2(""), "job-1", nil)
	require.NoError(t, err)
	f, ok, ferr := admission.ResolvedFlavor(res)
	require.True(t, ok)
	require.NoError(t, ferr)
	require.Equal(t, "medium", f.Name)
	_, cpus, _ := env.h.ReservedFootprint()
	require.EqualValues(t, 4, cpus, "the medium footprint is reserved")

	env.h.conf().DefaultFlavor = "gone" // a second resolution: unknown flavor
	args := spawn.Arguments{WorkerName: "w-1", JobID: "job-1", Model: capV2(""), Reservation: res}
	got, err := env.h.spawnFlavor(args)
	require.NoError(t, err)
	require.Equal(t, "medium", got.Name)

	err = env.h.SpawnWorker(ctx, args)
	require.Error(t, err, "no guest credentials in this configuration")
	require.NotContains(t, err.Error(), "resolve flavor", "the spawn takes the admitted flavor")

	args.Reservation, args.JobID = nil, "job-2"
	err = env.h.SpawnWorker(ctx, args)
	require.ErrorContains(t, err, `resolve flavor: flavor "gone" is not defined`, "without the admission's decision the spawn resolves it")
}

// TestUnknownFlavorReservesNothing: an unknown flavor is allowed by the
// admission (so that the spawn reports it to the job) without a
// reservation; the spawn then resolves it, with the same function, and
// reports it. A flavor-less job with an unknown footprint still hands its
// resolution (no flavor) over.
func TestUnknownFlavorReservesNothing(t *testing.T) {
	t.Parallel()
	env := newCapEnv(t, config.Config{MaxCPUs: 64, Flavors: capFlavors()})
	res, err := env.h.AllocateResources(context.Background(), capV2("huge"), "job-1", nil)
	require.NoError(t, err)
	require.Nil(t, res)
	_, err = env.h.spawnFlavor(spawn.Arguments{Model: capV2("huge"), Reservation: res})
	var unknown *UnknownFlavorError
	require.ErrorAs(t, err, &unknown)
	require.Equal(t, "huge", unknown.Name)

	res, err = env.h.AllocateResources(context.Background(), capV2(""), "job-2", nil) // no template: unknown footprint
	require.NoError(t, err)
	f, ok, ferr := admission.ResolvedFlavor(res)
	require.True(t, ok, "the decision travels even with nothing reserved")
	require.NoError(t, ferr)
	require.Nil(t, f)
	n, _, _ := env.h.ReservedFootprint()
	require.Zero(t, n)
}
