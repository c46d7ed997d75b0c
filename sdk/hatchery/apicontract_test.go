package hatchery

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/cdssim"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// A job whose worker never takes it comes back to the queue after every
// spawn (its VM reclaimed, its booking released). Every attempt counts, a
// spawn that succeeded included; at maxAttemptsNumberBeforeFailure the job
// is failed with a spawn info saying why.
func TestJobFailedWhenNoWorkerEverTakesIt(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Provision.MaxAttemptsNumberBeforeFailure = 3
	hs := newHarness(t, cfg, nil)
	hs.c.models = []sdk.Model{testModel("shared.infra", "debian12")}
	hs.c.addJob(1, modelReq("shared.infra/debian12"))
	hs.run()

	for i := 1; i <= 3; i++ {
		select {
		case a := <-hs.h.spawned:
			assert.Equal(t, "1", a.JobID)
		case <-time.After(waitFor):
			t.Fatalf("spawn %d did not happen", i)
		}
		// The spawn succeeded but no worker takes the job: the VM is
		// reclaimed and the booking released, the job is waiting again.
		require.Eventually(t, func() bool {
			var booked bool
			hs.c.snapshot(func(c *fakeClient) { booked = c.jobs[1].bookedBy != "" })
			return booked
		}, waitFor, tick)
		hs.c.snapshot(func(c *fakeClient) { c.jobs[1].bookedBy = "" })
	}
	require.Eventually(t, func() bool {
		var failed bool
		hs.c.snapshot(func(c *fakeClient) { _, failed = c.failReasons[1] })
		return failed
	}, waitFor, tick, "the job is failed after 3 attempts")
	hs.h.get(func(h *fakeHatchery) { assert.Equal(t, 3, h.perJob["1"], "no fourth spawn") })
	hs.c.snapshot(func(c *fakeClient) {
		infos := c.spawnInfos[1]
		require.NotEmpty(t, infos)
		last := infos[len(infos)-1]
		assert.Equal(t, msgSpawnErrorHatcheryRetryAttempt, last.Message.ID)
		assert.Equal(t, []string{testHatchery, "no worker took the job after 3 spawn attempts"}, last.Message.Args)
		for _, in := range infos {
			msg, ok := cdssim.RenderSpawnInfo(in.Message)
			assert.True(t, ok, "spawn info id %q is one the api defines", in.Message.ID)
			assert.NotContains(t, msg, "%!", "spawn info %q renders with its arguments", in.Message.ID)
		}
	})
}

// A failed registration is reported on the model once per attempt, and
// attempts stop once the model counts maxModelSpawnErrors spawn errors.
func TestRegistrationFailureReportedOncePerAttemptAndStops(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Provision.MaxConcurrentRegistering = 1
	hs := newHarness(t, cfg, nil)
	m := testModel("shared.infra", "debian12")
	m.NeedRegistration = true
	hs.c.models = []sdk.Model{m}
	hs.h.needReg["shared.infra/debian12"] = true
	hs.h.spawnErr = errors.New("clone base image: no template")
	hs.run()

	require.Eventually(t, func() bool {
		return len(logLines(hs.logs.String(), "registration stops at 5", "WARN")) == 1
	}, waitFor, tick)
	// Later passes see the same count and spawn nothing more.
	var polls int
	hs.c.snapshot(func(c *fakeClient) { polls = c.polls })
	require.Eventually(t, func() bool {
		var n int
		hs.c.snapshot(func(c *fakeClient) { n = c.polls })
		return n >= polls+10
	}, waitFor, tick)
	var spawns int
	hs.h.get(func(h *fakeHatchery) { spawns = len(h.spawns) })
	assert.Equal(t, maxModelSpawnErrors, spawns, "registration attempts stop at the limit")
	hs.c.snapshot(func(c *fakeClient) {
		assert.Len(t, c.modelErrors, spawns, "one report per attempt")
		for _, e := range c.modelErrors {
			assert.True(t, strings.HasPrefix(e, "shared.infra/debian12: "), e)
			assert.Contains(t, e, "no template")
		}
	})
	assert.Len(t, logLines(hs.logs.String(), "registration stops at 5", "WARN"), 1, "one Warn line, repeats at Debug")
}

// /mon/status has one line per queue: a failing V2 poll shows even while
// V1 polls fine.
func TestStatusHasOneLinePerQueue(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.API.TokenV2 = "v2-secret-token-123456"
	hs := newHarness(t, cfg, nil)
	hs.c.snapshot(func(c *fakeClient) { c.v2outage = true })
	hs.run()

	lineOf := func(st sdk.MonitoringStatus, component string) (sdk.MonitoringStatusLine, bool) {
		for _, l := range st.Lines {
			if l.Component == component {
				return l, true
			}
		}
		return sdk.MonitoringStatusLine{}, false
	}
	require.Eventually(t, func() bool {
		st := hs.f.Status(t.Context())
		v1, ok1 := lineOf(st, "Queue V1")
		v2, ok2 := lineOf(st, "Queue V2")
		return ok1 && ok2 && v1.Status == sdk.MonitoringStatusOK && strings.Contains(v2.Value, "poll failed")
	}, waitFor, tick)
	st := hs.f.Status(t.Context())
	v2, _ := lineOf(st, "Queue V2")
	assert.Equal(t, sdk.MonitoringStatusWarn, v2.Status)
	assert.Contains(t, v2.Value, "region default")
	_, old := lineOf(st, "Queue")
	assert.False(t, old, "no shared Queue line")
}

func TestV1QueueRegions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		region string
		ignore bool
		want   []string
	}{
		{"", false, nil},
		{"", true, nil},
		{"eu", false, []string{"eu", ""}},
		{"eu", true, []string{"eu"}},
	} {
		var c CommonConfiguration
		c.Provision.Region, c.Provision.IgnoreJobWithNoRegion = tc.region, tc.ignore
		assert.Equal(t, tc.want, c.V1QueueRegions(), "region %q ignoreJobWithNoRegion %v", tc.region, tc.ignore)
	}
}

// End to end against the simulator, V1 and V2 with a region configured:
// every spawned worker signs in with the token its hatchery gave it
// (checked against the hatchery's public key), takes its job and ends it.
// The V1 poll asks for the region and for the jobs without one; the V2
// queue is read in the region the V2 sign-in answered, not
// provision.region.
func TestSimWorkersSignInTakeAndEndTheirJobs(t *testing.T) {
	t.Parallel()
	sim := cdssim.Start(t, cdssim.Options{Regions: []string{"eu-west"}, CDN: &sdk.CDNConfig{HTTPURL: "http://cdn.test"}})
	r := newSimRigOn(t, sim, simRigOptions{v1: true, v2: true, cfg: func(cfg *CommonConfiguration) {
		cfg.Provision.Region = "eu"
		cfg.Provision.MaxWorker = 10
	}})
	r.h.registerInSim = true
	model := r.addModel()
	region := func(reg string) sdk.Requirement {
		return sdk.Requirement{Name: "region", Type: sdk.RegionRequirement, Value: reg}
	}
	inRegion := sim.AddJobV1(cdssim.JobV1{Requirements: sdk.RequirementList{modelReq(model), region("eu")}})
	noRegion := sim.AddJobV1(cdssim.JobV1{Requirements: sdk.RequirementList{modelReq(model)}})
	elsewhere := sim.AddJobV1(cdssim.JobV1{Requirements: sdk.RequirementList{modelReq(model), region("us")}})
	v2job := sim.AddJobV2(cdssim.JobV2{Model: v2Model()})
	stop := r.run()

	done := func() bool {
		a, _ := sim.JobV1(inRegion)
		b, _ := sim.JobV1(noRegion)
		c, _ := sim.JobV2(v2job)
		return a.Status == sdk.StatusSuccess && b.Status == sdk.StatusSuccess && c.Status == sdk.StatusSuccess
	}
	require.Eventually(t, func() bool {
		r.h.finishAll() // the workers that took their job end it
		return done()
	}, simWait, 10*time.Millisecond)
	require.NoError(t, stop())

	r.h.get(func(h *simHatchery) {
		assert.Empty(t, h.workerErrs, "every worker signed in and took its job")
		assert.Equal(t, map[string]int{jobKey(inRegion): 1, jobKey(noRegion): 1, v2job: 1}, h.perJob)
	})
	st, _ := sim.JobV1(elsewhere)
	assert.Equal(t, sdk.StatusWaiting, st.Status, "a job of another region is left alone")
	assert.Empty(t, sim.UnknownSpawnInfoIDs(), "only spawn info ids the api defines")
	var v1Queries []string
	for _, c := range sim.Calls() {
		if c.Method == "GET" && c.Path == "/queue/workflows" {
			v1Queries = append(v1Queries, c.Query)
		}
	}
	require.NotEmpty(t, v1Queries)
	assert.Equal(t, "modelType=vsphere&region=eu&region=", v1Queries[0])
	assert.Positive(t, sim.CountCalls("GET", "/v2/queue/eu-west"), "the sign-in region")
	assert.Zero(t, sim.CountCalls("GET", "/v2/queue/eu"), "not provision.region")
}

// Stopping leaves the jobs already spawned for booked (their workers may
// still take them) and says which in one line.
func TestStopListsSpawnedJobsLeftBooked(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	hs := newHarness(t, cfg, nil)
	hs.c.models = []sdk.Model{testModel("shared.infra", "debian12")}
	hs.c.addJob(6, modelReq("shared.infra/debian12"))
	stop := hs.run()
	ended := <-hs.h.spawned
	require.Eventually(t, func() bool {
		return len(logLines(hs.logs.String(), `"msg":"worker spawned"`, "INFO")) == 1
	}, waitFor, tick)
	// Job 6's worker ran it and left: the job is no longer booked.
	hs.h.finishAll()
	hs.c.finishJob(6)
	require.Eventually(t, func() bool { return !hs.f.poolNames()(ended.WorkerName) }, waitFor, tick)
	hs.c.addJob(7, modelReq("shared.infra/debian12"))
	a := <-hs.h.spawned
	require.Eventually(t, func() bool {
		return len(logLines(hs.logs.String(), `"msg":"worker spawned"`, "INFO")) == 2
	}, waitFor, tick)
	require.NoError(t, firstErr(stop()))
	lines := logLines(hs.logs.String(), "jobs spawned for stay booked", "INFO")
	require.Len(t, lines, 1)
	assert.Contains(t, lines[0], `"jobs":"v1:7(`+a.WorkerName+`)"`)
	assert.Contains(t, lines[0], `"count":1`)
	hs.c.snapshot(func(c *fakeClient) { assert.Equal(t, testHatchery, c.jobs[7].bookedBy, "still booked") })
}

// A registration whose model commands do not render is reported on the
// model once: the same version of the model is not registered again (it
// would fail the same way); once the model is modified it is.
func TestRegistrationOfCommandsThatDoNotRenderReportedOnce(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Provision.MaxConcurrentRegistering = 1
	hs := newHarness(t, cfg, nil)
	m := testModel("shared.infra", "debian12")
	m.NeedRegistration = true
	m.UserLastModified = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	hs.c.models = []sdk.Model{m}
	hs.h.needReg["shared.infra/debian12"] = true
	hs.h.spawnErr = fmt.Errorf("register model: build register script: %w",
		&spawn.ModelCommandError{Err: errors.New(`template: commands:1:7: executing "commands" at <.Hatchery>: can't evaluate field Hatchery`)})
	hs.run()

	require.Eventually(t, func() bool {
		var n int
		hs.c.snapshot(func(c *fakeClient) { n = len(c.modelErrors) })
		return n >= 1
	}, waitFor, tick)
	// Later passes see the same version and spawn nothing more.
	var polls int
	hs.c.snapshot(func(c *fakeClient) { polls = c.polls })
	require.Eventually(t, func() bool {
		var n int
		hs.c.snapshot(func(c *fakeClient) { n = c.polls })
		return n >= polls+10
	}, waitFor, tick)
	hs.h.get(func(h *fakeHatchery) { assert.Equal(t, 1, len(h.spawns), "one registration attempt") })
	hs.c.snapshot(func(c *fakeClient) {
		require.Len(t, c.modelErrors, 1, "one report")
		assert.Contains(t, c.modelErrors[0], "model commands do not render: ")
		assert.Contains(t, c.modelErrors[0], "can't evaluate field Hatchery")
	})
	assert.Len(t, logLines(hs.logs.String(), "model commands do not render (reported on the model)", "WARN"), 1, "one Warn line, repeats at Debug")

	// The model is modified: it is registered again.
	hs.c.snapshot(func(c *fakeClient) { c.models[0].UserLastModified = m.UserLastModified.Add(time.Hour) })
	require.Eventually(t, func() bool {
		var n int
		hs.h.get(func(h *fakeHatchery) { n = len(h.spawns) })
		return n >= 2
	}, waitFor, tick)
}
