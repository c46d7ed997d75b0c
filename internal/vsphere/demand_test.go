package vsphere

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/golang/mock/gomock"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/poolsize"
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

// TestRestartedHatcheryKeepsLearntDemand: the hatchery keeps each demand
// pool's learnt week in vCenter (its folder's attribute, a map standing
// for vCenter here): a hatchery that learnt a Monday 09:00 peak from the
// queue writes it within the hour; a new hatchery a week later, over the
// same vCenter, grows the pool ahead of that peak at its first pass,
// before any job is seen (docs/warm-pools.md, "After a restart").
func TestRestartedHatcheryKeepsLearntDemand(t *testing.T) {
	t.Parallel()
	vcenterAttrs := map[string]string{}
	var mu sync.Mutex
	store := func(f *spFixture) {
		f.vs.EXPECT().FolderAttribute(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, name string) (string, bool, error) {
			mu.Lock()
			defer mu.Unlock()
			v, ok := vcenterAttrs[name]
			return v, ok, nil
		}).AnyTimes()
		f.vs.EXPECT().SetFolderAttribute(gomock.Any(), gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, name, value string) error {
			mu.Lock()
			defer mu.Unlock()
			vcenterAttrs[name] = value
			return nil
		}).AnyTimes()
	}
	cfg := func() *config.Config {
		c := spConfig()
		c.WorkerProvisioning = []config.WorkerProvisioning{{ModelVMWare: "debian12", Max: 20, AheadMinutes: 30}}
		return c
	}
	k := warmpool.Key{Model: "debian12"}
	status := func(f *spFixture) warmpool.PoolStatus {
		for _, st := range f.h.pool.PoolStatus() {
			if st.Key == k {
				return st
			}
		}
		t.Fatalf("no status for %v", k)
		return warmpool.PoolStatus{}
	}
	ctx := context.Background()

	first := newSpFixture(t, cfg())
	store(first)
	first.h.pool.Provision(ctx) // Saturday 12:00: reads nothing
	monday9 := time.Date(2025, 3, 3, 9, 0, 0, 0, time.UTC)
	first.clock.Advance(monday9.Sub(first.clock.Now()))
	for i := range 20 {
		assert.Nil(t, first.h.CanSpawn(ctx, spV2Args().Model, fmt.Sprintf("run-%d", i), nil))
	}
	first.clock.Advance(30 * time.Minute)
	first.h.pool.Provision(ctx) // learns the 09:00 quarter, writes it
	mu.Lock()
	require.Len(t, vcenterAttrs, 1, "one record, the pool's")
	require.Contains(t, vcenterAttrs, warmpool.DemandAttribute(spHatchery, k))
	mu.Unlock()

	restarted := newSpFixture(t, cfg())
	store(restarted)
	restarted.clock.Advance(monday9.Add(7*24*time.Hour - 5*time.Minute).Sub(restarted.clock.Now()))
	restarted.h.pool.Provision(ctx)
	st := status(restarted)
	assert.Greater(t, st.Target, 0, "grown ahead of the learnt peak at the first pass: %s", st.Detail)
	assert.Equal(t, poolsize.ReasonAhead, st.Reason)
}
