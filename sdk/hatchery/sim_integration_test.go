package hatchery

// Integration tests: the framework with the real cdsclient against the
// in-process CDS API simulator (internal/cdssim). Only the hatchery (the
// vSphere side) is a fake, simHatchery below.

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/cdssim"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// simWait bounds every wait on cross-process state in these tests.
const simWait = 10 * time.Second

// simHatchery is a fake vSphere hatchery: a spawn "clones a VM" (records
// it as started) and, when registerInSim is set, the worker signs in to the
// simulator with its token and takes its job, as the real worker process
// would. It counts the spawns in
// flight and the live workers at every spawn.
type simHatchery struct {
	sim           *cdssim.Server
	registerInSim bool
	spawnDelay    time.Duration
	spawnErr      error
	// beforeTake is called from CanSpawn, between the queue listing and
	// the book/take.
	beforeTake func(jobID string)

	mu          sync.Mutex
	vms         map[string]spawn.Arguments // started workers by name
	workers     map[string]*cdssim.Worker  // signed-in workers by name
	workerErrs  []error                    // worker sign-ins or takes refused
	inFlight    int
	maxInFlight int
	maxLive     int
	spawns      []spawn.Arguments
	perJob      map[string]int
	canSpawn    map[string]int
	spawned     chan spawn.Arguments
}

var _ Interface = (*simHatchery)(nil)

func newSimHatchery(sim *cdssim.Server) *simHatchery {
	return &simHatchery{
		sim:      sim,
		vms:      map[string]spawn.Arguments{},
		workers:  map[string]*cdssim.Worker{},
		perJob:   map[string]int{},
		canSpawn: map[string]int{},
		spawned:  make(chan spawn.Arguments, 1000),
	}
}

func (h *simHatchery) Name() string      { return testHatchery }
func (h *simHatchery) ModelType() string { return sdk.VSphere }

func (h *simHatchery) CanSpawn(ctx context.Context, m sdk.WorkerStarterWorkerModel, jobID string, reqs []sdk.Requirement) *refusal.Refusal {
	h.mu.Lock()
	h.canSpawn[jobID]++
	hook := h.beforeTake
	h.mu.Unlock()
	if hook != nil {
		hook(jobID)
	}
	return nil
}

func (h *simHatchery) CanAllocateResources(ctx context.Context, m sdk.WorkerStarterWorkerModel, jobID string, reqs []sdk.Requirement) (bool, error) {
	return true, nil
}

func (h *simHatchery) SpawnWorker(ctx context.Context, args spawn.Arguments) error {
	h.mu.Lock()
	h.inFlight++
	h.maxInFlight = max(h.maxInFlight, h.inFlight)
	h.maxLive = max(h.maxLive, h.inFlight+len(h.vms))
	h.spawns = append(h.spawns, args)
	h.perJob[args.JobID]++
	delay, spawnErr := h.spawnDelay, h.spawnErr
	h.mu.Unlock()

	var err error
	if delay > 0 {
		// Simulates the clone's duration, not a synchronisation.
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-t.C:
		}
		t.Stop()
	}
	if err == nil {
		err = spawnErr
	}
	h.mu.Lock()
	h.inFlight--
	if err == nil {
		h.vms[args.WorkerName] = args
		if h.registerInSim {
			// Under h.mu so finishAll never sees the VM without its worker.
			w, werr := cdssim.StartWorker(ctx, h.sim.URL(), cdssim.WorkerJob{
				Token: args.WorkerConfig.APIToken, V1JobID: args.WorkerConfig.BookedJobID,
				RunJobID: args.WorkerConfig.RunJobID, Region: h.sim.Region(), LogAddr: cdsConfigKey(args.WorkerConfig, "gelf_service_addr"),
			})
			if werr != nil {
				h.workerErrs = append(h.workerErrs, werr)
			} else {
				h.workers[args.WorkerName] = w
			}
		}
	}
	h.mu.Unlock()
	if err != nil {
		return fmt.Errorf("fake spawn %s: %w", args.WorkerName, err)
	}
	h.spawned <- args
	return nil
}

func (h *simHatchery) WorkersStarted(ctx context.Context) ([]string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.vms))
	for n := range h.vms {
		out = append(out, n)
	}
	return out, nil
}

func (h *simHatchery) Status(ctx context.Context) []sdk.MonitoringStatusLine { return nil }

// finishAll ends every live worker as its process would: the API forgets it
// and its job succeeds, then the VM is destroyed. It returns how many.
func (h *simHatchery) finishAll() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(h.vms)
	for name := range h.vms {
		if w, ok := h.workers[name]; ok {
			if err := w.End(context.Background(), sdk.StatusSuccess); err != nil {
				h.workerErrs = append(h.workerErrs, err)
			}
			delete(h.workers, name)
		}
		delete(h.vms, name)
	}
	return n
}

// cdsConfigKey reads one key of the worker's configuration as the worker
// does: from the JSON of its CDS_CONFIG.
func cdsConfigKey(wc spawn.WorkerConfig, key string) string {
	b, err := base64.StdEncoding.DecodeString(wc.EncodeBase64())
	if err != nil {
		return ""
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return ""
	}
	s, _ := m[key].(string)
	return s
}

func (h *simHatchery) get(fn func(h *simHatchery)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fn(h)
}

// simRig is a framework with the real client against a simulator.
type simRig struct {
	t    *testing.T
	sim  *cdssim.Server
	f    *Framework
	h    *simHatchery
	logs *syncBuffer
	// apiURL is what the client dials (the simulator or a proxy).
	apiURL string
}

type simRigOptions struct {
	v1, v2         bool
	apiURL         string // "" is the simulator
	requestTimeout time.Duration
	intervals      Intervals
	cfg            func(cfg *CommonConfiguration)
	mon            bool // serve /mon (on 127.0.0.1, a free port)
}

// simIntervals keep the poll long (1 h): only the websocket, the first poll
// and the reconnection polls deliver jobs unless a test shortens it.
func simIntervals() Intervals {
	return Intervals{
		Heartbeat:     50 * time.Millisecond,
		QueuePolling:  time.Hour,
		Register:      time.Hour,
		WorkerPool:    50 * time.Millisecond,
		WorkerPoolMin: 10 * time.Millisecond,
		BackoffMin:    5 * time.Millisecond,
		BackoffMax:    20 * time.Millisecond,
		Shutdown:      5 * time.Second,
	}
}

func newSimRig(t *testing.T, o simRigOptions) *simRig {
	t.Helper()
	sim := cdssim.Start(t, cdssim.Options{CDN: &sdk.CDNConfig{HTTPURL: "http://cdn.test"}})
	return newSimRigOn(t, sim, o)
}

func newSimRigOn(t *testing.T, sim *cdssim.Server, o simRigOptions) *simRig {
	t.Helper()
	key, keyPEM := testPrivateKey(t)
	apiURL := o.apiURL
	if apiURL == "" {
		apiURL = sim.URL()
	}
	if o.requestTimeout == 0 {
		o.requestTimeout = 2 * time.Second
	}
	if o.intervals == (Intervals{}) {
		o.intervals = simIntervals()
	}
	cfg := DefaultCommonConfiguration()
	cfg.Name = testHatchery
	cfg.RSAPrivateKey = keyPEM
	cfg.HTTP = HTTPConfig{Addr: "127.0.0.1", Port: 0}
	cfg.API.HTTP.URL = apiURL
	cfg.API.MaxHeartbeatFailures = 1000
	cfg.API.RequestTimeout = 1
	if o.v1 {
		cfg.API.Token = sim.TokenV1()
	}
	if o.v2 {
		cfg.API.TokenV2 = sim.TokenV2()
	}
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	pub, err := PublicKeyPEM(key)
	require.NoError(t, err)
	client, err := cdsclient.New(cdsclient.Config{
		APIURL: apiURL, Token: cfg.API.Token, TokenV2: cfg.API.TokenV2,
		RequestTimeout: o.requestTimeout, ServiceName: cfg.Name, PublicKey: pub,
		Region: cfg.Provision.Region, Version: "test", Logger: log,
	})
	require.NoError(t, err)
	h := newSimHatchery(sim)
	f, err := New(Options{
		Config: cfg, Hatchery: h, Client: client, Logger: log, Version: "test",
		Intervals: o.intervals, DisableMonServer: !o.mon,
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		// The last framework lines above Debug explain most failures.
		lines := logLines(logs.String(), `"msg"`, "INFO", "WARN", "ERROR")
		lines = lines[max(0, len(lines)-40):]
		t.Logf("last framework log lines:\n%s", strings.Join(lines, "\n"))
	})
	return &simRig{t: t, sim: sim, f: f, h: h, logs: logs, apiURL: apiURL}
}

// run starts Run; the returned stop cancels it and returns Run's error. A
// cleanup stops it too and fails the test if Run ended on its own.
func (r *simRig) run() (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.f.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-errc:
			case <-time.After(10 * time.Second):
				err = errors.New("run did not return within 10s")
			}
		})
		return err
	}
	r.t.Cleanup(func() { _ = stop() })
	return stop
}

// waitSpawn waits for the next spawn (bounded).
func (r *simRig) waitSpawn() spawn.Arguments {
	r.t.Helper()
	select {
	case a := <-r.h.spawned:
		return a
	case <-time.After(simWait):
		r.t.Fatalf("no spawn within %s", simWait)
		return spawn.Arguments{}
	}
}

// waitWS waits until the simulator counts v1 and v2 websocket clients.
func (r *simRig) waitWS(v1, v2 int) {
	r.t.Helper()
	require.Eventually(r.t, func() bool {
		a, b := r.sim.WebsocketClients()
		return a == v1 && b == v2
	}, simWait, tick, "websocket clients")
}

// addModel adds the V1 model debian12 and returns its path.
func (r *simRig) addModel() string {
	return r.sim.AddModelV1(sdk.Model{Name: "debian12", ModelVirtualMachine: sdk.ModelVirtualMachine{Image: "debian12", Cmd: "./worker"}}, nil)
}

func v2Model() sdk.V2WorkerModel {
	spec, _ := json.Marshal(sdk.V2WorkerModelVSphereSpec{Image: "debian12", Username: "u", Password: "p"})
	return sdk.V2WorkerModel{Name: "debian12-v2", OSArch: "linux/amd64", Type: sdk.VSphere, Spec: spec}
}

// verifyWorkerJWT checks the token's RS512 signature with the hatchery's
// public key and returns its claims.
func verifyWorkerJWT(t *testing.T, tok string) WorkerJWTClaims {
	t.Helper()
	key, _ := testPrivateKey(t)
	parts := strings.Split(tok, ".")
	require.Len(t, parts, 3)
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	require.NoError(t, err)
	sum := sha512.Sum512([]byte(parts[0] + "." + parts[1]))
	require.NoError(t, rsa.VerifyPKCS1v15(&key.PublicKey, crypto.SHA512, sum[:], sig), "worker jwt verifies")
	body, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	var c WorkerJWTClaims
	require.NoError(t, json.Unmarshal(body, &c))
	return c
}

// logLines returns the log lines at or above level that mention s.
func logLines(logs string, s string, levels ...string) []string {
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		if !strings.Contains(l, s) {
			continue
		}
		for _, lv := range levels {
			if strings.Contains(l, `"level":"`+lv+`"`) {
				out = append(out, l)
			}
		}
	}
	return out
}

func spawnInfoIDs(infos []sdk.SpawnInfo) []string {
	ids := make([]string, 0, len(infos))
	for _, i := range infos {
		ids = append(ids, i.Message.ID)
	}
	return ids
}

func TestSimV1JobPolledThenPushed(t *testing.T) {
	t.Parallel()
	r := newSimRig(t, simRigOptions{v1: true})
	model := r.addModel()
	polled := r.sim.AddJobV1(cdssim.JobV1{Requirements: sdk.RequirementList{modelReq(model)}})
	stop := r.run()

	// Queued before start: the first poll finds it.
	a := r.waitSpawn()
	assert.Equal(t, jobKey(polled), a.JobID)
	assert.Equal(t, model, a.Model.GetName())
	assert.Equal(t, int64(polled), a.WorkerConfig.BookedJobID)
	assert.Empty(t, a.WorkerConfig.RunJobID)
	assert.Equal(t, testHatchery, a.WorkerConfig.HatcheryName)
	assert.Equal(t, r.sim.URL(), a.WorkerConfig.APIEndpoint)
	assert.Equal(t, "http://cdn.test", a.WorkerConfig.CDNEndpoint)
	c := verifyWorkerJWT(t, a.WorkerConfig.APIToken)
	assert.Equal(t, testHatchery, c.Issuer)
	assert.Equal(t, a.WorkerName, c.Subject)
	assert.Equal(t, int64(polled), c.Worker.JobID)
	require.Eventually(t, func() bool {
		st, _ := r.sim.JobV1(polled)
		return len(st.SpawnInfos) >= 1
	}, simWait, tick)
	st, _ := r.sim.JobV1(polled)
	assert.Equal(t, testHatchery, st.BookedBy)
	assert.Equal(t, []string{msgSpawnInfoHatcheryStarts}, spawnInfoIDs(st.SpawnInfos))
	assert.Equal(t, []string{testHatchery, a.WorkerName, model}, st.SpawnInfos[0].Message.Args, "hatchery name, worker name and model, as the API's message expects")
	assert.Equal(t, "Hatchery "+testHatchery+" starts spawn worker "+a.WorkerName+" with model "+model, st.SpawnInfos[0].UserMessage, "as the API renders it")

	// Added while running, with the next poll an hour away: only the
	// websocket can deliver it.
	r.waitWS(1, 0)
	start := time.Now()
	pushed := r.sim.AddJobV1(cdssim.JobV1{Requirements: sdk.RequirementList{modelReq(model)}})
	a = r.waitSpawn()
	assert.Equal(t, jobKey(pushed), a.JobID)
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Equal(t, int64(pushed), verifyWorkerJWT(t, a.WorkerConfig.APIToken).Worker.JobID)
	assert.Equal(t, 1, r.sim.CountCalls("GET", "/queue/workflows"), "one poll, at start")
	assert.Equal(t, 1, r.sim.CountCalls("GET", "/queue/workflows/"+jobKey(pushed)+"/infos"), "read after its event")

	// Heartbeats reach the API with the framework's status lines.
	require.Eventually(t, func() bool { v1, _ := r.sim.Heartbeats(); return len(v1) >= 2 }, simWait, tick)
	hb, _ := r.sim.Heartbeats()
	comps := map[string]bool{}
	for _, l := range hb[len(hb)-1].Lines {
		comps[l.Component] = true
	}
	assert.True(t, comps["Heartbeat"] && comps["Queue V1"] && comps["Workers"], "status lines in heartbeats: %v", comps)
	assert.False(t, comps["Queue V2"], "no V2 queue line without a V2 token")

	require.NoError(t, stop())
	r.h.get(func(h *simHatchery) {
		assert.Equal(t, map[string]int{jobKey(polled): 1, jobKey(pushed): 1}, h.perJob)
	})
}

func TestSimV2JobPolledThenPushed(t *testing.T) {
	t.Parallel()
	r := newSimRig(t, simRigOptions{v2: true})
	polled := r.sim.AddJobV2(cdssim.JobV2{Model: v2Model()})
	stop := r.run()

	a := r.waitSpawn()
	assert.Equal(t, polled, a.JobID)
	assert.Equal(t, polled, a.WorkerConfig.RunJobID)
	assert.Zero(t, a.WorkerConfig.BookedJobID)
	assert.Equal(t, "debian12-v2", a.Model.GetName())
	assert.Equal(t, "debian12", a.Model.VSphereSpec.Image)
	c := verifyWorkerJWT(t, a.WorkerConfig.APIToken)
	assert.Equal(t, a.WorkerName, c.Subject)
	assert.Equal(t, polled, c.Worker.RunJobID)
	require.Eventually(t, func() bool {
		st, _ := r.sim.JobV2(polled)
		return len(st.Infos) >= 2
	}, simWait, tick)
	st, _ := r.sim.JobV2(polled)
	assert.Equal(t, testHatchery, st.TakenBy)
	assert.Contains(t, st.Infos[0].Message, "starts worker "+a.WorkerName)
	assert.Contains(t, st.Infos[1].Message, "started worker "+a.WorkerName)

	r.waitWS(0, 1)
	pushed := r.sim.AddJobV2(cdssim.JobV2{Model: v2Model()})
	a = r.waitSpawn()
	assert.Equal(t, pushed, a.JobID)
	assert.Equal(t, pushed, verifyWorkerJWT(t, a.WorkerConfig.APIToken).Worker.RunJobID)
	assert.Equal(t, 1, r.sim.CountCalls("GET", "/v2/queue/default"), "one poll, at start")

	require.Eventually(t, func() bool { _, v2 := r.sim.Heartbeats(); return len(v2) >= 1 }, simWait, tick)
	require.NoError(t, stop())
	r.h.get(func(h *simHatchery) { assert.Equal(t, map[string]int{polled: 1, pushed: 1}, h.perJob) })
}

func TestSimWebsocketDroppedReconnects(t *testing.T) {
	t.Parallel()
	sim := cdssim.Start(t, cdssim.Options{})
	// A network failure or an API restart: the proxy drops every
	// connection open.
	proxy := testutil.StartProxy(t, strings.TrimPrefix(sim.URL(), "http://"))
	r := newSimRigOn(t, sim, simRigOptions{v1: true, v2: true, apiURL: "http://" + proxy.Addr()})
	model := r.addModel()
	r.run()
	r.waitWS(1, 1)
	polls := sim.CountCalls("GET", "/queue/workflows")

	for round := 1; round <= 2; round++ {
		proxy.DropAll()
		// Both sockets are re-established (the simulator sees the old
		// ones leave and new ones come), and the queue is polled again
		// since events may have been lost meanwhile.
		// A websocket call is recorded when it ends: once the old ones
		// are recorded, the clients counted are new connections.
		require.Eventually(t, func() bool {
			return sim.CountCalls("GET", "/ws") >= round && sim.CountCalls("GET", "/v2/hatchery/ws") >= round
		}, simWait, tick, "round %d: old sockets closed", round)
		r.waitWS(1, 1)
		// The framework polls once the new v1 socket is up; wait for that
		// poll to have succeeded (a poll cut by the drop may have reached
		// the simulator too), so that the jobs below can only come
		// through the sockets. The simulator records a call once it has
		// answered: it may count it after the client logged it.
		require.Eventually(t, func() bool {
			logs := r.logs.String()
			i := strings.LastIndex(logs, `"msg":"queue events disconnected, reconnecting","queue":"v1"`)
			return i >= 0 && strings.Contains(logs[i:], `"msg":"queue poll","queue":"v1"`) &&
				sim.CountCalls("GET", "/queue/workflows") > polls
		}, simWait, tick, "round %d: no successful v1 poll after the reconnection", round)
		polls = sim.CountCalls("GET", "/queue/workflows")

		id := sim.AddJobV1(cdssim.JobV1{Requirements: sdk.RequirementList{modelReq(model)}})
		a := r.waitSpawn()
		assert.Equal(t, jobKey(id), a.JobID)
		// The job came through the new websocket (its event made the
		// framework read it), not through a poll.
		assert.Equal(t, 1, sim.CountCalls("GET", "/queue/workflows/"+jobKey(id)+"/infos"))
		id2 := sim.AddJobV2(cdssim.JobV2{Model: v2Model()})
		a = r.waitSpawn()
		assert.Equal(t, id2, a.JobID)
	}
	assert.Equal(t, polls, sim.CountCalls("GET", "/queue/workflows"), "no poll delivered the jobs")
}

func TestSim5xxStormIsSurvived(t *testing.T) {
	t.Parallel()
	iv := simIntervals()
	iv.QueuePolling = 30 * time.Millisecond
	r := newSimRig(t, simRigOptions{v1: true, intervals: iv})
	model := r.addModel()
	stop := r.run()
	r.waitWS(1, 0)

	const storm = 500 * time.Millisecond
	r.sim.FailFor(storm, 503)
	stormEnd := time.Now().Add(storm)
	// Queued during the storm: its event is read while every call fails.
	id := r.sim.AddJobV1(cdssim.JobV1{Requirements: sdk.RequirementList{modelReq(model)}})
	a := r.waitSpawn()
	assert.Equal(t, jobKey(id), a.JobID)
	assert.False(t, time.Now().Before(stormEnd), "spawned after the storm")
	n503 := 0
	for _, c := range r.sim.Calls() {
		if c.Status == 503 {
			n503++
		}
	}
	assert.Greater(t, n503, 5, "the storm was felt")
	// Polls resume after the storm.
	polls := r.sim.CountCalls("GET", "/queue/workflows")
	require.Eventually(t, func() bool { return r.sim.CountCalls("GET", "/queue/workflows") >= polls+3 }, simWait, tick)
	st, _ := r.sim.JobV1(id)
	assert.Equal(t, testHatchery, st.BookedBy)
	require.NoError(t, stop(), "run survived the storm")
}

func TestSimSlowAnswersDoNotWedgeTheLoop(t *testing.T) {
	t.Parallel()
	iv := simIntervals()
	iv.QueuePolling = 20 * time.Millisecond
	r := newSimRig(t, simRigOptions{v1: true, intervals: iv, requestTimeout: 100 * time.Millisecond})
	model := r.addModel()
	stop := r.run()
	r.waitWS(1, 0)

	// Every answer now takes longer than the request timeout.
	r.sim.SetLatency(time.Second)
	polls := r.sim.CountCalls("GET", "/queue/workflows")
	// The loop keeps polling (each poll times out) instead of hanging on
	// one call.
	require.Eventually(t, func() bool { return r.sim.CountCalls("GET", "/queue/workflows") >= polls+3 }, simWait, tick)
	r.sim.SetLatency(0)

	id := r.sim.AddJobV1(cdssim.JobV1{Requirements: sdk.RequirementList{modelReq(model)}})
	a := r.waitSpawn()
	assert.Equal(t, jobKey(id), a.JobID)
	require.NoError(t, stop())
}

func TestSimSessionExpiredMidRun(t *testing.T) {
	t.Parallel()
	r := newSimRig(t, simRigOptions{v1: true, v2: true})
	model := r.addModel()
	r.run()
	r.waitWS(1, 1)
	signIns := r.sim.CountCalls("POST", "/auth/consumer/builtin/signin")

	r.sim.ExpireSessions()
	id := r.sim.AddJobV1(cdssim.JobV1{Requirements: sdk.RequirementList{modelReq(model)}})
	a := r.waitSpawn()
	assert.Equal(t, jobKey(id), a.JobID)
	id2 := r.sim.AddJobV2(cdssim.JobV2{Model: v2Model()})
	a = r.waitSpawn()
	assert.Equal(t, id2, a.JobID)

	assert.Greater(t, r.sim.CountCalls("POST", "/auth/consumer/builtin/signin"), signIns, "signed in again")
	assert.GreaterOrEqual(t, r.sim.CountCalls("POST", "/v2/auth/consumer/hatchery/signin"), 2, "signed in again on v2")
	st, _ := r.sim.JobV1(id)
	assert.Equal(t, testHatchery, st.BookedBy)
	st2, _ := r.sim.JobV2(id2)
	assert.Equal(t, testHatchery, st2.TakenBy)
}

func TestSimJobTakenByAnotherHatcheryIsSkipped(t *testing.T) {
	t.Parallel()
	r := newSimRig(t, simRigOptions{v1: true, v2: true})
	model := r.addModel()
	other, err := cdsclient.New(cdsclient.Config{
		APIURL: r.sim.URL(), Token: r.sim.TokenV1(), TokenV2: r.sim.TokenV2(),
		RequestTimeout: 2 * time.Second, ServiceName: "other-hatchery", Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	require.NoError(t, other.SignIn(context.Background()))

	v1Stolen := r.sim.AddJobV1(cdssim.JobV1{Requirements: sdk.RequirementList{modelReq(model)}})
	v2Stolen := r.sim.AddJobV2(cdssim.JobV2{Model: v2Model()})
	// Between our listing and our book/take, the other hatchery gets there
	// first.
	var hookErrs []error
	var hookMu sync.Mutex
	r.h.beforeTake = func(jobID string) {
		var err error
		switch jobID {
		case jobKey(v1Stolen):
			_, err = other.QueueJobBook(context.Background(), v1Stolen)
		case v2Stolen:
			err = other.V2QueueJobTake(context.Background(), cdssim.DefaultRegion, v2Stolen)
		default:
			return
		}
		hookMu.Lock()
		hookErrs = append(hookErrs, err)
		hookMu.Unlock()
	}
	r.run()

	// Our book and take were refused as already booked.
	refused := func(method, path string) bool {
		for _, c := range r.sim.Calls() {
			if c.Method == method && c.Path == path && c.Status == 403 {
				return true
			}
		}
		return false
	}
	require.Eventually(t, func() bool {
		return refused("POST", "/queue/workflows/"+jobKey(v1Stolen)+"/book") &&
			refused("POST", "/v2/queue/default/job/"+v2Stolen+"/hatchery/take")
	}, simWait, tick)

	// A later job still spawns: the starters went on.
	r.waitWS(1, 1)
	ok := r.sim.AddJobV1(cdssim.JobV1{Requirements: sdk.RequirementList{modelReq(model)}})
	a := r.waitSpawn()
	assert.Equal(t, jobKey(ok), a.JobID)

	hookMu.Lock()
	for _, err := range hookErrs {
		assert.NoError(t, err, "the other hatchery took the job")
	}
	hookMu.Unlock()
	r.h.get(func(h *simHatchery) {
		assert.Zero(t, h.perJob[jobKey(v1Stolen)], "no spawn for a job booked elsewhere")
		assert.Zero(t, h.perJob[v2Stolen], "no spawn for a job taken elsewhere")
	})
	st, _ := r.sim.JobV1(v1Stolen)
	assert.Equal(t, "other-hatchery", st.BookedBy)
	assert.Empty(t, st.SpawnInfos)
	st2, _ := r.sim.JobV2(v2Stolen)
	assert.Equal(t, "other-hatchery", st2.TakenBy)
	assert.Empty(t, st2.Infos)
	logs := r.logs.String()
	for _, job := range []string{jobKey(v1Stolen), v2Stolen} {
		assert.Empty(t, logLines(logs, `"job":"`+job+`"`, "WARN", "ERROR"), "no warning or error for job %s", job)
	}
}

func TestSimAttemptCapFailsV1Job(t *testing.T) {
	t.Parallel()
	iv := simIntervals()
	// The release event of a failed attempt reaches the framework while
	// the job is still being processed and is dropped: the next poll
	// brings the job back.
	iv.QueuePolling = 30 * time.Millisecond
	r := newSimRig(t, simRigOptions{v1: true, intervals: iv, cfg: func(cfg *CommonConfiguration) {
		cfg.Provision.MaxAttemptsNumberBeforeFailure = 3
	}})
	r.h.spawnErr = errors.New("clone failed: no datastore space")
	model := r.addModel()
	id := r.sim.AddJobV1(cdssim.JobV1{Requirements: sdk.RequirementList{modelReq(model)}})
	r.run()

	// Each failure releases the job, which comes back until the third
	// failure fails it.
	require.Eventually(t, func() bool {
		st, _ := r.sim.JobV1(id)
		return len(st.Results) > 0
	}, simWait, tick)
	st, _ := r.sim.JobV1(id)
	require.Len(t, st.Results, 1)
	assert.Equal(t, sdk.StatusFail, st.Results[0].Status)
	assert.Equal(t, sdk.StatusFail, st.Status)
	// The why is in the last spawn info, not repeated in the result's
	// reason (the API posts a reason to the job as an info of its own).
	assert.Empty(t, st.Results[0].Reason)
	var gaveUp []string
	for _, i := range st.SpawnInfos {
		if i.Message.ID == msgSpawnErrorHatcheryRetryAttempt {
			gaveUp = append(gaveUp, i.UserMessage)
		}
	}
	require.Len(t, gaveUp, 1)
	assert.Contains(t, gaveUp[0], "after 3 attempts")
	assert.Contains(t, gaveUp[0], "no datastore space")
	errInfos := 0
	for _, i := range st.SpawnInfos {
		if i.Message.ID == msgSpawnInfoHatcheryErrorSpawn {
			errInfos++
		}
	}
	assert.Equal(t, 3, errInfos)
	for _, i := range st.SpawnInfos {
		assert.NotEmpty(t, i.UserMessage, "spawn info %s has a message the API defines", i.Message.ID)
		assert.NotContains(t, i.UserMessage, "%!", "spawn info %s renders with its arguments", i.Message.ID)
	}
	assert.Empty(t, r.sim.GarbledSpawnInfos())
	assert.Equal(t, 2, r.sim.CountCalls("DELETE", "/queue/workflows/"+jobKey(id)+"/book"), "released twice, then failed")
	r.h.get(func(h *simHatchery) { assert.Equal(t, 3, h.perJob[jobKey(id)]) })
}

func TestSimCapacityHoldsUnder200QueuedJobs(t *testing.T) {
	t.Parallel()
	const (
		n         = 200
		maxWorker = 10
		maxProv   = 5
	)
	iv := simIntervals()
	iv.QueuePolling = 50 * time.Millisecond
	// Worker lists follow refreshes, which follow elapsed time: intervals
	// long enough that a run slowed down several times by a loaded machine
	// (-race, packages in parallel) still lists far fewer times than jobs.
	iv.WorkerPool = 400 * time.Millisecond
	iv.WorkerPoolMin = 200 * time.Millisecond
	r := newSimRig(t, simRigOptions{v1: true, intervals: iv, cfg: func(cfg *CommonConfiguration) {
		cfg.Provision.MaxWorker = maxWorker
		cfg.Provision.MaxConcurrentProvisioning = maxProv
	}})
	r.h.registerInSim = true
	r.h.spawnDelay = 2 * time.Millisecond
	model := r.addModel()
	ids := make([]int64, 0, n)
	for range n {
		ids = append(ids, r.sim.AddJobV1(cdssim.JobV1{Requirements: sdk.RequirementList{modelReq(model)}}))
	}
	started := time.Now()
	stop := r.run()

	// The workers run their job: every few milliseconds each live worker
	// finishes, its job succeeds and its VM goes.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tk := time.NewTicker(5 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				r.h.finishAll()
			}
		}
	}()
	require.Eventually(t, func() bool {
		for _, id := range ids {
			if st, _ := r.sim.JobV1(id); st.Status != sdk.StatusSuccess {
				return false
			}
		}
		return true
	}, 90*time.Second, 10*time.Millisecond) // liveness bound; the test measures capacity, not speed
	cancel()
	<-done
	require.NoError(t, stop())
	elapsed := time.Since(started)

	r.h.get(func(h *simHatchery) {
		assert.LessOrEqual(t, h.maxLive, maxWorker, "never more than maxWorker workers")
		assert.LessOrEqual(t, h.maxInFlight, maxProv, "never more than maxConcurrentProvisioning spawns in flight")
		assert.GreaterOrEqual(t, h.maxInFlight, 2, "spawns do run in parallel")
		assert.Len(t, h.perJob, n)
		for job, c := range h.perJob {
			assert.Equal(t, 1, c, "job %s spawned once", job)
		}
		assert.Empty(t, h.workerErrs, "every worker signed in, took and ended its job")
	})
	// Capacity decisions read the snapshot: the worker list is asked once
	// per refresh, not once per job.
	workerLists := r.sim.CountCalls("GET", "/worker")
	refreshes := int(r.f.PoolRefreshes())
	assert.LessOrEqual(t, workerLists, refreshes+1, "one worker list per refresh (+1 refresh cut by the shutdown)")
	// Refreshes are bounded by time: the ticker, plus refreshes asked for
	// by spawns ending, at most one per WorkerPoolMin; plus Run's first.
	bound := int(elapsed/iv.WorkerPool) + int(elapsed/iv.WorkerPoolMin) + 2
	assert.LessOrEqual(t, refreshes, bound, "refreshes bounded by time, not by jobs")
	t.Logf("%d jobs, %d polls, %d worker lists, %d refreshes", n, r.sim.CountCalls("GET", "/queue/workflows"), workerLists, refreshes)

	// One Info summary per poll; a job refused again for the same reason
	// logs at Debug, so Info "job skipped" lines stay far below the
	// refusals.
	logs := r.logs.String()
	summaries := logLines(logs, `"msg":"queue poll"`, "INFO")
	assert.NotEmpty(t, summaries)
	infoSkips := len(logLines(logs, `"msg":"job skipped"`, "INFO"))
	debugSkips := len(logLines(logs, `"msg":"job skipped"`, "DEBUG"))
	assert.LessOrEqual(t, infoSkips, 2*n, "at most one Info line per job and reason")
	assert.Greater(t, debugSkips, infoSkips, "repeats go to Debug")
	// Far fewer worker lists than capacity decisions: every job spawned
	// and every "job skipped" is one decision that read the capacity.
	// Both follow elapsed time (a refresh per interval, a poll per
	// interval deciding on every queued job), so their ratio does not
	// depend on the machine's speed, where "fewer lists than jobs" did:
	// a run slowed ten times lists ten times more often for the same 200
	// jobs (105 lists against a bound of 100 on a loaded machine).
	decisions := n + infoSkips + debugSkips
	assert.Less(t, 10*workerLists, decisions, "far fewer worker lists (%d) than capacity decisions (%d)", workerLists, decisions)
	t.Logf("skips: %d info, %d debug; %d poll summaries", infoSkips, debugSkips, len(summaries))
}

// A worker sends its step logs to the CDN's TCP address, which the
// hatchery puts in its configuration (gelf_service_addr) from the API's
// /config/cdn tcp_url. Without it the worker never sends a V1 job's end:
// the job stays Building. With it the job ends Success and its log
// reaches the CDN.
func TestSimV1JobEndsOnlyWithTheCDNLogAddress(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		noCDN bool
	}{{"api gives the cdn tcp address", false}, {"api has no cdn", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sim := cdssim.Start(t, cdssim.Options{NoCDN: tc.noCDN})
			r := newSimRigOn(t, sim, simRigOptions{v1: true})
			r.h.registerInSim = true
			id := sim.AddJobV1(cdssim.JobV1{Requirements: sdk.RequirementList{modelReq(r.addModel())}})
			stop := r.run()
			a := r.waitSpawn()
			assert.Equal(t, jobKey(id), a.JobID)
			require.Eventually(t, func() bool { return r.h.finishAll() > 0 }, simWait, tick)
			require.NoError(t, stop())

			st, _ := sim.JobV1(id)
			var errs []error
			r.h.get(func(h *simHatchery) { errs = append(errs, h.workerErrs...) })
			if tc.noCDN {
				assert.Empty(t, cdsConfigKey(a.WorkerConfig, "gelf_service_addr"))
				assert.Equal(t, sdk.StatusBuilding, st.Status, "the worker never sends the job's end")
				require.Len(t, errs, 1)
				assert.ErrorIs(t, errs[0], cdssim.ErrNoLogAddress)
				lines := logLines(r.logs.String(), "no cdn tcp address", "ERROR")
				require.Len(t, lines, 1, "one line says what to set")
				assert.Contains(t, lines[0], "commonConfiguration.cdn.tcp.url")
				return
			}
			assert.Equal(t, sim.CDNLogAddr(), cdsConfigKey(a.WorkerConfig, "gelf_service_addr"))
			assert.Empty(t, errs)
			assert.Equal(t, sdk.StatusSuccess, st.Status)
			assert.Eventually(t, func() bool { return len(sim.JobLogs(jobKey(id))) > 0 }, simWait, tick, "the step log reached the cdn")
			assert.Empty(t, logLines(r.logs.String(), "no cdn tcp address", "ERROR", "WARN"))
		})
	}
}
