package hatchery

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/cdssim"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/workerpool"
)

const waitFor = 10 * time.Second
const tick = 2 * time.Millisecond

func TestCapacityHoldsUnder200QueuedJobs(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Provision.MaxWorker = 10
	cfg.Provision.MaxConcurrentProvisioning = 4
	hs := newHarness(t, cfg, nil)
	hs.c.models = []sdk.Model{testModel("shared.infra", "debian12")}
	hs.h.spawnDelay = time.Millisecond
	const n = 200
	for i := int64(1); i <= n; i++ {
		hs.c.addJob(i, modelReq("shared.infra/debian12"), regionReq("eu"))
	}
	stop := hs.run()

	// The workers run their job: each completer pass finishes every started
	// worker and its job, so slots free up and the queue drains.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tk := time.NewTicker(3 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				for _, j := range hs.h.finishAll() {
					var id int64
					id, _ = strconv.ParseInt(j, 10, 64)
					hs.c.finishJob(id)
				}
			}
		}
	}()
	require.Eventually(t, func() bool {
		finished := 0
		hs.c.snapshot(func(c *fakeClient) {
			for _, j := range c.jobs {
				if j.done {
					finished++
				}
			}
		})
		return finished == n
	}, 30*time.Second, 5*time.Millisecond)
	cancel()
	<-done
	err, _ := stop()
	require.NoError(t, err)

	hs.h.get(func(h *fakeHatchery) {
		assert.LessOrEqual(t, h.maxLive, 10, "never more than maxWorker workers")
		assert.LessOrEqual(t, h.maxInFlight, 4, "never more than maxConcurrentProvisioning spawns in flight")
		assert.GreaterOrEqual(t, h.maxInFlight, 2, "spawns do run in parallel")
		assert.Len(t, h.perJob, n)
		for job, c := range h.perJob {
			assert.Equal(t, 1, c, "job %s spawned once", job)
		}
	})
	hs.c.snapshot(func(c *fakeClient) { assert.Empty(t, c.failReasons) })
}

func TestJobBookedByAnotherHatcheryIsSkipped(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, testConfig(t), nil)
	hs.c.models = []sdk.Model{testModel("shared.infra", "debian12")}
	hs.c.addJob(1, modelReq("shared.infra/debian12"))
	hs.c.jobs[1].bookedBy = "other-hatchery" // booked between the poll and our book
	hs.c.addJob(2, modelReq("shared.infra/debian12"))
	hs.run()

	got := <-hs.h.spawned
	assert.Equal(t, "2", got.JobID)
	require.Eventually(t, func() bool {
		var books, polls int
		hs.c.snapshot(func(c *fakeClient) { books, polls = c.books, c.polls })
		return books >= 3 && polls >= 5
	}, waitFor, tick)
	hs.h.get(func(h *fakeHatchery) { assert.Zero(t, h.perJob["1"], "no spawn for a job booked elsewhere") })
	assert.NotContains(t, hs.logs.String(), `"level":"WARN","msg":"job skipped"`)
}

func TestAPIOutageIsSurvived(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, testConfig(t), nil)
	hs.c.models = []sdk.Model{testModel("shared.infra", "debian12")}
	hs.c.signInFailures = 1 << 30 // the API is down until the test says otherwise
	hs.c.outage = true
	hs.run()
	<-hs.f.MonReady()

	// While signing in fails the status is honest: 503 with the API line.
	require.Eventually(t, func() bool {
		var n int
		hs.c.snapshot(func(c *fakeClient) { n = c.signIns })
		return n >= 2
	}, waitFor, tick)
	code, st := getStatus(t, hs.f.MonAddr())
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, sdk.MonitoringStatusAlert, lineByComponent(st, "API").Status)
	assert.Contains(t, lineByComponent(st, "API").Value, "sign-in failed")

	// The API is back for sign-in, but the queue answers 5xx for a while.
	hs.c.snapshot(func(c *fakeClient) { c.signInFailures = 0 })
	require.Eventually(t, func() bool {
		_, st := getStatus(t, hs.f.MonAddr())
		return lineByComponent(st, "API").Status == sdk.MonitoringStatusOK
	}, waitFor, tick)
	hs.c.addJob(7, modelReq("shared.infra/debian12"))
	require.Eventually(t, func() bool {
		var n int
		hs.c.snapshot(func(c *fakeClient) { n = c.polls })
		return n >= 3
	}, waitFor, tick)
	hs.h.get(func(h *fakeHatchery) { assert.Empty(t, h.spawns) })
	hs.c.setOutage(false)

	got := <-hs.h.spawned
	assert.Equal(t, "7", got.JobID)
}

func TestHeartbeatFailuresStopRun(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, testConfig(t), nil)
	hs.c.heartbeatErr = serverError()
	errc := make(chan error, 1)
	go func() { errc <- hs.f.Run(context.Background()) }()
	select {
	case err := <-errc:
		require.Error(t, err)
		assert.ErrorIs(t, err, errHeartbeat)
	case <-time.After(waitFor):
		t.Fatal("run did not stop after maxHeartbeatFailures")
	}
	hs.c.snapshot(func(c *fakeClient) { assert.Equal(t, 3, c.heartbeats) })
}

func TestAttemptCapFailsJob(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Provision.MaxAttemptsNumberBeforeFailure = 3
	hs := newHarness(t, cfg, nil)
	hs.c.models = []sdk.Model{testModel("shared.infra", "debian12")}
	hs.h.spawnErr = errors.New("clone failed")
	hs.c.addJob(5, modelReq("shared.infra/debian12"))
	hs.run()

	require.Eventually(t, func() bool {
		var ok bool
		hs.c.snapshot(func(c *fakeClient) { _, ok = c.failReasons[5] })
		return ok
	}, waitFor, tick)
	hs.c.snapshot(func(c *fakeClient) {
		infos := c.spawnInfos[5]
		require.NotEmpty(t, infos)
		last := infos[len(infos)-1]
		assert.Equal(t, msgSpawnErrorHatcheryRetryAttempt, last.Message.ID)
		require.Len(t, last.Message.Args, 2)
		assert.Contains(t, last.Message.Args[1], "3 attempts")
		assert.Contains(t, last.Message.Args[1], "clone failed")
		assert.Equal(t, 2, c.releases, "released after the first two failures, failed after the third")
		var ids []string
		for _, si := range c.spawnInfos[5] {
			ids = append(ids, si.Message.ID)
		}
		assert.Contains(t, ids, msgSpawnInfoHatcheryErrorSpawn)
	})
	hs.h.get(func(h *fakeHatchery) { assert.Equal(t, 3, h.perJob["5"]) })
}

func TestRegionFilter(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		ignore bool
		reqs   sdk.RequirementList
		want   bool
	}{
		{"same region", false, sdk.RequirementList{regionReq("eu")}, true},
		{"other region", false, sdk.RequirementList{regionReq("us")}, false},
		{"no region accepted", false, nil, true},
		{"no region ignored", true, nil, false},
		{"same region with ignore", true, sdk.RequirementList{regionReq("eu")}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.Provision.IgnoreJobWithNoRegion = tc.ignore
			f, err := New(Options{Config: cfg, Hatchery: newFakeHatchery(), Client: newFakeClient()})
			require.NoError(t, err)
			ok, reason := f.regionOK(tc.reqs)
			assert.Equal(t, tc.want, ok, reason)
		})
	}

	// End to end: only the eu job is spawned.
	cfg := testConfig(t)
	cfg.Provision.IgnoreJobWithNoRegion = true
	hs := newHarness(t, cfg, nil)
	hs.c.models = []sdk.Model{testModel("shared.infra", "debian12")}
	hs.c.addJob(1, modelReq("shared.infra/debian12"), regionReq("us"))
	hs.c.addJob(2, modelReq("shared.infra/debian12"))
	hs.c.addJob(3, modelReq("shared.infra/debian12"), regionReq("eu"))
	hs.run()
	assert.Equal(t, "3", (<-hs.h.spawned).JobID)
	require.Eventually(t, func() bool {
		var n int
		hs.c.snapshot(func(c *fakeClient) { n = c.polls })
		return n >= 5
	}, waitFor, tick)
	hs.h.get(func(h *fakeHatchery) { assert.Len(t, h.spawns, 1) })
	assert.Contains(t, hs.logs.String(), `"reason":"region","detail":"job requires \"us\", hatchery is in \"eu\""`)
}

func TestMaxWorkerZeroIsUnlimited(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "3/unlimited", WorkersStatusValue(3, 0))
	assert.Equal(t, "3/10", WorkersStatusValue(3, 10))

	cfg := testConfig(t)
	cfg.Provision.MaxWorker = 0
	cfg.Provision.MaxConcurrentProvisioning = 20
	hs := newHarness(t, cfg, nil)
	hs.c.models = []sdk.Model{testModel("shared.infra", "debian12")}
	for i := int64(1); i <= 15; i++ {
		hs.c.addJob(i, modelReq("shared.infra/debian12"))
	}
	hs.run()
	for range 15 {
		<-hs.h.spawned
	}
	require.Eventually(t, func() bool {
		_, st := getStatus(t, hs.f.MonAddr())
		return lineByComponent(st, "Workers").Value == "15/unlimited"
	}, waitFor, tick)
}

func TestMonEndpoints(t *testing.T) {
	t.Parallel()
	alert := make(chan bool, 1)
	alert <- false
	hs := newHarness(t, testConfig(t), func(o *Options) {
		o.ExtraStatus = func(ctx context.Context) []sdk.MonitoringStatusLine {
			a := <-alert
			alert <- a
			st := sdk.MonitoringStatusOK
			if a {
				st = sdk.MonitoringStatusAlert
			}
			return []sdk.MonitoringStatusLine{{Component: "vCenter", Status: st, Value: "x"}}
		}
		o.Metrics = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("metric 1\n")) })
	})
	hs.h.status = []sdk.MonitoringStatusLine{{Component: "IPs", Status: sdk.MonitoringStatusOK, Value: "3/10"}}
	hs.run()
	<-hs.f.MonReady()
	addr := hs.f.MonAddr()
	require.True(t, strings.HasPrefix(addr, "127.0.0.1:"))

	require.Eventually(t, func() bool {
		code, _ := getStatus(t, addr)
		return code == http.StatusOK
	}, waitFor, tick)
	_, st := getStatus(t, addr)
	assert.Equal(t, "3/10", lineByComponent(st, "IPs").Value)
	assert.Equal(t, "0/10", lineByComponent(st, "Workers").Value)

	<-alert
	alert <- true
	code, st := getStatus(t, addr)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, sdk.MonitoringStatusAlert, lineByComponent(st, "vCenter").Status)

	var v VersionInfo
	getJSON(t, "http://"+addr+"/mon/version", &v)
	assert.Equal(t, VersionInfo{Name: testHatchery, Type: sdk.VSphere, Version: "1.2.3-test"}, v)
	var workers []workerpool.Worker
	getJSON(t, "http://"+addr+"/mon/workers", &workers)
	assert.Empty(t, workers)
	resp, err := http.Get("http://" + addr + "/mon/metrics")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestCancelStopsRunWithinBound(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, testConfig(t), nil)
	hs.c.models = []sdk.Model{testModel("shared.infra", "debian12")}
	hs.h.block = true // SpawnWorker waits for ctx
	hs.c.addJob(1, modelReq("shared.infra/debian12"))
	stop := hs.run()
	<-hs.h.spawned
	err, took := stop()
	require.NoError(t, err)
	assert.Less(t, took, 2*time.Second)
	hs.c.snapshot(func(c *fakeClient) {
		assert.Equal(t, 1, c.releases, "the booking is released on shutdown")
		assert.Empty(t, c.jobs[1].bookedBy)
	})
}

func TestSIGTERMStopsRun(t *testing.T) {
	hs := newHarness(t, testConfig(t), nil)
	ctx, stopSignals := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stopSignals()
	errc := make(chan error, 1)
	go func() { errc <- hs.f.Run(ctx) }()
	<-hs.f.MonReady()
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
	select {
	case err := <-errc:
		require.NoError(t, err)
	case <-time.After(3 * time.Second):
		t.Fatal("run did not stop on SIGTERM")
	}
}

func TestV2JobSpawn(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.API.Token = ""
	cfg.API.TokenV2 = "v2-secret-token-123456"
	hs := newHarness(t, cfg, nil)
	spec := json.RawMessage(`{"image":"debian12","flavor":"small","username":"u","password":"p"}`)
	for _, id := range []string{"run-a", "run-b"} {
		hs.c.v2jobs[id] = &fakeV2Job{info: sdk.V2QueueJobInfo{
			RunJob: sdk.V2WorkflowRunJob{ID: id, Status: "Waiting", Region: "eu", Job: sdk.V2Job{RunsOn: sdk.V2JobRunsOn{Model: "m", Flavor: "large", Memory: "4096"}}},
			Model:  sdk.V2WorkerModel{Name: "Debian_12", Type: sdk.VSphere, Spec: spec},
		}}
	}
	hs.c.v2jobs["run-b"].takenBy = "other" // taken elsewhere between poll and take
	hs.run()

	got := <-hs.h.spawned
	assert.Equal(t, "run-a", got.JobID)
	assert.Equal(t, "debian12", got.Model.GetVSphereImage())
	assert.Equal(t, "large", got.Model.JobFlavor)
	assert.Equal(t, "4096", got.Model.JobMemory)
	assert.Equal(t, "./worker", got.Model.GetCmd())
	assert.Equal(t, "run-a", got.WorkerConfig.RunJobID)
	assert.Zero(t, got.WorkerConfig.BookedJobID)
	assert.True(t, strings.HasPrefix(got.WorkerName, "debian-12-"), got.WorkerName)
	require.Eventually(t, func() bool {
		var n int
		hs.c.snapshot(func(c *fakeClient) { n = len(c.v2infos["run-a"]) })
		return n == 2
	}, waitFor, tick)
	hs.h.get(func(h *fakeHatchery) { assert.Zero(t, h.perJob["run-b"]) })
}

func TestV2SpawnFailureReleases(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.API.Token = ""
	cfg.API.TokenV2 = "v2-secret-token-123456"
	hs := newHarness(t, cfg, nil)
	hs.h.spawnErr = errors.New("no template")
	hs.c.v2jobs["run-a"] = &fakeV2Job{info: sdk.V2QueueJobInfo{
		RunJob: sdk.V2WorkflowRunJob{ID: "run-a", Status: "Waiting"},
		Model:  sdk.V2WorkerModel{Name: "debian12", Type: sdk.VSphere},
	}}
	hs.run()
	<-hs.h.spawned
	require.Eventually(t, func() bool {
		var n int
		hs.c.snapshot(func(c *fakeClient) { n = c.v2releases })
		return n >= 1
	}, waitFor, tick)
	hs.c.snapshot(func(c *fakeClient) {
		infos := c.v2infos["run-a"]
		require.NotEmpty(t, infos)
		var levels []string
		for _, i := range infos {
			levels = append(levels, i.Level)
		}
		assert.Contains(t, levels, sdk.JobRunInfoLevelError)
	})
}

func TestV2AttemptCapStopsTakingJob(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.API.Token = ""
	cfg.API.TokenV2 = "v2-secret-token-123456"
	cfg.Provision.MaxAttemptsNumberBeforeFailure = 3
	var skew atomic.Int64 // how far the framework's clock is ahead
	hs := newHarness(t, cfg, func(o *Options) {
		o.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	})
	hs.h.spawnErr = errors.New("unknown flavor \"huge\"")
	hs.c.v2jobs["run-a"] = &fakeV2Job{info: sdk.V2QueueJobInfo{
		RunJob: sdk.V2WorkflowRunJob{ID: "run-a", Status: "Waiting"},
		Model:  sdk.V2WorkerModel{Name: "debian12", Type: sdk.VSphere},
	}}
	hs.run()
	for range 3 {
		<-hs.h.spawned
	}
	var polls int
	require.Eventually(t, func() bool {
		var released bool
		hs.c.snapshot(func(c *fakeClient) { released, polls = c.v2releases == 3, c.polls })
		return released
	}, waitFor, tick)

	// The job stays in the queue: later polls see it and never take it again.
	require.Eventually(t, func() bool {
		var n int
		hs.c.snapshot(func(c *fakeClient) { n = c.polls })
		return n >= polls+10
	}, waitFor, tick)
	hs.h.get(func(h *fakeHatchery) { assert.Equal(t, 3, h.perJob["run-a"], "no take after the cap") })
	hs.c.snapshot(func(c *fakeClient) {
		assert.Equal(t, 3, c.books, "taken three times")
		infos := c.v2infos["run-a"]
		require.NotEmpty(t, infos)
		last := infos[len(infos)-1]
		assert.Equal(t, sdk.JobRunInfoLevelError, last.Level)
		assert.Contains(t, last.Message, "gives up after 3 attempts")
		assert.Contains(t, last.Message, `unknown flavor "huge"`)
	})
	logs := hs.logs.String()
	assert.Len(t, logLines(logs, "gave up after 3 attempts", "INFO"), 1, "one Info line while it stays queued")

	// It leaves the queue and comes back (as a job does while its worker
	// boots and again once its VM is reclaimed): its count is kept.
	hs.c.snapshot(func(c *fakeClient) { c.v2jobs["run-a"].done = true; polls = c.polls })
	require.Eventually(t, func() bool {
		var n int
		hs.c.snapshot(func(c *fakeClient) { n = c.polls })
		return n >= polls+3
	}, waitFor, tick)
	hs.c.snapshot(func(c *fakeClient) { c.v2jobs["run-a"].done = false; polls = c.polls })
	require.Eventually(t, func() bool {
		var n int
		hs.c.snapshot(func(c *fakeClient) { n = c.polls })
		return n >= polls+5
	}, waitFor, tick)
	hs.h.get(func(h *fakeHatchery) { assert.Equal(t, 3, h.perJob["run-a"], "back in the queue, still not taken") })

	// Once it has been out of the queue for attemptsRetention, its count
	// is forgotten: back in the queue, it is taken again.
	hs.c.snapshot(func(c *fakeClient) { c.v2jobs["run-a"].done = true; polls = c.polls })
	skew.Store(int64(attemptsRetention + time.Hour))
	require.Eventually(t, func() bool {
		var n int
		hs.c.snapshot(func(c *fakeClient) { n = c.polls })
		return n >= polls+3
	}, waitFor, tick)
	hs.c.snapshot(func(c *fakeClient) { c.v2jobs["run-a"].done = false })
	select {
	case got := <-hs.h.spawned:
		assert.Equal(t, "run-a", got.JobID)
	case <-time.After(waitFor):
		t.Fatal("a job back in the queue is not taken again")
	}
}

func TestModelRegistration(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Provision.MaxConcurrentRegistering = 1
	hs := newHarness(t, cfg, nil)
	m := testModel("shared.infra", "debian12")
	m.NeedRegistration = true
	hs.c.models = []sdk.Model{m}
	hs.h.needReg["shared.infra/debian12"] = true
	hs.run()
	got := <-hs.h.spawned
	assert.True(t, got.RegisterOnly)
	assert.True(t, strings.HasPrefix(got.WorkerName, workerpool.RegisterPrefix+"debian12-"), got.WorkerName)
	assert.Empty(t, got.JobID)
	hs.c.snapshot(func(c *fakeClient) { assert.Equal(t, []string{"shared.infra/debian12"}, c.modelBooks) })
}

func TestNoSecretInLogs(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Provision.MaxAttemptsNumberBeforeFailure = 2
	hs := newHarness(t, cfg, nil)
	hs.c.models = []sdk.Model{testModel("shared.infra", "debian12")}
	hs.h.spawnErr = errors.New("boom")
	hs.c.heartbeatErr = nil
	hs.c.addJob(1, modelReq("shared.infra/debian12"))
	stop := hs.run()
	a := <-hs.h.spawned
	b := <-hs.h.spawned
	require.NoError(t, firstErr(stop()))
	_, keyPEM := testPrivateKey(t)
	keyBody := strings.Split(keyPEM, "\n")[1]
	logs := hs.logs.String()
	require.NotEmpty(t, logs)
	assert.Empty(t, containsAny(logs, cfg.API.Token, a.WorkerConfig.APIToken, b.WorkerConfig.APIToken, keyBody, "eyJ"))
}

func firstErr(err error, _ time.Duration) error { return err }

func getStatus(t *testing.T, addr string) (int, sdk.MonitoringStatus) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/mon/status")
	require.NoError(t, err)
	defer resp.Body.Close()
	var st sdk.MonitoringStatus
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	return resp.StatusCode, st
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
}

func lineByComponent(st sdk.MonitoringStatus, c string) sdk.MonitoringStatusLine {
	for _, l := range st.Lines {
		if l.Component == c {
			return l
		}
	}
	return sdk.MonitoringStatusLine{}
}

// TestGiveUpReasonPostedOnce: the words saying why a V1 job is failed
// after maxAttemptsNumberBeforeFailure reach the job once. The CDS API
// posts a failed result's reason to the job as an info of its own, so the
// spawn info and the result's reason together must hold them once (they
// were in both, the reason prefixed "hatchery NAME: ").
func TestGiveUpReasonPostedOnce(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Provision.MaxAttemptsNumberBeforeFailure = 2
	hs := newHarness(t, cfg, nil)
	hs.c.models = []sdk.Model{testModel("shared.infra", "debian12")}
	hs.h.spawnErr = errors.New("clone failed")
	hs.c.addJob(6, modelReq("shared.infra/debian12"))
	hs.run()

	require.Eventually(t, func() bool {
		var ok bool
		hs.c.snapshot(func(c *fakeClient) { _, ok = c.failReasons[6] })
		return ok
	}, waitFor, tick)
	const why = "could not start a worker after 2 attempts"
	hs.c.snapshot(func(c *fakeClient) {
		var shown []string // what the job shows: its spawn infos, then the result's reason
		for _, si := range c.spawnInfos[6] {
			msg, ok := cdssim.RenderSpawnInfo(si.Message)
			require.True(t, ok, si.Message.ID)
			shown = append(shown, msg)
		}
		if r := c.failReasons[6]; r != "" {
			shown = append(shown, r)
		}
		all := strings.Join(shown, "\n")
		assert.Equal(t, 1, strings.Count(all, why), "posted once:\n%s", all)
		assert.Contains(t, all, "Job execution failed by hatchery "+testHatchery+". Reason: "+why+": fake spawn ")
	})
}
