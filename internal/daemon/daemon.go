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
func Run(ctx context.Context, o Options) error {
	if o.Config == nil {
		return errors.New("run daemon: configuration is required")
	}
	cfg := o.Config
	name := cfg.CommonConfiguration.Name
	log := o.Logger
	if log == nil {
		log = slog.Default()
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

	key, err := hatchery.ParseRSAPrivateKey(cfg.CommonConfiguration.RSAPrivateKey)
	if err != nil {
		return fmt.Errorf("run daemon: commonConfiguration.rsaPrivateKey: %w", err)
	}
	pub, err := hatchery.PublicKeyPEM(key)
	if err != nil {
		return fmt.Errorf("run daemon: public key: %w", err)
	}
	cc := cfg.CommonConfiguration
	cds, err := cdsclient.New(cdsclient.Config{
		APIURL:                cc.API.HTTP.URL,
		Insecure:              cc.API.HTTP.Insecure,
		Token:                 cc.API.Token,
		TokenV2:               cc.API.TokenV2,
		RequestTimeout:        cc.RequestTimeoutDuration(),
		ServiceName:           name,
		HTTPURL:               cc.URL,
		ServiceConfig:         cfg.Redacted(),
		PublicKey:             pub,
		Region:                cc.Provision.Region,
		IgnoreJobWithNoRegion: cc.Provision.IgnoreJobWithNoRegion,
		// upstream's commonConfiguration.osArch (config_upstream.go).
		OSArch:  cfg.OSArch(),
		Version: o.Version,
		Logger:  log,
	})
	if err != nil {
		return fmt.Errorf("run daemon: %w", err)
	}

	mt, err := metrics.New(name)
	if err != nil {
		return fmt.Errorf("run daemon: %w", err)
	}
	defer mt.Close()

	clientCfg := vsphere.VCenterConfig(cfg)
	clientCfg.Logger = log
	clientCfg.DialBackoffMin, clientCfg.DialBackoffMax = o.DialBackoffMin, o.DialBackoffMax
	var shared *inventory.Shared
	clientCfg.OnConnect = func() {
		if shared != nil {
			shared.Invalidate() // list at once rather than at the next tick
		}
	}
	if o.VCenterConfig != nil {
		o.VCenterConfig(&clientCfg)
	}
	vc := vcenter.New(clientCfg)
	var inv inventory.Inventory = inventory.Listing{Client: vc}
	switch cfg.InventoryMode {
	case config.InventoryListing:
	case config.InventoryShared:
		shared = inventory.NewShared(vc, cfg.InventoryRefreshIntervalDuration(), 0, log)
		inv = shared
	default: // config.InventoryWatch, validated
		shared = inventory.NewWatch(vc, cfg.InventoryRefreshIntervalDuration(), 0, log)
		inv = shared
	}
	// vCenter work starts once vCenter answers (with an inventory: once it
	// holds a first listing): before that every pass would only fail and
	// log it. /mon/status says why meanwhile.
	synced := vc.Ready()
	if shared != nil {
		synced = shared.Synced()
	}
	// And once the topology was checked (topology.run): its problems are
	// logged and on /mon/status before the first job.
	topo := &topology{vc: vc, cfg: cfg, log: log}
	checked := make(chan struct{})
	ready := make(chan struct{})
	h, err := vsphere.New(vsphere.Options{Config: cfg, Client: vc, CDS: cds, Inventory: inv, Logger: log, Metrics: mt, Ready: ready, InstantParentsInterval: o.InstantParentsInterval})
	if err != nil {
		return fmt.Errorf("run daemon: %w", err)
	}
	mt.Headroom = h.FlavorHeadroom
	mt.SOAP = vsphere.SOAPHook(vc)
	mt.Logger = log
	mt.Health = func() metrics.Health {
		var st *inventory.Stats
		if shared != nil {
			s := shared.Stats()
			st = &s
		}
		return health(vc.Up(), st, time.Now())
	}

	sd := &notifier{n: o.Notify, log: log}
	sd.send(sdnotify.Status("starting: connecting to vCenter and the CDS API"))

	hostname, _ := os.Hostname()
	st := &statusSource{service: name, hostname: hostname, vc: vc, inv: shared, topo: topo, interval: cfg.InventoryRefreshIntervalDuration(), now: time.Now}

	// Three stages, stopped in this order at shutdown: the framework (it
	// stops taking jobs and releases those it holds, still able to reach
	// vCenter), then the hatchery's own loops (provisioning, cleanup,
	// metrics), then what they all read (inventory, vCenter dialer).
	// The framework's context outlives ctx: a stop drains it first
	// (drainAtStop), its spawns in flight running to their end.
	fwCtx, fwCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer fwCancel()
	loopsCtx, loopsCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer loopsCancel()
	baseCtx, baseCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer baseCancel()

	fw, err := hatchery.New(hatchery.Options{
		Config:      cc,
		Hatchery:    h,
		Client:      cds,
		Logger:      log,
		Version:     o.Version,
		ExtraStatus: st.lines,
		Metrics:     mt.Handler(),
		Observer:    metricsObserver{m: mt, ctx: fwCtx, next: o.Observer},
		Intervals:   unknownWorkerGrace(o.Intervals, cfg),
		// The running configuration's, which a reload may replace.
		V2Commands: func(m sdk.WorkerStarterWorkerModel) hatchery.V2Commands { return h.Config().V2CommandsOf(m) },

		DisableV2QueuePolling: cfg.DisableV2QueuePolling,
		// upstream's workerLogsOptions (config_upstream.go), read at start.
		WorkerLog: cfg.WorkerLog(),
	})
	if err != nil {
		return fmt.Errorf("run daemon: %w", err)
	}

	// The reload (SIGHUP, `ctl reload`; docs/reload.md).
	rl := &reloader{load: o.LoadConfig, h: h, fw: fw, log: log, notify: sd, setLogLevel: o.SetLogLevel}

	// The ctl socket (docs/operations.md#ctl), before anything starts: a
	// path it cannot take stops the start.
	var ctlSrv *ctl.Server
	ctlPath := o.CtlSocket
	if ctlPath == "" {
		ctlPath = cfg.CtlSocketPath(os.LookupEnv)
	}
	if ctlPath != "" {
		ctlSrv, err = ctl.Listen(ctlPath, ctl.Options{
			Commands: ctlCommands(&ctlTarget{cfg: h.Config, fw: fw, h: h, reload: rl.reload, now: time.Now, placements: h.ShownPlacements}),
			Logger:   log,
		})
		if err != nil {
			return fmt.Errorf("run daemon: %w", err)
		}
	} else {
		log.Info("no ctl socket: set ctlSocket, or run under systemd with RuntimeDirectory=")
	}

	var fwWG, loopsWG, baseWG sync.WaitGroup
	goLoop := func(wg *sync.WaitGroup, ctx context.Context, fn func(context.Context)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(ctx)
		}()
	}

	// The framework first: its /mon server answers before anything else
	// starts, so that a supervisor sees the status of a daemon still
	// waiting for vCenter or the CDS API.
	fwErr := make(chan error, 1)
	goLoop(&fwWG, fwCtx, func(ctx context.Context) { fwErr <- fw.Run(ctx) })
	select {
	case <-fw.MonReady():
	case err := <-fwErr: // the /mon listener failed: nothing else started
		fwWG.Wait()
		if ctlSrv != nil {
			ctlSrv.Close()
		}
		return fmt.Errorf("run daemon: %w", err)
	}

	// The hatchery's loops start once vCenter answers and the topology
	// was checked (ready, above).
	afterConnect := func(fn func(context.Context)) func(context.Context) {
		return func(ctx context.Context) {
			select {
			case <-ready:
				fn(ctx)
			case <-ctx.Done():
			}
		}
	}
	goLoop(&baseWG, baseCtx, vc.Run)
	goLoop(&baseWG, baseCtx, func(ctx context.Context) { topo.run(ctx, checked) })
	goLoop(&baseWG, baseCtx, func(ctx context.Context) {
		for _, c := range []<-chan struct{}{synced, checked} {
			select {
			case <-c:
			case <-ctx.Done():
				return
			}
		}
		close(ready)
	})
	if ctlSrv != nil {
		// Stopped last: it answers during the drain and the shutdown.
		goLoop(&baseWG, baseCtx, ctlSrv.Serve)
	}
	if shared != nil {
		// Not gated: its first (failing) attempt is what lets a first read
		// answer "stale" at once instead of waiting, e.g. for /mon/status.
		goLoop(&baseWG, baseCtx, shared.Run)
	}
	if o.Reload != nil {
		goLoop(&fwWG, fwCtx, func(ctx context.Context) { serveReloads(ctx, o.Reload, rl.reload) })
	}
	// READY=1 once signed in to the CDS API and the first inventory is
	// read (and the topology checked: ready).
	goLoop(&baseWG, baseCtx, func(ctx context.Context) {
		for _, c := range []<-chan struct{}{fw.SignedIn(), ready} {
			select {
			case <-c:
			case <-ctx.Done():
				return
			}
		}
		sd.up("running", false)
	})
	if o.WatchdogInterval > 0 && o.Notify != nil {
		wd := &watchdog{loops: liveLoops(o, cfg, fw, h, shared), log: log, notify: sd}
		goLoop(&baseWG, baseCtx, func(ctx context.Context) { wd.run(ctx, o.WatchdogInterval, time.Now) })
	}
	goLoop(&loopsWG, loopsCtx, afterConnect(h.Run))
	goLoop(&loopsWG, loopsCtx, afterConnect(func(ctx context.Context) { h.RunMetrics(ctx, mt, o.MetricsInterval) }))
	log.Info("hatchery running", "hatchery", name, "mon", fw.MonAddr(), "ctl", ctlPath, "version", o.Version, "inventory", cfg.InventoryMode)
	if o.OnReady != nil {
		o.OnReady(Running{MonAddr: fw.MonAddr(), Hatchery: h, Framework: fw, Inventory: shared, VCenter: vc, Reload: rl.reload, CtlSocket: ctlPath})
	}

	var runErr error
	fwReturned := false
	select {
	case <-ctx.Done():
		runErr, fwReturned = drainAtStop(fw, cfg.DrainTimeoutDuration(), fwErr, log)
	case runErr = <-fwErr:
		fwReturned = true
	}
	if fwReturned { // the framework stopped on its own (heartbeats)
		if runErr == nil {
			runErr = errors.New("hatchery framework stopped")
		}
		log.Error("hatchery framework stopped: shutting down", logkey.Err, runErr)
	}
	log.Info("hatchery stopping", "hatchery", name)
	sd.send(sdnotify.Stopping, sdnotify.Status("stopping"))

	deadline := time.NewTimer(o.ShutdownTimeout)
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
			shutErr = fmt.Errorf("run daemon: %s still running %s after shutdown began", what, o.ShutdownTimeout)
			log.Error("shutdown timed out", logkey.Err, shutErr)
		}
	}
	stage("hatchery framework", fwCancel, &fwWG)
	if !fwReturned && shutErr == nil {
		// The framework's own error at shutdown: goroutines past its bound.
		if err := <-fwErr; err != nil {
			shutErr = err
		}
	}
	stage("hatchery loops", loopsCancel, &loopsWG)
	stage("inventory and vcenter dialer", baseCancel, &baseWG)
	closeVCenter(ctx, vc)
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
