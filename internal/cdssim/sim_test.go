package cdssim_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/cdssim"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient"
)

var (
	pubOnce sync.Once
	pubPEM  []byte
)

func publicKey(t *testing.T) []byte {
	t.Helper()
	pubOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		pubPEM = pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&k.PublicKey)})
	})
	return pubPEM
}

func newClient(t *testing.T, sim *cdssim.Server, name string, v1, v2 bool) *cdsclient.Client {
	t.Helper()
	cfg := cdsclient.Config{APIURL: sim.URL(), ServiceName: name, HTTPURL: "http://127.0.0.1:1", PublicKey: publicKey(t), RequestTimeout: 5 * time.Second, Version: "snapshot"}
	if v1 {
		cfg.Token = sim.TokenV1()
	}
	if v2 {
		cfg.TokenV2 = sim.TokenV2()
	}
	c, err := cdsclient.New(cfg)
	require.NoError(t, err)
	require.NoError(t, c.SignIn(t.Context()))
	return c
}

func TestSimulatorV1Flow(t *testing.T) {
	ctx := t.Context()
	sim := cdssim.Start(t, cdssim.Options{})
	a := newClient(t, sim, "hatch-a", true, false)
	b := newClient(t, sim, "hatch-b", true, false)
	assert.Equal(t, sim.URL(), a.APIURL())

	require.NoError(t, a.Heartbeat(ctx, sdk.MonitoringStatus{Lines: []sdk.MonitoringStatusLine{{Component: "Version", Value: "x", Status: "OK"}}}))
	hb1, hb2 := sim.Heartbeats()
	assert.Len(t, hb1, 1)
	assert.Empty(t, hb2)

	cdn, err := a.ConfigCDN(ctx)
	require.NoError(t, err)
	assert.Equal(t, sim.CDNLogAddr(), cdn.TCPURL, "a cdn service by default (NoCDN: none)")

	path := sim.AddModelV1(sdk.Model{Name: "debian", NeedRegistration: true, ModelVirtualMachine: sdk.ModelVirtualMachine{Image: "debian12", Cmd: "./worker", User: "root", Password: "{{.secrets.vsphere_password}}"}}, map[string]string{"secrets.vsphere_password": "pw"})
	assert.Equal(t, "shared.infra/debian", path)
	models, err := a.WorkerModelsEnabled(ctx)
	require.NoError(t, err)
	require.Len(t, models, 1)
	assert.Equal(t, path, models[0].Path())
	secrets, err := a.WorkerModelSecretList(ctx, "shared.infra", "debian")
	require.NoError(t, err)
	require.Len(t, secrets, 1)
	assert.Equal(t, "pw", secrets[0].Value)
	require.NoError(t, a.WorkerModelBook(ctx, "shared.infra", "debian"))
	require.NoError(t, a.WorkerModelSpawnError(ctx, "shared.infra", "debian", sdk.SpawnErrorForm{Error: "boom", Logs: []byte("logs")}))
	ms, ok := sim.ModelV1(path)
	require.True(t, ok)
	require.Len(t, ms.SpawnErrors, 1)
	assert.Equal(t, "logs", string(ms.SpawnErrors[0].Logs))
	assert.EqualValues(t, 1, ms.Model.NbSpawnErr)

	id := sim.AddJobV1(cdssim.JobV1{Requirements: sdk.RequirementList{{Type: sdk.ModelRequirement, Value: path}}})
	other := sim.AddJobV1(cdssim.JobV1{ModelType: sdk.Docker})
	jobs, err := a.QueueWorkflowNodeJobRun(ctx, nil)
	require.NoError(t, err)
	require.Len(t, jobs, 1, "docker job filtered out")
	assert.Equal(t, id, jobs[0].ID)
	_ = other

	// Only one hatchery wins a booking race.
	var wins, lost atomic.Int32
	var wg sync.WaitGroup
	for _, c := range []*cdsclient.Client{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.QueueJobBook(ctx, id)
			switch {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, cdsclient.ErrAlreadyBooked):
				lost.Add(1)
			default:
				t.Errorf("book: %v", err)
			}
		}()
	}
	wg.Wait()
	assert.EqualValues(t, 1, wins.Load())
	assert.EqualValues(t, 3, lost.Load())
	jobs, err = a.QueueWorkflowNodeJobRun(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, jobs, "booked jobs are left out")

	st, _ := sim.JobV1(id)
	owner := a
	if st.BookedBy == "hatch-b" {
		owner = b
	}
	require.NoError(t, owner.QueueJobSendSpawnInfo(ctx, id, []sdk.SpawnInfo{{Message: sdk.SpawnInfoMessage{ID: "MsgSpawnInfoHatcheryStarts", Args: []string{"x", "w", "m"}}}}))
	require.NoError(t, owner.QueueJobRelease(ctx, id))
	err = owner.QueueJobRelease(ctx, id)
	var ae *cdsclient.APIError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, 400, ae.Status)
	assert.Equal(t, 135, ae.ID)
	assert.ErrorIs(t, err, cdsclient.ErrAlreadyReleased)

	info, err := a.QueueJobInfo(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, path, info.Job.Action.Requirements.First(sdk.ModelRequirement))
	_, err = a.QueueJobInfo(ctx, 999999)
	assert.ErrorIs(t, err, cdsclient.ErrForbidden)

	require.NoError(t, a.QueueJobFail(ctx, id, "too many attempts"))
	st, _ = sim.JobV1(id)
	assert.Equal(t, sdk.StatusFail, st.Status)
	require.Len(t, st.Results, 1)
	assert.Equal(t, "too many attempts", st.Results[0].Reason)
	require.Len(t, st.SpawnInfos, 1)

	wid := sim.RegisterWorker("w1", strconv.FormatInt(other, 10))
	require.NotEmpty(t, wid)
	ws, err := a.WorkerList(ctx)
	require.NoError(t, err)
	require.Len(t, ws, 1)
	require.NoError(t, a.WorkerDisable(ctx, ws[0].ID))
	w, _ := sim.Worker("w1")
	assert.True(t, w.Disabled)
	assert.True(t, sim.FinishWorker("w1", ""))
	ws, err = a.WorkerList(ctx)
	require.NoError(t, err)
	require.Len(t, ws, 1, "an ended V1 worker stays listed")
	assert.Equal(t, sdk.StatusDisabled, ws[0].Status)
}

// TestSimulatorEndedWorkersLeaveTheLists: as with the API, a V2 worker
// that signed out leaves GET /v2/worker at once (the API deletes it within
// seconds), while a V1 worker that ended stays in GET /worker, Disabled,
// until DisabledWorkerTTL.
func TestSimulatorEndedWorkersLeaveTheLists(t *testing.T) {
	ctx := t.Context()
	clock := testutil.NewClock(time.Now())
	sim := cdssim.Start(t, cdssim.Options{Now: clock.Now})
	c := newClient(t, sim, "hatch-a", true, true)
	v1 := sim.AddJobV1(cdssim.JobV1{})
	_, err := c.QueueJobBook(ctx, v1)
	require.NoError(t, err)
	v2 := sim.AddJobV2(cdssim.JobV2{Model: sdk.V2WorkerModel{Name: "debian"}})
	require.NoError(t, c.V2QueueJobTake(ctx, sim.Region(), v2))
	require.NotEmpty(t, sim.RegisterWorker("w-v1", strconv.FormatInt(v1, 10)))
	require.NotEmpty(t, sim.RegisterWorker("w-v2", v2))

	require.True(t, sim.FinishWorker("w-v1", ""))
	require.True(t, sim.FinishWorker("w-v2", ""))
	assert.False(t, sim.FinishWorker("w-v1", ""), "ended once")

	ws, err := c.WorkerList(ctx)
	require.NoError(t, err)
	require.Len(t, ws, 1)
	assert.Equal(t, "w-v1", ws[0].Name)
	assert.Equal(t, sdk.StatusDisabled, ws[0].Status)
	ws2, err := c.V2WorkerList(ctx)
	require.NoError(t, err)
	assert.Empty(t, ws2, "a V2 worker that signed out is gone")
	info, err := c.V2QueueJobInfo(ctx, sim.Region(), v2)
	require.NoError(t, err)
	assert.Equal(t, sdk.StatusSuccess, info.RunJob.Status)
	assert.Equal(t, "w-v2", info.RunJob.WorkerName, "the job names the worker that ran it")
	assert.Equal(t, "hatch-a", info.RunJob.HatcheryName)

	clock.Advance(cdssim.DefaultDisabledWorkerTTL - time.Second)
	ws, err = c.WorkerList(ctx)
	require.NoError(t, err)
	assert.Len(t, ws, 1, "still listed just before the ttl")
	clock.Advance(time.Second)
	ws, err = c.WorkerList(ctx)
	require.NoError(t, err)
	assert.Empty(t, ws)
	_, ok := sim.Worker("w-v1")
	assert.False(t, ok)
}

func TestSimulatorV2Flow(t *testing.T) {
	ctx := t.Context()
	sim := cdssim.Start(t, cdssim.Options{Regions: []string{"default", "eu"}, CDN: &sdk.CDNConfig{HTTPURL: "http://cdn"}})
	a := newClient(t, sim, "hatch-a", false, true)
	b := newClient(t, sim, "hatch-b", false, true)
	h, region := a.V2Hatchery()
	require.NotNil(t, h)
	assert.Equal(t, "default", region)

	cdn, err := a.ConfigCDN(ctx)
	require.NoError(t, err)
	assert.Equal(t, "http://cdn", cdn.HTTPURL)
	require.NoError(t, a.Heartbeat(ctx, sdk.MonitoringStatus{}))

	ws, err := a.V2WorkerList(ctx)
	require.NoError(t, err)
	assert.Nil(t, ws, "null list")

	spec := []byte(`{"image":"debian12","flavor":"small","username":"u","password":"p"}`)
	id := sim.AddJobV2(cdssim.JobV2{Model: sdk.V2WorkerModel{Name: "debian", OSArch: "linux/amd64", Spec: spec}, RunsOn: sdk.V2JobRunsOn{Flavor: "large"}})
	sim.AddJobV2(cdssim.JobV2{Region: "eu"})
	sim.AddJobV2(cdssim.JobV2{ModelType: sdk.Docker})
	jobs, err := a.V2QueueJobs(ctx, "default")
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	assert.Equal(t, id, jobs[0].ID)
	_, err = a.V2QueueJobs(ctx, "nope")
	assert.ErrorIs(t, err, cdsclient.ErrNotFound)

	info, err := a.V2QueueJobInfo(ctx, "default", id)
	require.NoError(t, err)
	assert.Equal(t, "large", info.RunJob.Job.RunsOn.Flavor)
	vs, err := info.Model.VSphereSpec()
	require.NoError(t, err)
	assert.Equal(t, "small", vs.Flavor)
	_, err = a.V2QueueJobInfo(ctx, "default", "00000000-0000-0000-0000-000000000000")
	assert.ErrorIs(t, err, cdsclient.ErrNotFound)

	errA := a.V2QueueJobTake(ctx, "default", id)
	errB := b.V2QueueJobTake(ctx, "default", id)
	require.NoError(t, errA)
	assert.ErrorIs(t, errB, cdsclient.ErrAlreadyBooked)
	require.NoError(t, a.V2QueueJobSendInfo(ctx, "default", id, sdk.V2SendJobRunInfo{Message: "starting"}))
	st, _ := sim.JobV2(id)
	assert.Equal(t, "hatch-a", st.TakenBy)
	require.Len(t, st.Infos, 1)
	assert.Equal(t, sdk.JobRunInfoLevelInfo, st.Infos[0].Level)
	require.NoError(t, a.V2QueueJobRelease(ctx, "default", id))
	st, _ = sim.JobV2(id)
	assert.Equal(t, sdk.StatusWaiting, st.Status)

	require.NoError(t, a.V2QueueJobTake(ctx, "default", id))
	require.NotEmpty(t, sim.RegisterWorker("w2", id))
	ws, err = a.V2WorkerList(ctx)
	require.NoError(t, err)
	require.Len(t, ws, 1)
	assert.Equal(t, id, ws[0].JobRunID)

	sim.AddModelV2("PROJ", "github", "org/repo", "main", sdk.V2WorkerModel{Name: "debian", Type: sdk.VSphere, Spec: spec})
	m, err := a.V2WorkerModelGet(ctx, "PROJ", "github", "org/repo", "debian", "main")
	require.NoError(t, err)
	assert.Equal(t, "debian", m.Name)

	// A V2-only client has no V1 session.
	_, err = a.WorkerList(ctx)
	assert.ErrorIs(t, err, cdsclient.ErrNoSession)
}

func TestSimulatorReSignInAndFailures(t *testing.T) {
	ctx := t.Context()
	sim := cdssim.Start(t, cdssim.Options{})
	c := newClient(t, sim, "hatch", true, true)
	signins := sim.CountCalls(http.MethodPost, "/auth/consumer/builtin/signin")

	sim.ExpireSessions()
	_, err := c.WorkerList(ctx)
	require.NoError(t, err, "re-signs in on 401")
	assert.Equal(t, signins+1, sim.CountCalls(http.MethodPost, "/auth/consumer/builtin/signin"))
	_, err = c.V2WorkerList(ctx)
	require.NoError(t, err)

	sim.FailNext(2, http.StatusServiceUnavailable)
	_, err = c.WorkerList(ctx)
	assert.ErrorIs(t, err, cdsclient.ErrServer)
	_, err = c.WorkerList(ctx)
	assert.ErrorIs(t, err, cdsclient.ErrServer)
	_, err = c.WorkerList(ctx)
	require.NoError(t, err)

	sim.FailFor(time.Hour, http.StatusInternalServerError)
	require.Error(t, c.Heartbeat(ctx, sdk.MonitoringStatus{}))
	sim.ClearFailures()
	require.NoError(t, c.Heartbeat(ctx, sdk.MonitoringStatus{}))

	sim.SetLatency(time.Hour)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = c.WorkerList(short)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	sim.SetLatency(0)
}

func TestSimulatorWebsockets(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	sim := cdssim.Start(t, cdssim.Options{})
	c := newClient(t, sim, "hatch", true, true)

	ids := make(chan int64, 4)
	runIDs := make(chan string, 4)
	errs := make(chan error, 2)
	go func() { errs <- c.QueueEvents(ctx, ids) }()
	go func() { errs <- c.V2QueueEvents(ctx, runIDs) }()
	require.Eventually(t, func() bool { v1, v2 := sim.WebsocketClients(); return v1 == 1 && v2 == 1 }, 5*time.Second, 5*time.Millisecond)

	id := sim.AddJobV1(cdssim.JobV1{})
	runID := sim.AddJobV2(cdssim.JobV2{})
	select {
	case got := <-ids:
		assert.Equal(t, id, got)
	case <-time.After(5 * time.Second):
		t.Fatal("no v1 event")
	}
	select {
	case got := <-runIDs:
		assert.Equal(t, runID, got)
	case <-time.After(5 * time.Second):
		t.Fatal("no v2 event")
	}
	cancel()
	for range 2 {
		assert.ErrorIs(t, <-errs, context.Canceled)
	}

	// A dropped connection returns an error so the caller reconnects.
	ctx2 := t.Context()
	go func() { errs <- c.QueueEvents(ctx2, ids) }()
	require.Eventually(t, func() bool { v1, _ := sim.WebsocketClients(); return v1 == 1 }, 5*time.Second, 5*time.Millisecond)
	sim.Close()
	err := <-errs
	require.Error(t, err)
	assert.NotErrorIs(t, err, context.Canceled)
}

// TestSimulatorBookingsOfADeadHatcheryLapse: a hatchery that books a V1 job
// or takes a V2 job and then dies (no release, no worker) holds it only for
// BookingTTL / SchedulingTimeout; the job then shows in the queue again and
// another hatchery gets it. Before that, the job is out of the queue and
// another hatchery's book / take is refused.
// TestSimulatorStoresServiceURL: the URL a hatchery sends at sign-in (V1
// service.http_url, V2 http_url) is what the service list shows, updated
// at each sign-in.
func TestSimulatorStoresServiceURL(t *testing.T) {
	sim := cdssim.Start(t, cdssim.Options{})
	c := newClient(t, sim, "hatch-a", true, true)
	v1, v2 := sim.ServiceHTTPURL("hatch-a")
	assert.Equal(t, "http://127.0.0.1:1", v1)
	assert.Equal(t, "http://127.0.0.1:1", v2)
	c.SetHTTPURL("http://hatch-a.example:8086")
	require.NoError(t, c.SignIn(t.Context()))
	v1, v2 = sim.ServiceHTTPURL("hatch-a")
	assert.Equal(t, "http://hatch-a.example:8086", v1)
	assert.Equal(t, "http://hatch-a.example:8086", v2)
	v1, v2 = sim.ServiceHTTPURL("nobody")
	assert.Empty(t, v1+v2)
}

func TestSimulatorBookingsOfADeadHatcheryLapse(t *testing.T) {
	ctx := t.Context()
	const hold = 2 * time.Minute
	clock := testutil.NewClock(time.Now())
	sim := cdssim.Start(t, cdssim.Options{BookingTTL: hold, SchedulingTimeout: hold, Now: clock.Now})
	a := newClient(t, sim, "hatch-a", true, true)
	b := newClient(t, sim, "hatch-b", true, true)

	v1 := sim.AddJobV1(cdssim.JobV1{})
	_, err := a.QueueJobBook(ctx, v1)
	require.NoError(t, err)
	v2 := sim.AddJobV2(cdssim.JobV2{Model: sdk.V2WorkerModel{Name: "debian"}})
	require.NoError(t, a.V2QueueJobTake(ctx, sim.Region(), v2))

	// Held: out of the queue, refused to the other hatchery.
	_, err = b.QueueJobBook(ctx, v1)
	require.ErrorIs(t, err, cdsclient.ErrAlreadyBooked)
	require.ErrorIs(t, b.V2QueueJobTake(ctx, sim.Region(), v2), cdsclient.ErrAlreadyBooked)
	st1, _ := sim.JobV1(v1)
	assert.Equal(t, "hatch-a", st1.BookedBy)
	held, err := a.QueueJobInfo(ctx, v1)
	require.NoError(t, err)
	assert.Equal(t, "hatch-a", held.BookedBy.Name, "the job's bookedby names the hatchery holding it")

	// Held until just before the lifetime ends.
	clock.Advance(hold - time.Second)
	jobs, err := b.QueueWorkflowNodeJobRun(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, jobs, "the V1 booking still holds")
	v2jobs, err := b.V2QueueJobs(ctx, sim.Region())
	require.NoError(t, err)
	assert.Empty(t, v2jobs, "the V2 job is still Scheduling")

	// hatch-a is gone: the jobs come back.
	clock.Advance(time.Second)
	jobs, err = b.QueueWorkflowNodeJobRun(ctx, nil)
	require.NoError(t, err)
	require.Len(t, jobs, 1, "the lapsed V1 booking puts the job back in the queue")
	assert.Equal(t, v1, jobs[0].ID)
	st1, _ = sim.JobV1(v1)
	assert.Empty(t, st1.BookedBy)
	// The API shows the job booked by no one, and the dead hatchery's
	// release answers "already released": the booking is not its own.
	jinfo, err := a.QueueJobInfo(ctx, v1)
	require.NoError(t, err)
	assert.Empty(t, jinfo.BookedBy.Name)
	require.ErrorIs(t, a.QueueJobRelease(ctx, v1), cdsclient.ErrAlreadyReleased)
	_, err = b.QueueJobBook(ctx, v1)
	require.NoError(t, err)
	st1, _ = sim.JobV1(v1)
	assert.Equal(t, "hatch-b", st1.BookedBy)

	info, err := b.V2QueueJobInfo(ctx, sim.Region(), v2)
	require.NoError(t, err)
	assert.Equal(t, sdk.StatusWaiting, info.RunJob.Status, "read on its own, the V2 job Scheduling too long is Waiting again")
	v2jobs, err = b.V2QueueJobs(ctx, sim.Region())
	require.NoError(t, err)
	require.Len(t, v2jobs, 1, "the V2 job Scheduling too long is queued again")
	assert.Equal(t, v2, v2jobs[0].ID)
	st2, _ := sim.JobV2(v2)
	assert.Equal(t, sdk.StatusWaiting, st2.Status)
	assert.Empty(t, st2.TakenBy)
	require.NoError(t, b.V2QueueJobTake(ctx, sim.Region(), v2))
	st2, _ = sim.JobV2(v2)
	assert.Equal(t, "hatch-b", st2.TakenBy)
	assert.Equal(t, sdk.V2StatusScheduling, st2.Status)

}
