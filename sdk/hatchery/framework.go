package hatchery

import (
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
	"github.com/cds-contrib/hatchery-vsphere/sdk/workerpool"
)

// Intervals are the framework's timings. Zero fields take the defaults of
// DefaultIntervals; tests shorten them.
type Intervals struct {
	// Heartbeat is the period of heartbeats (the first is sent at once).
	Heartbeat time.Duration
	// QueuePolling is the period of the V1 and V2 queue polls.
	QueuePolling time.Duration
	// Register is the period of the model registration pass and the
	// lifetime of the V1 models cache; 0 means registerFrequency.
	Register time.Duration
	// WorkerPool is the period of the worker pool refresh (the snapshot
	// capacity decisions read, the status, /mon/workers, the inconsistent
	// worker check).
	WorkerPool time.Duration
	// WorkerPoolMin is the shortest time between two worker pool
	// refreshes: a spawn ending asks for a refresh at once, and refreshes
	// asked for meanwhile coalesce into one after this delay. It bounds
	// the worker list calls when many spawns end close together.
	WorkerPoolMin time.Duration
	// BackoffMin and BackoffMax bound the retry delay of sign-in, CDN
	// config and websocket reconnections (doubling from min to max).
	BackoffMin time.Duration
	BackoffMax time.Duration
	// Shutdown bounds how long Run waits, after ctx ended, for the mon
	// server and the goroutines to stop.
	Shutdown time.Duration
	// UnknownWorkerGrace is how long a worker the API lists under this
	// hatchery's name may stay unknown to the hatchery (no VM of its
	// listed, no spawn of this process) before the worker pool refresh
	// calls it inconsistent (V1: disabled). Another instance of the same
	// hatchery name starts workers whose VMs this instance lists only at
	// its next inventory update; 0 means two WorkerPool periods.
	UnknownWorkerGrace time.Duration
}

// DefaultIntervals are the CDS timings: heartbeat every 30 s, queue polled
// every 20 s (docs/design.md#cds-api).
func DefaultIntervals() Intervals {
	return Intervals{
		Heartbeat:     30 * time.Second,
		QueuePolling:  20 * time.Second,
		WorkerPool:    30 * time.Second,
		WorkerPoolMin: 2 * time.Second,
		BackoffMin:    time.Second,
		BackoffMax:    30 * time.Second,
		Shutdown:      10 * time.Second,
	}
}

func (i Intervals) withDefaults(cfg CommonConfiguration) Intervals {
	d := DefaultIntervals()
	set := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	set(&i.Heartbeat, d.Heartbeat)
	set(&i.QueuePolling, d.QueuePolling)
	set(&i.Register, cfg.RegisterFrequencyDuration())
	set(&i.WorkerPool, d.WorkerPool)
	set(&i.WorkerPoolMin, min(d.WorkerPoolMin, i.WorkerPool))
	set(&i.BackoffMin, d.BackoffMin)
	set(&i.BackoffMax, d.BackoffMax)
	set(&i.Shutdown, d.Shutdown)
	set(&i.UnknownWorkerGrace, 2*i.WorkerPool)
	if i.BackoffMax < i.BackoffMin {
		i.BackoffMax = i.BackoffMin
	}
	return i
}

// V2Commands are the guest commands given to V2 models, which carry none:
// Go templates rendered like a V1 model's commands, with
// ModelTemplateData (docs/configuration.md, "V2 commands").
type V2Commands struct {
	// PreCmd runs first: by default it downloads the worker.
	PreCmd string
	// Cmd starts the worker.
	Cmd string
	// PostCmd runs once the worker has exited: by default it powers the
	// VM off.
	PostCmd string
}

// DefaultV2PreCmd downloads the worker the API serves for the model's
// os/arch ({{.API}}/download/worker/{{.OSArch}}) into the working
// directory of the user running it (its home directory, else /tmp) as
// WorkerBinary, with curl (retried), else wget; no root needed. The
// working directory it enters stays the one of the commands after it.
const DefaultV2PreCmd = `cd "${HOME:-/tmp}" && ` +
	`{ curl -fsSL --retry 10 --retry-max-time 120{{if .HTTPInsecure}} -k{{end}} -o ./worker "{{.API}}/download/worker/{{.OSArch}}" || ` +
	`wget -q{{if .HTTPInsecure}} --no-check-certificate{{end}} -O ./worker "{{.API}}/download/worker/{{.OSArch}}"; } && ` +
	`chmod +x ./worker`

// DefaultV2Commands download the worker (DefaultV2PreCmd), run it, then
// power the VM off, as CDS's own hatcheries do for vsphere V2 models.
func DefaultV2Commands() V2Commands {
	return V2Commands{PreCmd: DefaultV2PreCmd, Cmd: spawn.WorkerBinary, PostCmd: "sudo shutdown -h now"}
}

// InterfaceWithDefaultModelV2 is a hatchery that can run V1 jobs without a
// model requirement on a V2 model.
type InterfaceWithDefaultModelV2 interface {
	// DefaultModelV2 returns the V2 model for a V1 job, or nil (and no
	// error) when none applies.
	DefaultModelV2(ctx context.Context, job *sdk.WorkflowNodeJobRun) (*sdk.V2WorkerModel, error)
}

// Options are what New needs. Config, Hatchery and Client are required.
type Options struct {
	// Config is the common configuration (validated by the caller).
	Config CommonConfiguration
	// Hatchery is the hatchery served. When it implements
	// InterfaceWithModels, V1 models are registered; when it implements
	// InterfaceWithDefaultModelV2, V1 jobs without a model requirement may
	// run on a V2 model.
	Hatchery Interface
	// Client reaches the CDS API.
	Client cdsclient.Interface
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
	// Version is reported by /mon/version and in the status.
	Version string
	// ExtraStatus adds lines to /mon/status and heartbeats.
	ExtraStatus func(ctx context.Context) []sdk.MonitoringStatusLine
	// Metrics serves /mon/metrics; nil answers 404.
	Metrics http.Handler
	// Observer receives spawn counters; nil is NopObserver.
	Observer Observer
	// Intervals are the timings; zero fields are defaults.
	Intervals Intervals
	// V2Commands gives the guest commands of a V2 model (its VSphereSpec
	// decoded); nil gives DefaultV2Commands to every model.
	V2Commands func(model sdk.WorkerStarterWorkerModel) V2Commands
	// WorkerLog is copied into every WorkerConfig.
	WorkerLog spawn.WorkerLogConfig
	// DisableMonServer keeps Run from serving /mon (the caller may mount
	// Handler itself).
	DisableMonServer bool
	// DisableV2QueuePolling reads the V2 queue from its websocket events
	// only: no periodic V2 queue poll (disableV2QueuePolling).
	DisableV2QueuePolling bool
}

// Framework runs a hatchery against the CDS API: sign-in, heartbeats, queue
// polling and events, capacity checks, spawns, model registration and the
// /mon server. Create it with New and call Run once.
type Framework struct {
	cfg    CommonConfiguration
	h      Interface
	client cdsclient.Interface
	log    *slog.Logger
	now    func() time.Time
	// sleep waits between websocket connections (sleepCtx; a test's
	// clock in tests).
	sleep    func(ctx context.Context, d time.Duration) bool
	version  string
	extra    func(ctx context.Context) []sdk.MonitoringStatusLine
	metrics  http.Handler
	obs      Observer
	iv       Intervals
	v2cmd    func(model sdk.WorkerStarterWorkerModel) V2Commands
	workerLg spawn.WorkerLogConfig
	monOff   bool
	// v2PollOff: no V2 queue poll loop, events only.
	v2PollOff bool
	key       *rsa.PrivateKey
	hostname  string

	running atomic.Bool

	// cdn is set once by resolveCDN, before the loops start; /mon/status
	// may read it meanwhile (workerCDN).
	cdn atomic.Pointer[workerCDN]

	// candidates feeds the starters; inflight holds the keys of the jobs
	// queued or being processed so a job is never handled twice at once.
	candidates chan candidate
	inflightMu sync.Mutex
	inflight   map[string]struct{}
	pollV1Now  chan struct{}
	pollV2Now  chan struct{}
	// poolNow asks the worker pool loop for a refresh.
	poolNow chan struct{}

	// spawns joins the registration goroutines started by the register loop.
	spawns sync.WaitGroup

	// progress of the job loops, for a watchdog (progress.go).
	progress loopProgress

	pool     *workerpool.Pool
	attempts attemptCounter[int64]
	// attemptsV2 counts spawn attempts per V2 run job; past
	// maxAttemptsNumberBeforeFailure the job is no longer taken.
	attemptsV2 attemptCounter[string]
	skips      refusal.Repeats
	// refusals counts the jobs refused since start by code (/mon/status).
	refusals refusalCounts
	// spawned are the jobs this run spawned a worker for that were not
	// seen back in the queue since; those whose worker is still in the
	// pool stay booked (or taken) by this hatchery.
	spawned spawnedJobs
	models  modelsCache
	// refused are the V1 model versions whose commands did not render at
	// registration: not registered again until modified.
	refused refusedModels
	st      state
	// drain is the drain's state (drain.go).
	drain drainState

	monReady chan struct{}
	monAddr  atomic.Value // string
}

// New checks the options and builds the framework. It parses the RSA
// private key (an error names the key path, never the key).
func New(o Options) (*Framework, error) {
	if o.Hatchery == nil || o.Client == nil {
		return nil, errors.New("new hatchery framework: hatchery and client are required")
	}
	key, err := ParseRSAPrivateKey(o.Config.RSAPrivateKey)
	if err != nil {
		return nil, fmt.Errorf("new hatchery framework: commonConfiguration.rsaPrivateKey: %w", err)
	}
	f := &Framework{
		cfg:       o.Config,
		h:         o.Hatchery,
		client:    o.Client,
		log:       o.Logger,
		now:       o.Now,
		version:   o.Version,
		extra:     o.ExtraStatus,
		metrics:   o.Metrics,
		obs:       o.Observer,
		iv:        o.Intervals.withDefaults(o.Config),
		v2cmd:     o.V2Commands,
		workerLg:  o.WorkerLog,
		monOff:    o.DisableMonServer,
		v2PollOff: o.DisableV2QueuePolling,
		key:       key,
		inflight:  map[string]struct{}{},
		monReady:  make(chan struct{}),
		progress:  newLoopProgress(),
		pollV1Now: make(chan struct{}, 1),
		pollV2Now: make(chan struct{}, 1),
		poolNow:   make(chan struct{}, 1),
	}
	if f.v2cmd == nil {
		f.v2cmd = func(sdk.WorkerStarterWorkerModel) V2Commands { return DefaultV2Commands() }
	}
	if f.log == nil {
		f.log = slog.Default()
	}
	if f.now == nil {
		f.now = time.Now
	}
	f.sleep = sleepCtx
	if f.obs == nil {
		f.obs = NopObserver{}
	}
	if f.metrics == nil {
		f.metrics = http.NotFoundHandler()
	}
	if f.cfg.Name == "" {
		f.cfg.Name = o.Hatchery.Name()
	}
	f.hostname, _ = os.Hostname()
	f.pool = workerpool.New(workerpool.Config{
		HatcheryName: f.cfg.Name,
		V1:           f.cfg.API.Token != "",
		V2:           f.cfg.API.TokenV2 != "",
		Limits: workerpool.Limits{
			MaxWorker:                 f.cfg.Provision.MaxWorker,
			MaxConcurrentProvisioning: f.cfg.Provision.MaxConcurrentProvisioning,
			MaxConcurrentRegistering:  f.cfg.Provision.MaxConcurrentRegistering,
		},
		API:          f.client,
		Started:      f.h.WorkersStarted,
		SpawnEnded:   func() { wake(f.poolNow) },
		Logger:       f.log,
		Now:          f.now,
		UnknownGrace: f.iv.UnknownWorkerGrace,
	})
	f.drain.drained = make(chan struct{})
	f.attempts.init()
	f.attemptsV2.init()
	f.spawned.init()
	f.st.signIn.set(sdk.MonitoringStatusWarn, "not signed in yet")
	f.st.heartbeat.set(sdk.MonitoringStatusWarn, "none sent yet")
	f.st.queueV1.set(sdk.MonitoringStatusWarn, "not polled yet")
	f.st.queueV2.set(sdk.MonitoringStatusWarn, "not polled yet")
	return f, nil
}

// PublicKeyPEM returns the PEM of the public key matching
// commonConfiguration.rsaPrivateKey, for the sign-in request.
func (f *Framework) PublicKeyPEM() ([]byte, error) { return PublicKeyPEM(f.key) }

// CDNURL is the CDN endpoint given to workers, resolved by Run ("" when
// running without CDN).
func (f *Framework) CDNURL() string { return f.workerCDN().HTTP }

// CDNTCP is the CDN's TCP log address given to workers (gelf_service_addr)
// and whether they dial it with TLS, resolved by Run ("" when unknown:
// workers then cannot send their logs).
func (f *Framework) CDNTCP() (addr string, tls bool) {
	c := f.workerCDN()
	return c.TCP, c.TCPWithTLS
}

// workerCDN is the CDN addresses given to workers (zero before
// resolveCDN).
func (f *Framework) workerCDN() workerCDN {
	if c := f.cdn.Load(); c != nil {
		return *c
	}
	return workerCDN{}
}

// MonReady is closed once Run's /mon server listens (never when disabled).
func (f *Framework) MonReady() <-chan struct{} { return f.monReady }

// SetMaxWorker makes n the framework's maxWorker (a reload of
// commonConfiguration.provision.maxWorker): the next admission decides
// with it (workerpool.Pool.SetMaxWorker), and the Workers status line
// shows it. Safe to call while Run runs, before or after it.
func (f *Framework) SetMaxWorker(n int) { f.pool.SetMaxWorker(n) }

// MonAddr is the address the /mon server listens on ("" before MonReady).
func (f *Framework) MonAddr() string {
	s, _ := f.monAddr.Load().(string)
	return s
}

// Pool returns the current worker pool (for /mon/workers and the status):
// the last snapshot plus the spawns the snapshot does not show yet. It
// makes no network call.
func (f *Framework) Pool() []workerpool.Worker { return f.pool.Workers() }

// PoolRefreshes is the number of worker pool snapshots taken so far (each
// one lists the API workers once and asks WorkersStarted once).
func (f *Framework) PoolRefreshes() uint64 { return f.pool.Refreshes() }

// refreshPool takes a new snapshot of the worker pool; when jobs were
// refused for capacity and there is room now, it wakes the queue polls
// instead of waiting for their next tick. Only the worker pool loop (and
// Run, before the loops) calls it, so refreshes never overlap.
func (f *Framework) refreshPool(ctx context.Context) error {
	room, err := f.pool.Refresh(ctx)
	if room {
		wake(f.pollV1Now)
		wake(f.pollV2Now)
	}
	return err
}

// reserve is checkCapacities: it admits one more worker named name (a
// registration when register), or says why not, from the worker pool in
// memory (workerpool.Pool.Reserve); it makes no network call.
func (f *Framework) reserve(name string, register bool) (*workerpool.Slot, *refusal.Refusal) {
	s, r := f.pool.Reserve(name, register)
	if r != nil && !register && r.Reason == refusal.ReasonMaxWorkers {
		if ho, ok := f.obs.(HealthObserver); ok {
			ho.MaxWorkersReached()
		}
	}
	return s, r
}

// poolNames returns whether a worker is in the worker pool (the last
// snapshot and the spawns since), as of now.
func (f *Framework) poolNames() func(worker string) bool {
	pool := f.Pool()
	names := make(map[string]bool, len(pool))
	for _, w := range pool {
		names[w.Name] = true
	}
	return func(worker string) bool { return names[worker] }
}

// errHeartbeat marks the fatal heartbeat error.
var errHeartbeat = errors.New("too many consecutive heartbeat failures")

// Run serves /mon, signs in (retrying while the API is down), resolves the
// CDN endpoint, then runs the heartbeat, queue, event, worker pool and
// registration loops and the starters until ctx ends or heartbeats fail
// api.maxHeartbeatFailures times in a row. It joins every goroutine it
// started before returning, waiting at most Intervals.Shutdown after ctx
// ended for goroutines stuck in the hatchery. It returns nil when ctx
// ended, the heartbeat error otherwise.
func (f *Framework) Run(ctx context.Context) error {
	if !f.running.CompareAndSwap(false, true) {
		return errors.New("run hatchery framework: already running")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var wg sync.WaitGroup
	var fatalMu sync.Mutex
	var fatal error
	fail := func(err error) {
		fatalMu.Lock()
		if fatal == nil {
			fatal = err
		}
		fatalMu.Unlock()
		cancel()
	}
	start := func(fn func(context.Context)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(ctx)
		}()
	}

	if !f.monOff {
		if err := f.startMon(ctx, &wg); err != nil {
			return err
		}
	}
	if s, ok := f.client.(httpURLSetter); ok {
		// The API shows it in its service list.
		u := ServiceURL(f.cfg, f.MonAddr())
		s.SetHTTPURL(u)
		f.log.Info("service url sent at sign-in", "url", u)
	}

	if f.signInLoop(ctx) {
		f.progress.signIn()
		f.resolveCDN(ctx)
		// The first snapshot before the first poll, so queued jobs are not
		// refused for an unknown pool; on failure the loop retries.
		firstPoolErr := f.refreshPool(ctx)
		switch {
		case firstPoolErr == nil || ctx.Err() != nil:
		case errors.Is(firstPoolErr, ErrNotReady):
			f.log.Info("worker pool waits for the hatchery to be ready", logkey.Err, firstPoolErr)
		default:
			f.log.Warn("refresh worker pool failed", logkey.Err, firstPoolErr)
		}
		n := f.cfg.Provision.MaxConcurrentProvisioning
		if n <= 0 {
			n = 1
		}
		f.candidates = make(chan candidate, n)
		f.progress.starters.Store(int32(n))
		for range n {
			start(f.starter)
		}
		start(func(ctx context.Context) {
			if err := f.heartbeatLoop(ctx); err != nil {
				fail(err)
			}
		})
		if f.cfg.API.Token != "" {
			start(f.pollV1Loop)
			start(f.eventsV1Loop)
		}
		if f.cfg.API.TokenV2 != "" {
			if !f.v2PollOff {
				start(f.pollV2Loop)
			}
			start(f.eventsV2Loop)
		}
		start(func(ctx context.Context) { f.workerPoolLoop(ctx, firstPoolErr) })
		if _, ok := f.h.(InterfaceWithModels); ok && f.cfg.API.Token != "" && f.cfg.Provision.MaxConcurrentRegistering != -1 {
			start(f.registerLoop)
		}
	}

	<-ctx.Done()
	if jobs := f.spawned.list(f.poolNames()); len(jobs) > 0 {
		// Their workers may still take them: the bookings are left as
		// they are, and the operator sees which jobs they are.
		f.log.Info("hatchery framework stopping, jobs spawned for stay booked", "jobs", strings.Join(jobs, " "), "count", len(jobs))
	} else {
		f.log.Info("hatchery framework stopping")
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		f.spawns.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-time.After(f.iv.Shutdown):
		err = fmt.Errorf("run hatchery framework: goroutines still running %s after shutdown", f.iv.Shutdown)
		f.log.Error("shutdown timed out", logkey.Err, err)
	}
	fatalMu.Lock()
	defer fatalMu.Unlock()
	if fatal != nil {
		return errors.Join(fatal, err)
	}
	return err
}

// signInLoop signs in, retrying with back-off until it succeeds (true) or
// ctx ends (false). The status shows the last failure meanwhile.
func (f *Framework) signInLoop(ctx context.Context) bool {
	b := newBackoff(f.iv.BackoffMin, f.iv.BackoffMax)
	for {
		f.st.signIn.set(sdk.MonitoringStatusWarn, "signing in")
		err := f.client.SignIn(ctx)
		if err == nil {
			f.st.signIn.set(sdk.MonitoringStatusOK, "signed in")
			f.log.Info("signed in to cds api")
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		f.st.signIn.set(sdk.MonitoringStatusAlert, "sign-in failed: "+err.Error())
		d := b.next()
		f.log.Warn("sign-in failed, retrying", logkey.Err, err, "retry_in", d)
		if !sleepCtx(ctx, d) {
			return false
		}
	}
}

// cdnAttempts bounds how many times Run asks the API for the CDN when only
// its HTTP URL is missing; without a TCP log address it asks until the API
// answers (or says it has no CDN), as a worker without one cannot end a V1
// job.
const cdnAttempts = 3

// resolveCDN sets the CDN addresses given to workers: cdn.url and
// cdn.tcp.url (with cdn.tcp.enableTLS) when set, and for each one unset the
// API's answer (http_url; tcp_url with tcp_url_enable_tls). On 404 (no CDN
// service) what is configured stays; other failures are retried with
// back-off, until ctx ends when the TCP address is missing, cdnAttempts
// times otherwise.
// Without a TCP address at the end it logs one line saying what to set:
// a worker without it cannot send its logs, and its V1 job never ends.
func (f *Framework) resolveCDN(ctx context.Context) {
	c := workerCDN{HTTP: f.cfg.CDN.URL, TCP: f.cfg.CDN.TCP.URL, TCPWithTLS: f.cfg.CDN.TCP.EnableTLS}
	if c.HTTP == "" || c.TCP == "" {
		f.askCDN(ctx, &c)
	}
	f.cdn.Store(&c)
	if c.TCP != "" || ctx.Err() != nil {
		return
	}
	const what = "no cdn tcp address: workers cannot send their step logs; set commonConfiguration.cdn.tcp.url to the cdn's tcp address (host:port)"
	if f.cfg.API.Token != "" {
		f.log.Error(what+"; v1 jobs never end (building until the api fails them as worker lost)", "cdn", c.HTTP)
		return
	}
	f.log.Warn(what+"; v2 jobs end without their logs", "cdn", c.HTTP)
}

// askCDN asks the API for the CDN and fills the addresses of c not
// configured.
func (f *Framework) askCDN(ctx context.Context, c *workerCDN) {
	b := newBackoff(f.iv.BackoffMin, f.iv.BackoffMax)
	for i := 1; ; i++ {
		cdn, err := f.client.ConfigCDN(ctx)
		switch {
		case err == nil:
			if c.HTTP == "" {
				c.HTTP = cdn.HTTPURL
			}
			if c.TCP == "" {
				c.TCP, c.TCPWithTLS = cdn.TCPURL, cdn.TCPURLEnableTLS
			}
			f.log.Info("cdn resolved", "cdn", c.HTTP, "cdn_tcp", c.TCP, "cdn_tcp_tls", c.TCPWithTLS)
			return
		case errors.Is(err, cdsclient.ErrNotFound):
			f.log.Info("api has no cdn service: workers get only the configured commonConfiguration.cdn addresses", "cdn", c.HTTP, "cdn_tcp", c.TCP)
			return
		case ctx.Err() != nil:
			return
		}
		if c.TCP != "" && i >= cdnAttempts {
			f.log.Warn("giving up on cdn config: workers get only the configured commonConfiguration.cdn addresses", logkey.Err, err, "cdn", c.HTTP, "cdn_tcp", c.TCP)
			return
		}
		d := b.next()
		f.log.Warn("get cdn config failed, retrying", logkey.Err, err, "attempt", i, "retry_in", d)
		if !sleepCtx(ctx, d) {
			return
		}
	}
}

// startMon listens on commonConfiguration.http and serves Handler until
// ctx ends, then shuts the server down within Intervals.Shutdown.
func (f *Framework) startMon(ctx context.Context, wg *sync.WaitGroup) error {
	addr := net.JoinHostPort(f.cfg.HTTP.Addr, fmt.Sprint(f.cfg.HTTP.Port))
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("listen mon server on %s: %w", addr, err)
	}
	srv := &http.Server{
		Handler:           f.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	f.monAddr.Store(ln.Addr().String())
	close(f.monReady)
	f.log.Info("mon server listening", "addr", ln.Addr().String())
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			f.log.Error("mon server stopped", logkey.Err, err)
		}
	}()
	go func() {
		defer wg.Done()
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.iv.Shutdown)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			f.log.Warn("mon server shutdown", logkey.Err, err)
			_ = srv.Close()
		}
	}()
	return nil
}

// detached returns a context that survives ctx's cancellation, bounded by
// the request timeout: for releasing bookings while shutting down.
func (f *Framework) detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), f.cfg.RequestTimeoutDuration())
}
