// Package daemon wires hatchery-vsphere together: the CDS client, the
// vCenter connection, the VM inventory, the vSphere hatchery, its metrics and
// the common hatchery framework. Run is the one owner of every long-lived
// goroutine of the process; it starts them in order (the /mon server first)
// and joins them all, within a bound, when its context ends.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/ctl"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/internal/sdnotify"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vsphere"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// Defaults of Options.
const (
	// DefaultDialBackoffMin and DefaultDialBackoffMax bound the wait between
	// two attempts to reach vCenter while it does not answer: retries start
	// fast (a vCenter restarting) and settle at one attempt every 30 s (a
	// long outage should not flood the logs).
	DefaultDialBackoffMin = time.Second
	DefaultDialBackoffMax = 30 * time.Second
	// DefaultShutdownTimeout bounds the whole shutdown after ctx ended: the
	// framework (which releases booked jobs), the hatchery's loops, the
	// inventory and metrics loops and the vCenter logout. It comes after
	// the drain (drainTimeout); the unit's TimeoutStopSec covers both.
	DefaultShutdownTimeout = 30 * time.Second
)

// Options are what Run needs. Config is required; the hooks exist for tests
// and the demo, and their zero values are the production behaviour.
type Options struct {
	// Config is a loaded and validated configuration.
	Config *config.Config
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Version is reported by /mon/version, the status and the V2 sign-in.
	Version string

	// VCenterConfig, when set, adjusts the vCenter client's configuration
	// (tests and the demo shorten its polls).
	VCenterConfig func(*vcenter.Config)
	// DialBackoffMin and DialBackoffMax bound the wait between dials
	// (zero: DefaultDialBackoffMin / DefaultDialBackoffMax).
	DialBackoffMin, DialBackoffMax time.Duration
	// Intervals are the framework's timings (zero fields: its defaults).
	Intervals hatchery.Intervals
	// MetricsInterval is the metrics collection period (0:
	// metrics.Interval).
	MetricsInterval time.Duration
	// ShutdownTimeout bounds the shutdown (0: DefaultShutdownTimeout).
	ShutdownTimeout time.Duration
	// Observer, when set, receives the framework's spawn events after the
	// metrics did.
	Observer hatchery.Observer
	// OnReady, when set, is called once the /mon server listens and every
	// loop is started.
	OnReady func(Running)
	// LoadConfig, when set, loads and validates the configuration file
	// again for a reload (docs/reload.md); nil: a reload fails, changing
	// nothing.
	LoadConfig func() (*config.Config, error)
	// SetLogLevel, when set, is called with an applied reload's logLevel
	// ("": the level the daemon was started with).
	SetLogLevel func(logLevel string)
	// Reload, when set, delivers the signals (SIGHUP) that each reload the
	// configuration (Running.Reload).
	Reload <-chan os.Signal
	// Notify, when set, receives the systemd notifications (READY=1,
	// STATUS=, RELOADING=1, STOPPING=1, WATCHDOG=1; systemd.go).
	Notify *sdnotify.Notifier
	// WatchdogInterval is systemd's watchdog period ($WATCHDOG_USEC): the
	// watchdog is fed every half of it while the loops move (systemd.go);
	// 0: no watchdog.
	WatchdogInterval time.Duration
	// WatchdogLimit, when set, is how long any checked loop may stay still
	// (tests); 0: each loop's default (DefaultWatchdogSpawnLimit,
	// DefaultWatchdogLoopSlack).
	WatchdogLimit time.Duration
	// CtlSocket, when set, is the ctl socket's path instead of the
	// configuration's (ctlSocket, else $RUNTIME_DIRECTORY's ctl.sock).
	CtlSocket string
	// InstantParentsInterval is the period of the instant-parents loop
	// (vsphere.Options.InstantParentsInterval; 0: its default, 10 s).
	InstantParentsInterval time.Duration
}

// Running describes a running daemon, for OnReady.
type Running struct {
	// MonAddr is the address the /mon server listens on (host:port).
	MonAddr string
	// Hatchery is the vSphere hatchery.
	Hatchery *vsphere.HatcheryVSphere
	// Framework is the hatchery framework (its Drain, its status).
	Framework *hatchery.Framework
	// Inventory is the shared VM inventory; nil in listing mode.
	Inventory *inventory.Shared
	// VCenter is the vCenter client (connected in the background).
	VCenter *vcenter.Client
	// Reload reloads the configuration (ReloadFunc), as a SIGHUP does.
	Reload ReloadFunc
	// CtlSocket is the path of the ctl socket ("" when there is none).
	CtlSocket string
}

// Run runs the hatchery until ctx ends (nil is returned then) or the
// framework stops on its own (too many heartbeat failures: its error is
// returned). vCenter may be unreachable at start: Run keeps serving /mon
// (status 503, "vCenter" line in alert) and connects when vCenter answers.
// Every goroutine Run starts has returned when Run returns, unless the
// shutdown exceeded Options.ShutdownTimeout, which is then an error.
//
// It runs in four named stages: build (every part wired, nothing
// started), start (every long-lived goroutine, the /mon server first),
// serve (until ctx ends or the framework stops) and drain (the drain of a
// stop, then the shutdown in three stages of its own).
func Run(ctx context.Context, o Options) error {
	if o.Config == nil {
		return errors.New("run daemon: configuration is required")
	}
	d := &daemon{o: withDefaults(o)}
	defer d.close()
	if err := d.build(ctx); err != nil {
		return fmt.Errorf("run daemon: %w", err)
	}
	if err := d.start(); err != nil {
		return fmt.Errorf("run daemon: %w", err)
	}
	runErr, fwReturned := d.serve(ctx)
	return d.drain(ctx, runErr, fwReturned)
}

// withDefaults fills the zero fields of o that have a default.
func withDefaults(o Options) Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.DialBackoffMin <= 0 {
		o.DialBackoffMin = DefaultDialBackoffMin
	}
	if o.DialBackoffMax < o.DialBackoffMin {
		o.DialBackoffMax = max(DefaultDialBackoffMax, o.DialBackoffMin)
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = DefaultShutdownTimeout
	}
	return o
}

// daemon is one Run: what build wires, the three shutdown stages'
// contexts and wait groups, and the framework's outcome.
type daemon struct {
	o   Options
	cfg *config.Config
	log *slog.Logger

	cds    *cdsclient.Client
	mt     *metrics.Metrics
	vc     *vcenter.Client
	inv    inventory.Inventory
	shared *inventory.Shared // nil in listing mode
	topo   *topology
	// synced: vCenter answers (with an inventory: it holds a first
	// listing); checked: the topology was checked; ready: both, closed
	// once, after which the hatchery's loops start.
	synced          <-chan struct{}
	checked, ready  chan struct{}
	h               *vsphere.HatcheryVSphere
	sd              *notifier
	fw              *hatchery.Framework
	rl              *reloader
	ctlSrv          *ctl.Server
	ctlPath         string
	fwErr           chan error
	fwReturnedAtMon bool
	fwCtx, loopsCtx context.Context
	baseCtx         context.Context
	fwCancel        context.CancelFunc
	loopsCancel     context.CancelFunc
	baseCancel      context.CancelFunc
	fwWG, loopsWG   sync.WaitGroup
	baseWG          sync.WaitGroup
}

// close releases what build made and a failed start leaves: the stages'
// contexts and the metrics. Run defers it.
func (d *daemon) close() {
	for _, cancel := range []context.CancelFunc{d.fwCancel, d.loopsCancel, d.baseCancel} {
		if cancel != nil {
			cancel()
		}
	}
	if d.mt != nil {
		d.mt.Close()
	}
}

// build is the first stage: the CDS client, the metrics, the vCenter
// client and the inventory, the hatchery, the framework, the reload and
// the ctl socket, wired and not started (the ctl socket listens, so that
// a path it cannot take stops the start).
func (d *daemon) build(ctx context.Context) error {
	d.cfg, d.log = d.o.Config, d.o.Logger
	cds, err := d.buildCDS()
	if err != nil {
		return err
	}
	d.cds = cds
	if d.mt, err = metrics.New(d.cfg.CommonConfiguration.Name); err != nil {
		return err
	}
	d.buildVCenter()
	if err := d.buildHatchery(); err != nil {
		return err
	}
	// Three stages, stopped in this order at shutdown: the framework (it
	// stops taking jobs and releases those it holds, still able to reach
	// vCenter), then the hatchery's own loops (provisioning, cleanup,
	// metrics), then what they all read (inventory, vCenter dialer).
	// The framework's context outlives ctx: a stop drains it first
	// (drainAtStop), its spawns in flight running to their end.
	d.fwCtx, d.fwCancel = context.WithCancel(context.WithoutCancel(ctx))
	d.loopsCtx, d.loopsCancel = context.WithCancel(context.WithoutCancel(ctx))
	d.baseCtx, d.baseCancel = context.WithCancel(context.WithoutCancel(ctx))
	if err := d.buildFramework(); err != nil {
		return err
	}
	return d.listenCtl()
}

// buildCDS builds the CDS API client from the common configuration and
// the hatchery's RSA key.
func (d *daemon) buildCDS() (*cdsclient.Client, error) {
	cfg := d.cfg
	cc := cfg.CommonConfiguration
	key, err := hatchery.ParseRSAPrivateKey(cc.RSAPrivateKey)
	if err != nil {
		return nil, fmt.Errorf("commonConfiguration.rsaPrivateKey: %w", err)
	}
	pub, err := hatchery.PublicKeyPEM(key)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	return cdsclient.New(cdsclient.Config{
		APIURL:                cc.API.HTTP.URL,
		Insecure:              cc.API.HTTP.Insecure,
		Token:                 cc.API.Token,
		TokenV2:               cc.API.TokenV2,
		RequestTimeout:        cc.RequestTimeoutDuration(),
		ServiceName:           cc.Name,
		HTTPURL:               cc.URL,
		ServiceConfig:         cfg.Redacted(),
		PublicKey:             pub,
		Region:                cc.Provision.Region,
		IgnoreJobWithNoRegion: cc.Provision.IgnoreJobWithNoRegion,
		// upstream's commonConfiguration.osArch (config_upstream.go).
		OSArch:  cfg.OSArch(),
		Version: d.o.Version,
		Logger:  d.log,
	})
}

// buildVCenter builds the vCenter client (VCenterConfig, adjusted by
// Options.VCenterConfig), the inventory of inventoryMode, and the topology
// check, and what the hatchery's start waits for.
func (d *daemon) buildVCenter() {
	cfg, o := d.cfg, d.o
	clientCfg := VCenterConfig(cfg)
	clientCfg.Logger = d.log
	clientCfg.DialBackoffMin, clientCfg.DialBackoffMax = o.DialBackoffMin, o.DialBackoffMax
	clientCfg.OnConnect = func() {
		if d.shared != nil {
			d.shared.Invalidate() // list at once rather than at the next tick
		}
	}
	if o.VCenterConfig != nil {
		o.VCenterConfig(&clientCfg)
	}
	d.vc = vcenter.New(clientCfg)
	d.inv = inventory.Listing{Client: d.vc}
	switch cfg.InventoryMode {
	case config.InventoryListing:
	case config.InventoryShared:
		d.shared = inventory.NewShared(d.vc, cfg.InventoryRefreshIntervalDuration(), 0, d.log)
		d.inv = d.shared
	default: // config.InventoryWatch, validated
		d.shared = inventory.NewWatch(d.vc, cfg.InventoryRefreshIntervalDuration(), 0, d.log)
		d.inv = d.shared
	}
	// vCenter work starts once vCenter answers (with an inventory: once it
	// holds a first listing): before that every pass would only fail and
	// log it. /mon/status says why meanwhile.
	d.synced = d.vc.Ready()
	if d.shared != nil {
		d.synced = d.shared.Synced()
	}
	// And once the topology was checked (topology.run): its problems are
	// logged and on /mon/status before the first job.
	d.topo = &topology{vc: d.vc, cfg: cfg, log: d.log}
	d.checked = make(chan struct{})
	d.ready = make(chan struct{})
}

// buildHatchery builds the vSphere hatchery and wires the metrics' hooks
// to it and to the vCenter client.
func (d *daemon) buildHatchery() error {
	h, err := vsphere.New(vsphere.Options{Config: d.cfg, Client: d.vc, CDS: d.cds, Inventory: d.inv, Logger: d.log, Metrics: d.mt, Ready: d.ready, InstantParentsInterval: d.o.InstantParentsInterval})
	if err != nil {
		return err
	}
	d.h = h
	mt := d.mt
	mt.Headroom = h.FlavorHeadroom
	mt.SOAP = SOAPHook(d.vc)
	mt.Logger = d.log
	mt.Health = func() metrics.Health {
		var st *inventory.Stats
		if d.shared != nil {
			s := d.shared.Stats()
			st = &s
		}
		return health(d.vc.Up(), st, time.Now())
	}
	d.sd = &notifier{n: d.o.Notify, log: d.log}
	d.sd.send(sdnotify.Status("starting: connecting to vCenter and the CDS API"))
	return nil
}

// buildFramework builds the hatchery framework around the hatchery, its
// status lines and its observer (the metrics, then Options.Observer), and
// the reload.
func (d *daemon) buildFramework() error {
	cfg, h := d.cfg, d.h
	hostname, _ := os.Hostname()
	st := &statusSource{service: cfg.CommonConfiguration.Name, hostname: hostname, vc: d.vc, inv: d.shared, topo: d.topo, interval: cfg.InventoryRefreshIntervalDuration(), now: time.Now}
	fw, err := hatchery.New(hatchery.Options{
		Config:      cfg.CommonConfiguration,
		Hatchery:    h,
		Client:      d.cds,
		Logger:      d.log,
		Version:     d.o.Version,
		ExtraStatus: st.lines,
		Metrics:     d.mt.Handler(),
		Observer:    metricsObserver{m: d.mt, ctx: d.fwCtx, next: d.o.Observer},
		Intervals:   unknownWorkerGrace(d.o.Intervals, cfg),
		// The running configuration's, which a reload may replace.
		V2Commands: func(m sdk.WorkerStarterWorkerModel) hatchery.V2Commands { return h.Config().V2CommandsOf(m) },

		DisableV2QueuePolling: cfg.DisableV2QueuePolling,
		// upstream's workerLogsOptions (config_upstream.go), read at start.
		WorkerLog: cfg.WorkerLog(),
	})
	if err != nil {
		return err
	}
	d.fw = fw
	// The reload (SIGHUP, `ctl reload`; docs/reload.md).
	d.rl = &reloader{load: d.o.LoadConfig, h: h, fw: fw, log: d.log, notify: d.sd, setLogLevel: d.o.SetLogLevel}
	return nil
}

// listenCtl opens the ctl socket (docs/operations.md#ctl), before
// anything starts: a path it cannot take stops the start.
func (d *daemon) listenCtl() error {
	d.ctlPath = d.o.CtlSocket
	if d.ctlPath == "" {
		d.ctlPath = d.cfg.CtlSocketPath(os.LookupEnv)
	}
	if d.ctlPath == "" {
		d.log.Info("no ctl socket: set ctlSocket, or run under systemd with RuntimeDirectory=")
		return nil
	}
	h, fw := d.h, d.fw
	srv, err := ctl.Listen(d.ctlPath, ctl.Options{
		Commands: ctlCommands(&ctlTarget{cfg: h.Config, fw: fw, h: h, reload: d.rl.reload, now: time.Now, placements: h.ShownPlacements}),
		Logger:   d.log,
	})
	if err != nil {
		return err
	}
	d.ctlSrv = srv
	return nil
}

// goLoop runs fn(ctx) in a goroutine wg joins.
func goLoop(wg *sync.WaitGroup, ctx context.Context, fn func(context.Context)) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		fn(ctx)
	}()
}

// start is the second stage: the framework first (its /mon server answers
// before anything else starts, so that a supervisor sees the status of a
// daemon still waiting for vCenter or the CDS API), then the vCenter
// dialer, the topology check, the inventory, the ctl socket, the reloads,
// systemd's notifications and watchdog, and the hatchery's loops, which
// wait for vCenter and the topology check (ready). It returns an error
// only when the /mon listener failed: nothing else started then.
func (d *daemon) start() error {
	o, fw, h := d.o, d.fw, d.h
	d.fwErr = make(chan error, 1)
	goLoop(&d.fwWG, d.fwCtx, func(ctx context.Context) { d.fwErr <- fw.Run(ctx) })
	select {
	case <-fw.MonReady():
	case err := <-d.fwErr: // the /mon listener failed: nothing else started
		d.fwWG.Wait()
		if d.ctlSrv != nil {
			d.ctlSrv.Close()
		}
		return err
	}
	afterConnect := func(fn func(context.Context)) func(context.Context) {
		return func(ctx context.Context) {
			select {
			case <-d.ready:
				fn(ctx)
			case <-ctx.Done():
			}
		}
	}
	goLoop(&d.baseWG, d.baseCtx, d.vc.Run)
	goLoop(&d.baseWG, d.baseCtx, func(ctx context.Context) { d.topo.run(ctx, d.checked) })
	goLoop(&d.baseWG, d.baseCtx, func(ctx context.Context) {
		if waitAll(ctx, d.synced, d.checked) {
			close(d.ready)
		}
	})
	if d.ctlSrv != nil {
		// Stopped last: it answers during the drain and the shutdown.
		goLoop(&d.baseWG, d.baseCtx, d.ctlSrv.Serve)
	}
	if d.shared != nil {
		// Not gated: its first (failing) attempt is what lets a first read
		// answer "stale" at once instead of waiting, e.g. for /mon/status.
		goLoop(&d.baseWG, d.baseCtx, d.shared.Run)
	}
	if o.Reload != nil {
		goLoop(&d.fwWG, d.fwCtx, func(ctx context.Context) { serveReloads(ctx, o.Reload, d.rl.reload) })
	}
	// READY=1 once signed in to the CDS API and the first inventory is
	// read (and the topology checked: ready).
	goLoop(&d.baseWG, d.baseCtx, func(ctx context.Context) {
		if waitAll(ctx, fw.SignedIn(), d.ready) {
			d.sd.up("running", false)
		}
	})
	if o.WatchdogInterval > 0 && o.Notify != nil {
		wd := &watchdog{loops: liveLoops(o, d.cfg, fw, h, d.shared), log: d.log, notify: d.sd}
		goLoop(&d.baseWG, d.baseCtx, func(ctx context.Context) { wd.run(ctx, o.WatchdogInterval, time.Now) })
	}
	goLoop(&d.loopsWG, d.loopsCtx, afterConnect(h.Run))
	goLoop(&d.loopsWG, d.loopsCtx, afterConnect(func(ctx context.Context) { h.RunMetrics(ctx, d.mt, o.MetricsInterval) }))
	return nil
}

// waitAll waits for every channel to be closed, in order; false when ctx
// ended first.
func waitAll(ctx context.Context, chans ...<-chan struct{}) bool {
	for _, c := range chans {
		select {
		case <-c:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// serve is the third stage: it tells the daemon is up (the log line,
// Options.OnReady) and waits until ctx ends, then drains the framework
// (drainAtStop), or until the framework stops on its own (fwReturned).
func (d *daemon) serve(ctx context.Context) (runErr error, fwReturned bool) {
	cfg, fw := d.cfg, d.fw
	d.log.Info("hatchery running", "hatchery", cfg.CommonConfiguration.Name, "mon", fw.MonAddr(), "ctl", d.ctlPath, "version", d.o.Version, "inventory", cfg.InventoryMode)
	if d.o.OnReady != nil {
		d.o.OnReady(Running{MonAddr: fw.MonAddr(), Hatchery: d.h, Framework: fw, Inventory: d.shared, VCenter: d.vc, Reload: d.rl.reload, CtlSocket: d.ctlPath})
	}
	select {
	case <-ctx.Done():
		return drainAtStop(fw, cfg.DrainTimeoutDuration(), d.fwErr, d.log)
	case runErr = <-d.fwErr:
		return runErr, true
	}
}

// drain is the last stage, the shutdown: the framework, then the
// hatchery's loops, then the inventory, the vCenter dialer and the ctl
// socket, the whole bounded by Options.ShutdownTimeout; then the vCenter
// logout. It returns the framework's error (runErr; one when it stopped
// on its own) joined with the shutdown's.
func (d *daemon) drain(ctx context.Context, runErr error, fwReturned bool) error {
	name, log := d.cfg.CommonConfiguration.Name, d.log
	if fwReturned { // the framework stopped on its own (heartbeats)
		if runErr == nil {
			runErr = errors.New("hatchery framework stopped")
		}
		log.Error("hatchery framework stopped: shutting down", logkey.Err, runErr)
	}
	log.Info("hatchery stopping", "hatchery", name)
	d.sd.send(sdnotify.Stopping, sdnotify.Status("stopping"))

	deadline := time.NewTimer(d.o.ShutdownTimeout)
	defer deadline.Stop()
	var shutErr error
	stage := func(what string, cancel context.CancelFunc, wg *sync.WaitGroup) {
		cancel()
		if shutErr != nil {
			return // past the deadline: do not wait any more
		}
		done := make(chan struct{})
		go func() { // returns once wg does
			wg.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-deadline.C:
			shutErr = fmt.Errorf("run daemon: %s still running %s after shutdown began", what, d.o.ShutdownTimeout)
			log.Error("shutdown timed out", logkey.Err, shutErr)
		}
	}
	stage("hatchery framework", d.fwCancel, &d.fwWG)
	if !fwReturned && shutErr == nil {
		// The framework's own error at shutdown: goroutines past its bound.
		if err := <-d.fwErr; err != nil {
			shutErr = err
		}
	}
	stage("hatchery loops", d.loopsCancel, &d.loopsWG)
	stage("inventory and vcenter dialer", d.baseCancel, &d.baseWG)
	closeVCenter(ctx, d.vc)
	log.Info("hatchery stopped", "hatchery", name)
	return errors.Join(runErr, shutErr)
}

// unknownWorkerGrace sets, when iv leaves it 0, how long a worker the API
// lists under the hatchery's name may stay unknown before it is called
// inconsistent (a V1 one is then disabled on the API, and its VM, if any,
// deleted as a disabled worker's): longer than the oldest data the
// inventory may answer with (inventory.MaxSnapshotAge), plus one interval.
// A worker registers from a VM that exists, so once the grace has run, any
// listing the inventory gives was read after that VM existed: a VM it does
// not show is not there. A grace of two intervals, as before, let an
// instance whose inventory lagged (a loaded vCenter) disable the other
// instance's running worker (docs/high-availability.md).
func unknownWorkerGrace(iv hatchery.Intervals, cfg *config.Config) hatchery.Intervals {
	if iv.UnknownWorkerGrace <= 0 {
		interval := cfg.InventoryRefreshIntervalDuration()
		iv.UnknownWorkerGrace = inventory.MaxSnapshotAge(interval) + interval
	}
	return iv
}
