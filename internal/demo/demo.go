// Package demo runs hatchery-vsphere end to end on one machine with nothing
// but Go: an in-process vCenter simulator (govmomi's vcsim with the
// template debian12 and a resource pool of finite capacity), an in-process
// CDS API simulator, and the real daemon (internal/daemon) configured from
// configs/demo.toml. It feeds jobs (V2 jobs of flavors small, medium and
// large, one of them on the cloud-init model debian12-cloud, one on the
// Windows model win2022 and one on the instant-clone model
// debian12-instant, and V1 jobs on a V1 model), plays the part of each worker (it
// registers with the API, runs a moment, finishes and powers its VM off, as
// the worker's `shutdown -h now` would) and prints the life of every job, up
// to its VM being destroyed by the hatchery's cleanup.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/cdssim"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/daemon"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// Defaults of Options.
const (
	// DefaultOnceTimeout bounds a --once run: six jobs take well under a
	// minute; two minutes is the promise of the README.
	DefaultOnceTimeout = 2 * time.Minute
	// DefaultJobEvery is the trickle's period: a new job every 1.5 s keeps
	// a few VMs alive at once without exceeding maxWorker.
	DefaultJobEvery = 1500 * time.Millisecond
	// DefaultWorkerRunTime is how long a simulated worker "builds".
	DefaultWorkerRunTime = 2 * time.Second
)

// Demo identities: throwaway values of the in-process simulators.
const (
	hatcheryName  = "hatchery-vsphere-demo"
	vcUser        = "demo@vsphere.local"
	vcPassword    = "demo-vcsim-password"
	guestUser     = "cds"
	guestPassword = "demo-guest-password"
	imageTemplate = "debian12"
	// cloudInitTemplate is the cloud-init model's template (demo.toml).
	cloudInitTemplate = "debian12-cloud"
	// windowsTemplate is the Windows model's template (demo.toml, os =
	// "windows"): a Windows guest id, so that the simulator's fake guest
	// plays a Windows guest (internal/vcsimtest, guestwin.go).
	windowsTemplate = "win2022"
	// v1ModelName is the V1 model; its template (named after it) is
	// created at start as if the model had been registered before.
	v1ModelName  = "debian12-v1"
	v1ModelGroup = "shared.infra"
	v2ModelName  = "debian12"
)

// Options tune Run. The zero value is `hatchery-vsphere demo`: jobs
// forever, /mon on a free port.
type Options struct {
	// Jobs is how many jobs to feed; 0 feeds one every JobEvery forever.
	Jobs int
	// Once makes Run return nil after Jobs jobs completed and all their VMs
	// were destroyed (or, for V1 jobs, were failed by the hatchery after
	// too many spawn attempts), an error after Timeout.
	Once bool
	// Listen is the /mon address (host:port); "" is 127.0.0.1 on a free port.
	Listen string
	// Timeout bounds a Once run (0: DefaultOnceTimeout).
	Timeout time.Duration
	// JobEvery is the period between two jobs (0: DefaultJobEvery).
	JobEvery time.Duration
	// WorkerRunTime is how long a simulated worker runs (0: DefaultWorkerRunTime).
	WorkerRunTime time.Duration
	// Stdout receives the addresses and the life of every job (nil: discard).
	Stdout io.Writer
	// Logger receives the daemon's and the simulators' logs (nil: discard).
	Logger *slog.Logger
	// Tune, when set, edits the hatchery's configuration before the daemon
	// starts (tests: pool sizes, limits); the result is validated again.
	Tune func(*config.Config)
	// OnReady, when set, is called once everything runs (tests).
	OnReady func(Info)
	// OnDone, when set, is called when a Once run has succeeded, before
	// anything stops (tests check the simulator's final state there).
	OnDone func(Info, *Report)
	// Checks makes a Once run end with its checks (Report.Checks, one line
	// each on Stdout; `demo --once` sets it): it then fails naming the
	// checks that did not pass. Runs with injected faults leave it off.
	Checks bool
	// Instances is how many daemons of the one hatchery name run against
	// the simulators (0: 1; at most MaxInstances). Each logs with the
	// attribute instance=N when there are more than one; the first serves
	// /mon on Listen, the others on a free port of 127.0.0.1.
	Instances int
	// SerialTasks runs the vCenter simulator's clone, destroy, reconfigure
	// and rename tasks, and the file removals a destroy starts, one at a
	// time (SimsOptions.SerialTasks): for tests running the demo under the
	// race detector.
	SerialTasks bool
	// RequestTimeout, when set, bounds each request of the daemons to
	// vCenter and to the CDS API in place of the configuration's bounds
	// (production's, sized for a real vCenter and API: 15 s and 10 s).
	// Tests running the demo on a loaded machine set a liveness bound:
	// the simulators share the machine with the daemon and answer late,
	// which a healthy run must not log as a WARN.
	RequestTimeout time.Duration
	// WriteConfig, when set, is a file the configuration of the
	// simulators is written to once they run (WriteConfig; `demo
	// --write-config FILE`), for `config check --online`, `vcenter
	// check` and `start` against them.
	WriteConfig string
	// Soak, when set, feeds a job every JobEvery for that long (Jobs is
	// not used), then ends as a Once run with Checks, plus the soak's
	// growth check and summary line (soak.go); the job lines are not
	// printed, a progress line per sample is. Timeout counts from the
	// start (0: Soak plus DefaultOnceTimeout).
	Soak time.Duration
}

// Info describes a running demo.
type Info struct {
	// MonURL is the base URL of the (first) hatchery's /mon server.
	MonURL string
	// MonURLs are the /mon base URLs of every instance, in order.
	MonURLs []string
	// SDKURL, User and Password reach the vCenter simulator (govc).
	SDKURL, User, Password string
	// Env is the vCenter simulator.
	Env *vcsimtest.Env
	// API is the CDS API simulator.
	API *cdssim.Server
	// Config is the hatchery's configuration.
	Config *config.Config
	// CtlSockets are the ctl sockets of every instance, in order
	// (`hatchery-vsphere ctl --socket PATH status`).
	CtlSockets []string
}

// Run runs the demo until ctx ends (nil) or, with Once, until Jobs jobs are
// done and cleaned up. It returns the report of every job fed. With
// Checks, a Once run ends with its checks (Report.Checks, one line each on
// Stdout) and fails naming the checks that did not pass.
func Run(ctx context.Context, o Options) (*Report, error) {
	o, err := withDefaults(o)
	if err != nil {
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	start := time.Now()
	out := &printer{w: o.Stdout, start: start, quietJobs: o.Soak > 0}

	sims, err := StartSims(o.Listen, log, SimsOptions{SerialTasks: o.SerialTasks})
	if err != nil {
		return nil, err
	}
	defer sims.Close()
	env, api, cfg := sims.Env, sims.API, sims.Config
	if o.Tune != nil {
		o.Tune(cfg)
		if err := cfg.Validate(); err != nil {
			return nil, fmt.Errorf("demo: tuned configuration: %w", err)
		}
	}
	if o.WriteConfig != "" {
		// A daemon started with the file serves /mon on a port of its own.
		written := *cfg
		written.CommonConfiguration.HTTP.Port = 0
		if err := WriteConfig(o.WriteConfig, &written); err != nil {
			return nil, err
		}
		fmt.Fprintf(o.Stdout, "configuration of the simulators written to %s (vcenter check --config %s)\n", o.WriteConfig, o.WriteConfig)
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	d := &driver{
		o: o, cfg: cfg, env: env, api: api, out: out, log: log,
		jobs: map[string]*jobLife{}, byWorker: map[string]*jobLife{}, launchesByVM: map[string]int{},
		changed: make(chan struct{}, 1),
	}

	// The daemons: Instances of them, one hatchery name, each with its own
	// logger attribute and /mon listener. Their records at WARN and above
	// are counted for the quiet check.
	quiet := newWarnCounter(log.Handler())
	ready := make(chan startedDaemon, o.Instances)
	daemonErr := make(chan error, o.Instances)
	// Each instance's ctl socket, in a directory of the demo's own,
	// removed when it ends (after the daemons: deferred first).
	ctlDir, err := os.MkdirTemp("", "hatchery-vsphere-demo-")
	if err != nil {
		return nil, fmt.Errorf("demo: ctl socket directory: %w", err)
	}
	defer os.RemoveAll(ctlDir)
	ctls := make([]string, o.Instances)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for i := range o.Instances {
		do := instanceOptions(o, cfg, i, slog.New(quiet), ctlDir)
		do.OnReady = func(r daemon.Running) { ready <- startedDaemon{i, r} }
		ctls[i] = do.CtlSocket
		wg.Add(1)
		go func() { // joined by the deferred wg.Wait; stopped by runCtx
			defer wg.Done()
			if err := daemon.Run(runCtx, do); err != nil {
				daemonErr <- fmt.Errorf("instance %d: %w", i+1, err)
				return
			}
			daemonErr <- nil
		}()
	}
	mons := make([]string, o.Instances)
	for range o.Instances {
		select {
		case s := <-ready:
			mons[s.i] = "http://" + s.run.MonAddr
		case err := <-daemonErr:
			if stopped(ctx, err) {
				return nil, nil
			}
			return nil, fmt.Errorf("demo: daemon stopped at start: %w", err)
		case <-ctx.Done():
			return nil, nil
		}
	}
	out.banner(mons, ctls, env, o)
	info := Info{MonURL: mons[0], MonURLs: mons, SDKURL: env.Endpoint, User: env.User, Password: env.Password, Env: env, API: api, Config: cfg, CtlSockets: ctls}
	if o.OnReady != nil {
		o.OnReady(info)
	}

	smp := newSampler(env, cfg.CommonConfiguration.Name)
	if o.Soak > 0 {
		d.soak = newSoakRun(o.Soak, func() int { return d.report().Done() })
		wg.Add(1)
		go func() { defer wg.Done(); d.runSoakMeter(runCtx) }()
	}
	wg.Add(4)
	go func() { defer wg.Done(); d.feed(runCtx) }()
	go func() { defer wg.Done(); d.workers(runCtx) }()
	go func() { defer wg.Done(); d.cloudInitWorkers(runCtx) }()
	go func() { defer wg.Done(); d.watchCleanup(runCtx) }()
	if o.Once && o.Checks {
		wg.Add(1)
		go func() { defer wg.Done(); smp.run(runCtx) }()
	}

	var timeout <-chan time.Time
	if o.Once {
		t := time.NewTimer(o.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	return d.await(ctx, runCtx, daemonErr, timeout, smp, quiet, info, start)
}

// await is the end of Run: it waits until ctx ends, a daemon stops, the
// Once run's timeout passes, or (Once) every job wanted ended, which the
// driver's changes signal, and returns the report (with Checks: the
// checks, d.finish).
func (d *driver) await(ctx, runCtx context.Context, daemonErr <-chan error, timeout <-chan time.Time, smp *sampler, quiet *warnCounter, info Info, start time.Time) (*Report, error) {
	for {
		select {
		case <-ctx.Done():
			return d.report(), nil
		case err := <-daemonErr:
			if stopped(ctx, err) {
				return d.report(), nil
			}
			if err == nil {
				err = errors.New("stopped before the demo ended")
			}
			return d.report(), fmt.Errorf("demo: daemon stopped: %w", err)
		case <-timeout:
			if ctx.Err() != nil {
				return d.report(), nil
			}
			rep := d.report()
			if d.o.Checks {
				// A run that fails still says what held.
				smp.sample()
				rep.Checks = d.printChecks(d.checkRun(rep, smp, quiet, d.ourVMs))
			}
			return rep, fmt.Errorf("demo: %d of %d jobs done and cleaned up after %s", rep.Done(), d.jobsWanted(), d.o.Timeout)
		case <-d.changed:
			if ctx.Err() != nil {
				return d.report(), nil // stopped: what happens meanwhile is the stop's
			}
			rep := d.report()
			if lost := rep.Lost(); d.o.Once && len(lost) > 0 {
				if d.o.Checks {
					smp.sample()
					rep.Checks = d.printChecks(d.checkRun(rep, smp, quiet, d.ourVMs))
				}
				return rep, fmt.Errorf("demo: the VM of job %d (%s) vanished while its worker ran", lost[0].Seq, lost[0].VM)
			}
			if want := d.jobsWanted(); d.o.Once && want >= 0 && rep.Done()+rep.Failed() == want {
				if n := rep.Failed(); n > 0 {
					d.out.printf("all %d jobs ended: %d done, every worker VM destroyed, %d failed by the hatchery, in %s", want, rep.Done(), n, time.Since(start).Round(100*time.Millisecond))
				} else {
					d.out.printf("all %d jobs done, every worker VM destroyed, in %s", want, time.Since(start).Round(100*time.Millisecond))
				}
				if !d.o.Checks {
					if d.o.OnDone != nil {
						d.o.OnDone(info, rep)
					}
					return rep, nil
				}
				return d.finish(runCtx, rep, info, smp, quiet, timeout)
			}
		}
	}
}

// withDefaults checks o and fills its zero fields that have a default
// (Soak implies Once and Checks, without a job count).
func withDefaults(o Options) (Options, error) {
	if o.Soak > 0 {
		o.Once, o.Checks, o.Jobs = true, true, 0
		if o.Timeout <= 0 {
			o.Timeout = o.Soak + DefaultOnceTimeout
		}
	}
	if o.Once && o.Jobs <= 0 && o.Soak <= 0 {
		return o, errors.New("demo: --once needs --jobs N")
	}
	if o.Instances == 0 {
		o.Instances = 1
	}
	if o.Instances < 1 || o.Instances > MaxInstances {
		return o, fmt.Errorf("demo: --instances %d: 1 to %d instances are supported", o.Instances, MaxInstances)
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultOnceTimeout
	}
	if o.JobEvery <= 0 {
		o.JobEvery = DefaultJobEvery
	}
	if o.WorkerRunTime <= 0 {
		o.WorkerRunTime = DefaultWorkerRunTime
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	return o, nil
}

// startedDaemon is an instance (its index) whose daemon is ready.
type startedDaemon struct {
	i   int
	run daemon.Running
}

// instanceOptions are the daemon options of instance i (from 0) of the
// demo's configuration cfg: its logger (dlog, with an "instance"
// attribute when there are several), the request timeout of
// Options.RequestTimeout, and its ctl socket in ctlDir.
func instanceOptions(o Options, cfg *config.Config, i int, dlog *slog.Logger, ctlDir string) daemon.Options {
	if o.Instances > 1 {
		dlog = dlog.With("instance", i+1)
	}
	do := DaemonOptions(instanceConfig(cfg, i), dlog)
	if rt := o.RequestTimeout; rt > 0 {
		tuned := do.VCenterConfig
		do.VCenterConfig = func(cc *vcenter.Config) {
			tuned(cc)
			cc.RequestTimeout = rt
		}
		do.Config.CommonConfiguration.API.RequestTimeout = int(min(rt, config.MaxAPIRequestTimeout*time.Second) / time.Second)
	}
	do.CtlSocket = filepath.Join(ctlDir, "ctl.sock")
	if o.Instances > 1 {
		do.CtlSocket = filepath.Join(ctlDir, fmt.Sprintf("ctl-%d.sock", i+1))
	}
	return do
}

// stopped tells whether a daemon that ended with err (nil or not) ended
// because the demo was asked to stop (ctx ended: SIGINT, SIGTERM): a clean
// stop, the demo returns no error, unless the daemon failed otherwise.
// Without it a daemon returning as asked, when its answer won the race
// with ctx.Done, ended the demo with "daemon stopped: stopped before the
// demo ended" (exit 1 after Ctrl-C).
func stopped(ctx context.Context, err error) bool {
	return ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled))
}

// settleFor bounds the wait of a --once run for the warm pool to refill
// once every job is done: a refill clone takes a few seconds in the
// simulator.
const settleFor = 20 * time.Second

// finish ends a Once run: it waits (settleFor at most, and never past
// timeout) for the hatchery's VMs to be the warm pool alone, runs the
// checks, prints one line each, calls OnDone when they all passed and
// returns an error naming the first that failed.
func (d *driver) finish(ctx context.Context, rep *Report, info Info, smp *sampler, quiet *warnCounter, timeout <-chan time.Time) (*Report, error) {
	settle := time.NewTimer(settleFor)
	defer settle.Stop()
	tick := time.NewTicker(100 * time.Millisecond) // polls the simulator: no signal for "the pool is full"
	defer tick.Stop()
wait:
	for {
		if workers, pool := d.ourVMs(); len(workers) == 0 && len(pool) == poolSize(d.cfg) {
			if bad, _ := parentsLeft(d.cfg, d.ourParents(), d.instantFlavors()); bad == "" {
				break
			}
		}
		select {
		case <-ctx.Done():
			break wait
		case <-timeout:
			break wait
		case <-settle.C:
			break wait
		case <-tick.C:
		}
	}
	if ctx.Err() != nil {
		// Stopped (SIGINT) before the checks: they would judge a state the
		// stop cut short. A clean stop, not a failure.
		d.out.printf("stopped before the checks: %d of %d jobs done", rep.Done(), d.o.Jobs)
		return rep, nil
	}
	smp.sample() // the last state too
	rep = d.report()
	rep.Checks = d.checkRun(rep, smp, quiet, d.ourVMs)
	soakLine := ""
	if d.soak != nil {
		var c Check
		c, soakLine = d.soakChecks(quiet)
		rep.Checks = append(rep.Checks, c)
	}
	d.printChecks(rep.Checks)
	var failed []string
	for _, c := range rep.Checks {
		if c.Failed != "" {
			failed = append(failed, c.Name)
		}
	}
	if soakLine != "" {
		d.out.printf("%s", soakLine)
	}
	if len(failed) > 0 {
		return rep, fmt.Errorf("demo: check failed: %s", strings.Join(failed, "; "))
	}
	if d.o.OnDone != nil {
		d.o.OnDone(info, rep)
	}
	return rep, nil
}

// printChecks prints one line per check, ok or FAILED, and returns them.
func (d *driver) printChecks(checks []Check) []Check {
	for _, c := range checks {
		if c.Failed != "" {
			d.out.printf("check %-32s FAILED: %s", c.Name+":", c.Failed)
		} else {
			d.out.printf("check %-32s ok (%s)", c.Name+":", c.Detail)
		}
	}
	return checks
}
