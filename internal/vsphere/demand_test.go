package vsphere

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/warmpool"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// TestCanSpawnCountsQueueArrivals: every job CanSpawn is asked about
// counts for the pool that would serve it, once whatever the number of
// polls, whether the hatchery then takes it or not; a job it can never
// serve (an unsupported requirement) does not count; a started job no
// longer waits (docs/warm-pools.md).
func TestCanSpawnCountsQueueArrivals(t *testing.T) {
	t.Parallel()
	cfg := spConfig()
	cfg.WorkerProvisioning = []config.WorkerProvisioning{{ModelVMWare: "debian12", Max: 5}}
	f := newSpFixture(t, cfg)
	model := spV2Args().Model
	for range 2 { // two polls of the queue
		for _, id := range []string{"run-1", "run-2", "run-3"} {
			assert.Nil(t, f.h.CanSpawn(context.Background(), model, id, nil))
		}
	}
	pending := "run-4"
	f.h.life.BeginSpawn(pending)
	assert.NotNil(t, f.h.CanSpawn(context.Background(), model, pending, nil), "refused: in flight here, still a job of the queue")
	assert.NotNil(t, f.h.CanSpawn(context.Background(), model, "run-5", []sdk.Requirement{{Name: "pg", Type: sdk.ServiceRequirement, Value: "pg"}}))

	k := warmpool.Key{Model: "debian12"}
	require.NotNil(t, f.h.pool.Demand)
	assert.Equal(t, 4, f.h.pool.Demand.Waiting(k, f.clock.Now()))
	f.h.pool.NoteStart(model, nil, "run-1", false)
	assert.Equal(t, 3, f.h.pool.Demand.Waiting(k, f.clock.Now()))
}
