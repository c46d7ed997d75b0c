package hatchery

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// TestLoopProgressStuckSpawn: with every starter in a spawn that does not
// return, LoopProgress's spawn time stays at the moment the spawn began,
// however late it is asked; once the spawn returns it is "now" again (a
// starter waits for work). The queue time follows the polls. Before the
// sign-in both are zero. Without the starters' records a watchdog could
// not tell a stuck spawn loop from an idle one.
func TestLoopProgressStuckSpawn(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Provision.MaxConcurrentProvisioning = 1
	hs := newHarness(t, cfg, nil)
	hs.c.models = []sdk.Model{testModel("shared.infra", "debian12")}
	hs.h.gate = make(chan struct{})

	spawn, queue := hs.f.LoopProgress(time.Now())
	assert.True(t, spawn.IsZero() && queue.IsZero(), "nothing before the sign-in")

	hs.run()
	<-hs.f.SignedIn()
	require.Eventually(t, func() bool {
		now := time.Now()
		s, q := hs.f.LoopProgress(now)
		return s.Equal(now) && !q.IsZero()
	}, waitFor, tick, "idle: the spawn loop takes work, the queue is polled")

	hs.c.addJob(1, modelReq("shared.infra/debian12"))
	<-hs.h.spawned
	began := time.Now()
	later := began.Add(time.Hour)
	spawn, _ = hs.f.LoopProgress(later)
	assert.False(t, spawn.After(began), "stuck: the spawn loop last moved when the spawn began (%s), not later", spawn)

	close(hs.h.gate)
	require.Eventually(t, func() bool {
		s, _ := hs.f.LoopProgress(later)
		return s.Equal(later)
	}, waitFor, tick, "moving again: a starter waits for work")
}
