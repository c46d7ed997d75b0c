package vsphere

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSpawnInFlightReadersAgree: "a spawn is in flight for job J" has one
// record (lifecycle.Table.BeginSpawn), and every reader asks it. While a
// real SpawnWorker for run-1 waits in its guest's readiness: CanSpawn
// refuses run-1 (not run-2), a second SpawnWorker for run-1 is refused,
// and the cleanup keeps a VM whose record names run-1 for that reason;
// once the spawn returns, all three read the job as free. A reader keeping
// its own copy (the old pendingJobs set next to another) would disagree
// with the others in one of the two halves.
func TestSpawnInFlightReadersAgree(t *testing.T) {
	t.Parallel()
	f := newSpFixture(t, spIPConfig())
	f.inv.Add(inventory.VM{Name: "debian12", Template: true})
	args := spV2Args()
	vm := f.expectClone("debian12", args.WorkerName, nil)
	waiting, release := make(chan struct{}), make(chan struct{})
	f.vs.EXPECT().WaitForGuestOperationsReady(gomock.Any(), vm).DoAndReturn(func(context.Context, vctypes.Ref) error {
		close(waiting)
		<-release
		return errors.New("guest never ready")
	})
	f.vs.EXPECT().ShutdownVirtualMachine(gomock.Any(), gomock.Any()).Return(nil).AnyTimes()

	spawned := make(chan error, 1)
	go func() { spawned <- f.h.SpawnWorker(context.Background(), args) }()
	<-waiting

	// A VM of an earlier attempt of the same job, never started, old
	// enough for the cleanup to take it were no spawn of its job in flight.
	old := inventory.VM{Name: "worker-v2-old", PowerState: vctypes.PoweredOff,
		Annotation: &inventory.Annotation{HatcheryName: spHatchery, WorkerName: "worker-v2-old", JobID: "run-1",
			Created: f.clock.Now().Add(-24 * time.Hour)}}
	ctx := context.Background()

	if r := f.h.CanSpawn(ctx, args.Model, "run-1", nil); assert.NotNil(t, r, "CanSpawn: run-1 is being spawned") {
		assert.Equal(t, refusal.ReasonSpawning, r.Reason)
	}
	assert.Nil(t, f.h.CanSpawn(ctx, args.Model, "run-2", nil), "CanSpawn: run-2 is free")
	err := f.h.SpawnWorker(ctx, args)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "already being spawned", "SpawnWorker: run-1 is being spawned")
	assert.Equal(t, awolKeep("spawn of its job in flight"), f.h.awolVerdict(ctx, old, apiWorkers{}), "cleanup: run-1 is being spawned")

	close(release)
	require.Error(t, <-spawned)
	assert.False(t, f.h.life.SpawnInFlight("run-1"))
	assert.Nil(t, f.h.CanSpawn(ctx, args.Model, "run-1", nil), "CanSpawn: run-1 is free again")
	v := f.h.awolVerdict(ctx, old, apiWorkers{})
	assert.NotEqual(t, "spawn of its job in flight", v.reason, "cleanup: run-1 is free again")
	assert.True(t, v.del, "cleanup: the never-started VM of run-1 goes")
}
