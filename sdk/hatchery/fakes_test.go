package hatchery

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
)

const testHatchery = "hatch-test"

var (
	testKeyOnce sync.Once
	testKey     *rsa.PrivateKey
	testKeyPEM  string
)

// testPrivateKey returns one RSA key shared by the tests (generated once,
// never modified).
func testPrivateKey(t *testing.T) (*rsa.PrivateKey, string) {
	t.Helper()
	testKeyOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		testKey = k
		testKeyPEM = string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))
	})
	return testKey, testKeyPEM
}

func serverError() error {
	return &cdsclient.APIError{Method: "GET", Path: "/x", Status: 503, Message: "unavailable"}
}

// fakeJob is a V1 job in the fake API.
type fakeJob struct {
	job      sdk.WorkflowNodeJobRun
	bookedBy string
	done     bool
	failed   string
}

// fakeV2Job is a V2 job in the fake API.
type fakeV2Job struct {
	info    sdk.V2QueueJobInfo
	takenBy string
	done    bool
}

// fakeClient is an in-memory cdsclient.Interface.
type fakeClient struct {
	mu sync.Mutex

	signInFailures int // sign-ins still to fail
	signIns        int
	outage         bool // queue, worker and model calls answer 5xx
	v2outage       bool // the V2 queue poll answers 5xx
	heartbeatErr   error
	heartbeats     int
	cdn            *sdk.CDNConfig
	cdnCalls       int
	cdnFailures    int // ConfigCDN calls still to answer 503
	polls          int

	jobs       map[int64]*fakeJob
	v2jobs     map[string]*fakeV2Job
	apiWorkers []sdk.Worker
	// liveWorkers returns the workers registered by the fake hatchery.
	liveWorkers func() []sdk.Worker
	models      []sdk.Model

	books, releases int
	// failReasons holds the reason of each job failed (present, maybe
	// empty, once the job is failed).
	failReasons map[int64]string
	disabled    []string
	modelBooks  []string
	modelErrors []string // "group/name: error" per spawn error report
	v2infos     map[string][]sdk.V2SendJobRunInfo
	v2releases  int
	spawnInfos  map[int64][]sdk.SpawnInfo
}

var _ cdsclient.Interface = (*fakeClient)(nil)

func newFakeClient() *fakeClient {
	return &fakeClient{
		jobs:        map[int64]*fakeJob{},
		v2jobs:      map[string]*fakeV2Job{},
		failReasons: map[int64]string{},
		v2infos:     map[string][]sdk.V2SendJobRunInfo{},
		spawnInfos:  map[int64][]sdk.SpawnInfo{},
	}
}

func (c *fakeClient) addJob(id int64, reqs ...sdk.Requirement) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.jobs[id] = &fakeJob{job: sdk.WorkflowNodeJobRun{ID: id, Status: "Waiting", Job: sdk.ExecutedJob{Action: sdk.Action{Requirements: reqs}}}}
}

func (c *fakeClient) setOutage(v bool) {
	c.mu.Lock()
	c.outage = v
	c.mu.Unlock()
}

// finishJob marks a job done (its worker ran it).
func (c *fakeClient) finishJob(id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if j := c.jobs[id]; j != nil {
		j.done = true
	}
}

func (c *fakeClient) snapshot(fn func(c *fakeClient)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fn(c)
}

func (c *fakeClient) SignIn(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.signIns++
	if c.signInFailures > 0 {
		c.signInFailures--
		return serverError()
	}
	return nil
}

func (c *fakeClient) Heartbeat(ctx context.Context, status sdk.MonitoringStatus) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.heartbeats++
	return c.heartbeatErr
}

func (c *fakeClient) ConfigCDN(ctx context.Context) (sdk.CDNConfig, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cdnCalls++
	if c.cdnFailures > 0 {
		c.cdnFailures--
		return sdk.CDNConfig{}, &cdsclient.APIError{Status: 503, ID: 1, Message: "service unavailable"}
	}
	if c.cdn == nil {
		return sdk.CDNConfig{}, &cdsclient.APIError{Status: 404, ID: 38}
	}
	return *c.cdn, nil
}

func (c *fakeClient) APIURL() string { return "http://api.test" }

// V2Region is the region the fake V2 sign-in answers.
func (c *fakeClient) V2Region() string { return "default" }

func (c *fakeClient) QueueWorkflowNodeJobRun(ctx context.Context, regions []string) ([]sdk.WorkflowNodeJobRun, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.polls++
	if c.outage {
		return nil, serverError()
	}
	var out []sdk.WorkflowNodeJobRun
	for _, j := range c.jobs {
		if j.done || j.failed != "" || j.bookedBy == testHatchery {
			continue
		}
		job := j.job
		out = append(out, job)
	}
	return out, nil
}

func (c *fakeClient) QueueJobInfo(ctx context.Context, id int64) (*sdk.WorkflowNodeJobRun, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j, ok := c.jobs[id]
	if !ok {
		return nil, &cdsclient.APIError{Status: 403, ID: 11}
	}
	job := j.job
	return &job, nil
}

func (c *fakeClient) QueueJobBook(ctx context.Context, id int64) (sdk.BookedJob, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.books++
	if c.outage {
		return sdk.BookedJob{}, serverError()
	}
	j, ok := c.jobs[id]
	if !ok {
		return sdk.BookedJob{}, &cdsclient.APIError{Status: 403, ID: 11}
	}
	if j.bookedBy != "" {
		return sdk.BookedJob{}, &cdsclient.APIError{Status: 403, ID: 89, Message: "Job already booked"}
	}
	j.bookedBy = testHatchery
	return sdk.BookedJob{}, nil
}

func (c *fakeClient) QueueJobRelease(ctx context.Context, id int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.releases++
	if j, ok := c.jobs[id]; ok && j.bookedBy == testHatchery {
		j.bookedBy = ""
		return nil
	}
	return &cdsclient.APIError{Status: 400, ID: 135}
}

func (c *fakeClient) QueueJobSendSpawnInfo(ctx context.Context, id int64, infos []sdk.SpawnInfo) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.spawnInfos[id] = append(c.spawnInfos[id], infos...)
	return nil
}

func (c *fakeClient) QueueJobFail(ctx context.Context, id int64, reason string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failReasons[id] = reason
	if j, ok := c.jobs[id]; ok {
		j.failed = reason
	}
	return nil
}

func (c *fakeClient) QueueEvents(ctx context.Context, jobIDs chan<- int64) error {
	<-ctx.Done()
	return ctx.Err()
}

func (c *fakeClient) V2QueueJobs(ctx context.Context, region string) ([]sdk.V2WorkflowRunJob, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.polls++
	if c.outage || c.v2outage {
		return nil, serverError()
	}
	var out []sdk.V2WorkflowRunJob
	for _, j := range c.v2jobs {
		if !j.done && j.takenBy == "" {
			out = append(out, j.info.RunJob)
		}
	}
	return out, nil
}

func (c *fakeClient) V2QueueJobInfo(ctx context.Context, region, id string) (*sdk.V2QueueJobInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j, ok := c.v2jobs[id]
	if !ok {
		return nil, &cdsclient.APIError{Status: 404}
	}
	info := j.info
	return &info, nil
}

func (c *fakeClient) V2QueueJobTake(ctx context.Context, region, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.books++
	j, ok := c.v2jobs[id]
	if !ok {
		return &cdsclient.APIError{Status: 404}
	}
	if j.takenBy != "" {
		return &cdsclient.APIError{Status: 409}
	}
	j.takenBy = testHatchery
	return nil
}

func (c *fakeClient) V2QueueJobRelease(ctx context.Context, region, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.v2releases++
	if j, ok := c.v2jobs[id]; ok {
		j.takenBy = ""
	}
	return nil
}

func (c *fakeClient) V2QueueJobSendInfo(ctx context.Context, region, id string, info sdk.V2SendJobRunInfo) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.v2infos[id] = append(c.v2infos[id], info)
	return nil
}

func (c *fakeClient) V2QueueEvents(ctx context.Context, ids chan<- string) error {
	<-ctx.Done()
	return ctx.Err()
}

func (c *fakeClient) WorkerList(ctx context.Context) ([]sdk.Worker, error) {
	c.mu.Lock()
	out := append([]sdk.Worker(nil), c.apiWorkers...)
	live, outage := c.liveWorkers, c.outage
	c.mu.Unlock()
	if outage {
		return nil, serverError()
	}
	if live != nil {
		out = append(out, live()...)
	}
	return out, nil
}

func (c *fakeClient) V2WorkerList(ctx context.Context) ([]sdk.V2Worker, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.outage {
		return nil, serverError()
	}
	return nil, nil
}

func (c *fakeClient) WorkerDisable(ctx context.Context, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.disabled = append(c.disabled, id)
	for i := range c.apiWorkers {
		if c.apiWorkers[i].ID == id {
			c.apiWorkers[i].Status = sdk.StatusDisabled
		}
	}
	return nil
}

func (c *fakeClient) WorkerModelsEnabled(ctx context.Context) ([]sdk.Model, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.outage {
		return nil, serverError()
	}
	return append([]sdk.Model(nil), c.models...), nil
}

func (c *fakeClient) WorkerModelSecretList(ctx context.Context, group, name string) ([]sdk.WorkerModelSecret, error) {
	return nil, nil
}

func (c *fakeClient) WorkerModelBook(ctx context.Context, group, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.modelBooks = append(c.modelBooks, group+"/"+name)
	for i := range c.models {
		if c.models[i].Path() == group+"/"+name {
			c.models[i].NeedRegistration = false // the registration worker will do it
		}
	}
	return nil
}

// WorkerModelSpawnError records the report and, as the API does, counts
// it on the model (nb_spawn_err), which still needs registration.
func (c *fakeClient) WorkerModelSpawnError(ctx context.Context, group, name string, form sdk.SpawnErrorForm) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.modelErrors = append(c.modelErrors, group+"/"+name+": "+form.Error)
	for i := range c.models {
		if c.models[i].Path() == group+"/"+name {
			c.models[i].NbSpawnErr++
			c.models[i].NeedRegistration = true
		}
	}
	return nil
}

func (c *fakeClient) V2WorkerModelGet(ctx context.Context, projectKey, vcs, repo, name, branch string) (*sdk.V2WorkerModel, error) {
	return nil, &cdsclient.APIError{Status: 404}
}

// fakeHatchery records spawns and the maxima of concurrent spawns and of
// live workers (started + spawning).
type fakeHatchery struct {
	mu          sync.Mutex
	started     map[string]spawn.Arguments
	inFlight    int
	maxInFlight int
	maxLive     int
	spawns      []spawn.Arguments
	perJob      map[string]int
	needReg     map[string]bool

	spawnErr   error
	spawnDelay time.Duration
	// block makes SpawnWorker wait for ctx to end.
	block bool
	// gate, when set, makes SpawnWorker wait until it is closed (or ctx
	// ends): a stuck spawn the test unblocks.
	gate chan struct{}
	// spawned receives every spawn.Arguments given to SpawnWorker.
	spawned chan spawn.Arguments
	status  []sdk.MonitoringStatusLine
	// cannotSpawn is what CanSpawn answers (nil: can spawn).
	cannotSpawn *refusal.Refusal
	// full makes CanAllocateResources answer false (no room now).
	full bool
}

var _ InterfaceWithModels = (*fakeHatchery)(nil)

func newFakeHatchery() *fakeHatchery {
	return &fakeHatchery{
		started: map[string]spawn.Arguments{},
		perJob:  map[string]int{},
		needReg: map[string]bool{},
		spawned: make(chan spawn.Arguments, 1000),
	}
}

func (h *fakeHatchery) Name() string      { return testHatchery }
func (h *fakeHatchery) ModelType() string { return sdk.VSphere }
func (h *fakeHatchery) CanSpawn(ctx context.Context, m sdk.WorkerStarterWorkerModel, jobID string, reqs []sdk.Requirement) *refusal.Refusal {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cannotSpawn
}
func (h *fakeHatchery) CanAllocateResources(ctx context.Context, m sdk.WorkerStarterWorkerModel, jobID string, reqs []sdk.Requirement) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.full, nil
}
func (h *fakeHatchery) NeedRegistration(ctx context.Context, m *sdk.Model) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.needReg[m.Path()]
}

func (h *fakeHatchery) SpawnWorker(ctx context.Context, args spawn.Arguments) error {
	h.mu.Lock()
	h.inFlight++
	h.maxInFlight = max(h.maxInFlight, h.inFlight)
	h.maxLive = max(h.maxLive, h.inFlight+len(h.started))
	h.spawns = append(h.spawns, args)
	h.perJob[args.JobID]++
	if args.RegisterOnly && h.spawnErr == nil {
		// The registration worker builds the template: the model no
		// longer needs registering (a failed spawn leaves it needing it).
		delete(h.needReg, args.Model.GetName())
	}
	h.mu.Unlock()
	h.spawned <- args

	var err error
	if h.block {
		<-ctx.Done()
		err = ctx.Err()
	} else if h.gate != nil {
		select {
		case <-h.gate:
		case <-ctx.Done():
			err = ctx.Err()
		}
	} else if h.spawnDelay > 0 {
		// Simulates the clone's duration, not a synchronisation.
		t := time.NewTimer(h.spawnDelay)
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-t.C:
		}
		t.Stop()
	}
	if err == nil {
		err = h.spawnErr
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.inFlight--
	if err != nil {
		return fmt.Errorf("fake spawn %s: %w", args.WorkerName, err)
	}
	h.started[args.WorkerName] = args
	return nil
}

func (h *fakeHatchery) WorkersStarted(ctx context.Context) ([]string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.started))
	for n := range h.started {
		out = append(out, n)
	}
	return out, nil
}

func (h *fakeHatchery) Status(ctx context.Context) []sdk.MonitoringStatusLine {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]sdk.MonitoringStatusLine(nil), h.status...)
}

// registered lists the started workers as registered V1 workers (Building).
func (h *fakeHatchery) registered() []sdk.Worker {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]sdk.Worker, 0, len(h.started))
	for n, a := range h.started {
		out = append(out, sdk.Worker{ID: "id-" + n, Name: n, Status: sdk.StatusBuilding, HatcheryName: testHatchery, Uptodate: a.RegisterOnly})
	}
	return out
}

// finishAll removes every started worker and returns their job ids.
func (h *fakeHatchery) finishAll() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var jobs []string
	for n, a := range h.started {
		jobs = append(jobs, a.JobID)
		delete(h.started, n)
	}
	return jobs
}

func (h *fakeHatchery) get(fn func(h *fakeHatchery)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fn(h)
}

// syncBuffer is the shared concurrency-safe output sink.
type syncBuffer = testutil.SyncBuffer

// testConfig is a configuration with a V1 token and small limits.
func testConfig(t *testing.T) CommonConfiguration {
	t.Helper()
	_, keyPEM := testPrivateKey(t)
	cfg := DefaultCommonConfiguration()
	cfg.Name = testHatchery
	cfg.RSAPrivateKey = keyPEM
	cfg.API.HTTP.URL = "http://api.test"
	cfg.API.Token = "v1-secret-token-abcdef"
	cfg.API.MaxHeartbeatFailures = 3
	cfg.HTTP = HTTPConfig{Addr: "127.0.0.1", Port: 0}
	cfg.Provision.Region = "eu"
	return cfg
}

func fastIntervals() Intervals {
	return Intervals{
		Heartbeat:    10 * time.Millisecond,
		QueuePolling: 5 * time.Millisecond,
		Register:     10 * time.Millisecond,
		WorkerPool:   10 * time.Millisecond,
		BackoffMin:   time.Millisecond,
		BackoffMax:   5 * time.Millisecond,
		Shutdown:     2 * time.Second,
	}
}

// harness is a framework over a fake client and hatchery.
type harness struct {
	t    *testing.T
	f    *Framework
	c    *fakeClient
	h    *fakeHatchery
	logs *syncBuffer
}

func newHarness(t *testing.T, cfg CommonConfiguration, mod func(o *Options)) *harness {
	t.Helper()
	c, h := newFakeClient(), newFakeHatchery()
	c.liveWorkers = h.registered
	logs := &syncBuffer{}
	o := Options{
		Config:    cfg,
		Hatchery:  h,
		Client:    c,
		Logger:    slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Version:   "1.2.3-test",
		Intervals: fastIntervals(),
	}
	if mod != nil {
		mod(&o)
	}
	f, err := New(o)
	if err != nil {
		t.Fatalf("new framework: %v", err)
	}
	return &harness{t: t, f: f, c: c, h: h, logs: logs}
}

// run starts Run and returns a stop function that cancels it and returns
// its error and how long it took to return; stop is also a cleanup.
func (hs *harness) run() (stop func() (error, time.Duration)) {
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- hs.f.Run(ctx) }()
	var once sync.Once
	var err error
	var took time.Duration
	stop = func() (error, time.Duration) {
		once.Do(func() {
			start := time.Now()
			cancel()
			select {
			case err = <-errc:
			case <-time.After(10 * time.Second):
				err = errors.New("run did not return within 10s")
			}
			took = time.Since(start)
		})
		return err, took
	}
	hs.t.Cleanup(func() { stop() })
	return stop
}

func modelReq(path string) sdk.Requirement {
	return sdk.Requirement{Name: path, Type: sdk.ModelRequirement, Value: path}
}

func regionReq(r string) sdk.Requirement {
	return sdk.Requirement{Name: "region", Type: sdk.RegionRequirement, Value: r}
}

func testModel(group, name string) sdk.Model {
	return sdk.Model{ID: int64(len(name)), Name: name, Type: sdk.VSphere, Group: &sdk.Group{ID: 1, Name: group},
		ModelVirtualMachine: sdk.ModelVirtualMachine{Image: name, Cmd: "./worker"}}
}

func jobKey(id int64) string { return strconv.FormatInt(id, 10) }

func containsAny(s string, subs ...string) string {
	for _, x := range subs {
		if x != "" && strings.Contains(s, x) {
			return x
		}
	}
	return ""
}
