package hatchery

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// healthObs records what a HealthObserver is told.
type healthObs struct {
	NopObserver
	mu         sync.Mutex
	heartbeats []bool
	full       int
}

func (o *healthObs) HeartbeatSent(ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.heartbeats = append(o.heartbeats, ok)
}

func (o *healthObs) MaxWorkersReached() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.full++
}

func (o *healthObs) get() (heartbeats []bool, full int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]bool(nil), o.heartbeats...), o.full
}

// TestHealthObserverHeartbeats: an Observer that is a HealthObserver hears
// of every heartbeat, failed ones included, until the framework stops.
func TestHealthObserverHeartbeats(t *testing.T) {
	t.Parallel()
	obs := &healthObs{}
	hs := newHarness(t, testConfig(t), func(o *Options) { o.Observer = obs })
	hs.run()
	require.Eventually(t, func() bool { hb, _ := obs.get(); return len(hb) >= 2 }, waitFor, tick)
	hb, _ := obs.get()
	assert.True(t, hb[0], "heartbeats are accepted")

	hs.c.snapshot(func(c *fakeClient) { c.heartbeatErr = serverError() })
	require.Eventually(t, func() bool { hb, _ := obs.get(); return !hb[len(hb)-1] }, waitFor, tick)
}

// TestHealthObserverMaxWorkers: a job refused because maxWorker workers
// already run is reported; one that fits is not.
func TestHealthObserverMaxWorkers(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Provision.MaxWorker = 1
	obs := &healthObs{}
	hs := newHarness(t, cfg, func(o *Options) { o.Observer = obs })
	hs.c.models = []sdk.Model{testModel("shared.infra", "debian12")}
	hs.h.block = true // the first spawn holds the only slot
	hs.c.addJob(1, modelReq("shared.infra/debian12"), regionReq("eu"))
	hs.run()
	<-hs.h.spawned
	_, full := obs.get()
	assert.Zero(t, full, "the first job fitted")

	hs.c.addJob(2, modelReq("shared.infra/debian12"), regionReq("eu"))
	require.Eventually(t, func() bool { _, full := obs.get(); return full > 0 }, waitFor, tick)
}
