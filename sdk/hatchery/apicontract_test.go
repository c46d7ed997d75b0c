package hatchery

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/cdssim"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
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
		var failed string
		hs.c.snapshot(func(c *fakeClient) { failed = c.failReasons[1] })
		return failed != ""
	}, waitFor, tick, "the job is failed after 3 attempts")
	hs.h.get(func(h *fakeHatchery) { assert.Equal(t, 3, h.perJob["1"], "no fourth spawn") })
	hs.c.snapshot(func(c *fakeClient) {
		assert.Contains(t, c.failReasons[1], "no worker took the job after 3 spawn attempts")
		infos := c.spawnInfos[1]
		require.NotEmpty(t, infos)
		last := infos[len(infos)-1]
		assert.Equal(t, msgSpawnErrorHatcheryRetryAttempt, last.Message.ID)
		assert.Equal(t, []string{testHatchery, "no worker took the job after 3 spawn attempts"}, last.Message.Args)
		for _, in := range infos {
			_, ok := cdssim.SpawnInfoMessageIDs[in.Message.ID]
			assert.True(t, ok, "spawn info id %q is one the api defines", in.Message.ID)
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
		{"", false, []string{""}},
		{"eu", false, []string{"eu", ""}},
		{"eu", true, []string{"eu"}},
	} {
		var c CommonConfiguration
		c.Provision.Region, c.Provision.IgnoreJobWithNoRegion = tc.region, tc.ignore
		assert.Equal(t, tc.want, c.V1QueueRegions(), "region %q ignoreJobWithNoRegion %v", tc.region, tc.ignore)
	}
}
