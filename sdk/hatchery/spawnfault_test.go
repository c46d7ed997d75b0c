package hatchery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// errVCenterDown stands for a hatchery's spawn failing because its
// backend is unreachable.
var errVCenterDown = &BackendError{Err: errors.New("vcenter unreachable: connection refused")}

// TestBackendFaultNeverFailsV1Job: every spawn of the job fails for the
// backend's fault, far more often than maxAttemptsNumberBeforeFailure. The
// job is released back to the queue each time, never failed, and its
// attempts are not counted.
func TestBackendFaultNeverFailsV1Job(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Provision.MaxAttemptsNumberBeforeFailure = 2
	hs := newHarness(t, cfg, nil)
	hs.c.models = []sdk.Model{testModel("shared.infra", "debian12")}
	hs.h.spawnErr = errVCenterDown
	hs.c.addJob(5, modelReq("shared.infra/debian12"))
	stop := hs.run()
	const spawns = 6 // three times the cap
	for i := range spawns {
		nextSpawn(t, hs, i)
	}
	require.NoError(t, firstErr(stop()))
	hs.c.snapshot(func(c *fakeClient) {
		assert.Empty(t, c.failReasons, "no job failed for a fault of vcenter")
		assert.GreaterOrEqual(t, c.releases, spawns, "released back to the queue after every failure")
		assert.Empty(t, c.jobs[5].bookedBy, "left in the queue, not booked")
		for _, si := range c.spawnInfos[5] {
			assert.NotEqual(t, msgSpawnErrorHatcheryRetryAttempt, si.Message.ID, "no give-up spawn info")
		}
	})
	assert.Zero(t, hs.f.attempts.count(5), "no attempt counted")
	assert.NotContains(t, hs.logs.String(), "giving up on job")
	assert.Contains(t, hs.logs.String(), `"attempt_counted":false`)
}

// TestSpawnRefusedAtSpawnTimeIsNoWarning: a spawn that returns a refusal
// (no static address left since the admission) releases the job, its
// attempt uncounted, and logs no WARN: waiting for room is not a fault.
func TestSpawnRefusedAtSpawnTimeIsNoWarning(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Provision.MaxAttemptsNumberBeforeFailure = 2
	hs := newHarness(t, cfg, nil)
	hs.c.models = []sdk.Model{testModel("shared.infra", "debian12")}
	hs.h.spawnErr = fmt.Errorf("spawn: %w", refusal.Refuse(refusal.ReasonIP, "no static ip address left at clone time"))
	hs.c.addJob(5, modelReq("shared.infra/debian12"))
	stop := hs.run()
	for i := range 3 {
		nextSpawn(t, hs, i)
	}
	require.NoError(t, firstErr(stop()))
	hs.c.snapshot(func(c *fakeClient) {
		assert.Empty(t, c.failReasons, "a refusal never fails the job")
		assert.GreaterOrEqual(t, c.releases, 3, "released back to the queue after every refusal")
	})
	assert.Zero(t, hs.f.attempts.count(5), "no attempt counted")
	assert.NotContains(t, hs.logs.String(), `"level":"WARN"`)
	assert.Contains(t, hs.logs.String(), "spawn failed, releasing job (refused: ip)")
}

// TestBackendFaultNeverGivesUpV2Job: the same for a V2 run job, whose cap
// stops the hatchery taking it.
func TestBackendFaultNeverGivesUpV2Job(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.API.Token = ""
	cfg.API.TokenV2 = "v2-secret-token-123456"
	cfg.Provision.MaxAttemptsNumberBeforeFailure = 2
	hs := newHarness(t, cfg, nil)
	hs.h.spawnErr = errVCenterDown
	hs.c.v2jobs["run-a"] = &fakeV2Job{info: sdk.V2QueueJobInfo{
		RunJob: sdk.V2WorkflowRunJob{ID: "run-a", Status: "Waiting"},
		Model:  sdk.V2WorkerModel{Name: "debian12", Type: sdk.VSphere},
	}}
	stop := hs.run()
	const spawns = 6
	for i := range spawns {
		nextSpawn(t, hs, i)
	}
	require.NoError(t, firstErr(stop()))
	hs.c.snapshot(func(c *fakeClient) {
		assert.GreaterOrEqual(t, c.v2releases, spawns, "released back to the queue after every failure")
		for _, i := range c.v2infos["run-a"] {
			assert.NotContains(t, i.Message, "gives up")
		}
	})
	assert.Zero(t, hs.f.attemptsV2.count("run-a"), "no attempt counted")
}

// nextSpawn returns the next SpawnWorker call, failing the test when none
// comes within waitFor (a job failed or never admitted is not spawned for).
func nextSpawn(t *testing.T, hs *harness, i int) spawn.Arguments {
	t.Helper()
	select {
	case a := <-hs.h.spawned:
		return a
	case <-time.After(waitFor):
		t.Fatalf("spawn %d never came", i)
		return spawn.Arguments{}
	}
}

// gatedHatchery refuses every job of one model through SpawnGate.
type gatedHatchery struct {
	*fakeHatchery
	model string
}

func (g *gatedHatchery) GateSpawn(_ context.Context, m sdk.WorkerStarterWorkerModel, _ string) *refusal.Refusal {
	if m.GetName() == g.model {
		return refusal.Refuse(refusal.ReasonQuarantined, "template %q quarantined", g.model)
	}
	return nil
}

// TestSpawnGateRefusesBeforeBooking: a job the gate refuses is neither
// booked nor spawned for, and the refusal is logged with its code; the
// other model's job starts.
func TestSpawnGateRefusesBeforeBooking(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	hs := newHarness(t, cfg, func(o *Options) {
		o.Hatchery = &gatedHatchery{fakeHatchery: o.Hatchery.(*fakeHatchery), model: "shared.infra/broken"}
	})
	hs.c.models = []sdk.Model{testModel("shared.infra", "broken"), testModel("shared.infra", "debian12")}
	hs.c.addJob(1, modelReq("shared.infra/broken"))
	hs.c.addJob(2, modelReq("shared.infra/debian12"))
	stop := hs.run()
	got := nextSpawn(t, hs, 0)
	assert.Equal(t, "2", got.JobID)
	require.Eventually(t, func() bool {
		return strings.Contains(hs.logs.String(), `"reason":"quarantined"`)
	}, waitFor, tick)
	require.NoError(t, firstErr(stop()))
	hs.h.get(func(h *fakeHatchery) { assert.Zero(t, h.perJob["1"], "never spawned for") })
	hs.c.snapshot(func(c *fakeClient) {
		assert.Empty(t, c.jobs[1].bookedBy)
		assert.Equal(t, 1, c.books, "only the other job was booked")
	})
}

func TestUncountedSpawnError(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"backend fault", fmt.Errorf("spawn: %w", errVCenterDown), true},
		{"refusal", fmt.Errorf("spawn: %w", refusal.Refuse(refusal.ReasonQuarantined, "x")), true},
		{"plain", errors.New("guest never ready"), false},
		{"nil", nil, false},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, uncountedSpawnError(tc.err), tc.name)
	}
}
