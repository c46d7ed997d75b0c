package hatchery

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/stretchr/testify/assert"
)

// TestSpawnArgumentsCarryQueueTimes: the spawn of a V1 and of a V2 job
// gets the queue's "queued" time and the booking time, from which the
// hatchery measures the job start and its stages.
func TestSpawnArgumentsCarryQueueTimes(t *testing.T) {
	t.Parallel()
	queued := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

	hs := newHarness(t, testConfig(t), nil)
	hs.c.models = []sdk.Model{testModel("shared.infra", "debian12")}
	hs.c.addJob(1, modelReq("shared.infra/debian12"))
	hs.c.mu.Lock()
	hs.c.jobs[1].job.Queued = queued
	hs.c.mu.Unlock()
	hs.run()
	got := <-hs.h.spawned
	assert.Equal(t, "1", got.JobID)
	assert.True(t, got.Queued.Equal(queued), "queued %s", got.Queued)
	assert.False(t, got.Booked.IsZero(), "booked time set")
	assert.True(t, got.Booked.After(queued))

	cfg := testConfig(t)
	cfg.API.Token = ""
	cfg.API.TokenV2 = "v2-secret-token-123456"
	hs2 := newHarness(t, cfg, nil)
	spec := json.RawMessage(`{"image":"debian12","username":"u","password":"p"}`)
	hs2.c.v2jobs["run-q"] = &fakeV2Job{info: sdk.V2QueueJobInfo{
		RunJob: sdk.V2WorkflowRunJob{ID: "run-q", Status: "Waiting", Region: "eu", Queued: queued, Job: sdk.V2Job{RunsOn: sdk.V2JobRunsOn{Model: "m"}}},
		Model:  sdk.V2WorkerModel{Name: "Debian_12", Type: sdk.VSphere, Spec: spec},
	}}
	hs2.run()
	got = <-hs2.h.spawned
	assert.Equal(t, "run-q", got.JobID)
	assert.True(t, got.Queued.Equal(queued), "queued %s", got.Queued)
	assert.True(t, got.Booked.After(queued), "taken time set")
}
