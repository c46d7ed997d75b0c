package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/cdssim"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/daemon"
	"github.com/cds-contrib/hatchery-vsphere/internal/demo"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// rig is the demo's simulators with a daemon that a test can stop and
// start again on them, and a worker player that outlives the daemon.
type rig struct {
	t    *testing.T
	sims *demo.Sims
	logs *syncBuffer
	log  *slog.Logger

	// requestTimeout, when set, bounds each vCenter request of the
	// daemons the rig starts instead of the production bound (15 s).
	requestTimeout time.Duration
	// loadConfig, when set, is the daemons' reload of their configuration
	// (daemon.Options.LoadConfig).
	loadConfig func() (*config.Config, error)
	// reloadSignals, when set, are the daemons' reload signals
	// (daemon.Options.Reload).
	reloadSignals <-chan os.Signal

	mu         sync.Mutex
	launches   map[string][]string // job id -> worker VMs launched for it
	byVM       map[string]int      // VM -> successful launches in it
	jobs       []rigJob
	queuedAt   map[string]time.Time // job id -> when addJobs queued it
	launchedAt map[string]time.Time // job id -> its first worker's launch, as the player saw it
}

// rigJob is one job the rig queued.
type rigJob struct {
	ID string
	V1 bool
}

// newRig starts the demo's simulators; apiOpts edit the CDS API
// simulator's options.
func newRig(t *testing.T, apiOpts ...func(*cdssim.Options)) *rig {
	t.Helper()
	return newRigWith(t, demo.SimsOptions{API: apiOpts})
}

// newRigWith is newRig on simulators shaped by o.
func newRigWith(t *testing.T, o demo.SimsOptions) *rig {
	t.Helper()
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	sims, err := demo.StartSims("", log, o)
	require.NoError(t, err)
	t.Cleanup(sims.Close)
	// The rig's jobs are debian12 and V1 jobs: the demo's instant-clone
	// model (debian12-instant) is made a linked one, so that no instant
	// parent runs beside them (the demo's own runs show the parents).
	for i := range sims.Config.GuestCredentials {
		if sims.Config.GuestCredentials[i].CloneMode == config.CloneModeInstant {
			sims.Config.GuestCredentials[i].CloneMode = config.CloneModeDefault
		}
	}
	r := &rig{t: t, sims: sims, logs: logs, log: log, launches: map[string][]string{}, byVM: map[string]int{},
		queuedAt: map[string]time.Time{}, launchedAt: map[string]time.Time{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs (last 200 kB):\n%s", tail(logs.String(), 200<<10))
		}
	})
	return r
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// daemonRun is one run of the daemon.
type daemonRun struct {
	running daemon.Running
	cancel  context.CancelFunc
	done    chan error
}

// start runs the daemon on the rig's simulators until stop.
func (r *rig) start(obs hatchery.Observer) *daemonRun {
	r.t.Helper()
	return r.startWith(r.sims.Config, r.log, obs)
}

// startWith runs the daemon with cfg and log until stop.
func (r *rig) startWith(cfg *config.Config, log *slog.Logger, obs hatchery.Observer) *daemonRun {
	r.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan daemon.Running, 1)
	dr := &daemonRun{cancel: cancel, done: make(chan error, 1)}
	o := demo.DaemonOptions(cfg, log)
	o.Observer = obs
	if rt := r.requestTimeout; rt > 0 {
		base := o.VCenterConfig
		o.VCenterConfig = func(cc *vcenter.Config) {
			if base != nil {
				base(cc)
			}
			cc.RequestTimeout = rt
		}
	}
	o.LoadConfig, o.Reload = r.loadConfig, r.reloadSignals
	o.OnReady = func(run daemon.Running) { ready <- run }
	go func() { dr.done <- daemon.Run(ctx, o) }()
	select {
	case dr.running = <-ready:
	case err := <-dr.done:
		cancel()
		r.t.Fatalf("daemon stopped at start: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		r.t.Fatal("daemon not ready after 30s")
	}
	r.t.Cleanup(func() { // a failed test still joins its daemon
		cancel()
		select {
		case <-dr.done:
		case <-time.After(40 * time.Second):
		}
	})
	return dr
}

// stop cancels the daemon (SIGTERM) and returns how long Run took to return
// and its error; a Run still running after limit is a test failure.
func (dr *daemonRun) stop(t *testing.T, limit time.Duration) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	dr.cancel()
	select {
	case err := <-dr.done:
		dr.done <- err // for the cleanup
		return time.Since(start), err
	case <-time.After(limit):
		t.Fatalf("daemon Run did not return within %s of its context ending", limit)
		return 0, nil
	}
}

// addJobs queues n jobs: V2 jobs of flavor small, and every third a V1 job
// (default flavor, small).
func (r *rig) addJobs(n int) {
	api := r.sims.API
	for i := range n {
		var j rigJob
		if i%3 == 2 {
			reqs := sdk.RequirementList{{Type: sdk.ModelRequirement, Value: "shared.infra/debian12-v1"}}
			j = rigJob{ID: strconv.FormatInt(api.AddJobV1(cdssim.JobV1{Requirements: reqs, JobName: fmt.Sprintf("build-%d", i+1)}), 10), V1: true}
		} else {
			spec, _ := json.Marshal(sdk.V2WorkerModelVSphereSpec{Image: "debian12", Username: "cds", Password: "demo-guest-password"})
			j = rigJob{ID: api.AddJobV2(cdssim.JobV2{
				Model:   sdk.V2WorkerModel{Name: "debian12", OSArch: "linux/amd64", Type: sdk.VSphere, Spec: spec},
				RunsOn:  sdk.V2JobRunsOn{Model: "debian12", Flavor: "small"},
				JobName: fmt.Sprintf("build-%d", i+1),
			})}
		}
		r.mu.Lock()
		r.jobs = append(r.jobs, j)
		r.queuedAt[j.ID] = time.Now()
		r.mu.Unlock()
	}
}

// jobState is a job as the CDS API simulator holds it.
type jobState struct {
	Status string
	Holder string // hatchery that booked (V1) / took (V2) it
	Failed bool   // a failed result was posted (V1)
}

func (r *rig) jobState(j rigJob) jobState {
	if j.V1 {
		id, _ := strconv.ParseInt(j.ID, 10, 64)
		st, _ := r.sims.API.JobV1(id)
		return jobState{Status: st.Status, Holder: st.BookedBy, Failed: st.Status == sdk.StatusFail && len(st.Results) > 0}
	}
	st, _ := r.sims.API.JobV2(j.ID)
	return jobState{Status: st.Status, Holder: st.TakenBy}
}

// playWorkers plays the worker of every successful launch the fake guest
// records, across daemon runs, until ctx ends: it signs in to the API at
// once with the token its hatchery gave it and takes its job, "builds" for
// runTime, ends it (Success) and powers its VM off as `shutdown -h now`
// would.
func (r *rig) playWorkers(ctx context.Context, runTime time.Duration) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	r.t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		seen := 0
		for {
			calls, err := r.sims.Env.Guest.WaitForCalls(ctx, seen+1)
			if err != nil {
				return
			}
			for _, c := range calls[seen:] {
				if c.Fault != nil || c.ProgramPath != "/bin/echo" {
					continue
				}
				job, wc, ok := launchJob(c)
				if !ok {
					continue
				}
				r.mu.Lock()
				r.launches[job] = append(r.launches[job], c.VM)
				if _, ok := r.launchedAt[job]; !ok {
					r.launchedAt[job] = time.Now()
				}
				r.byVM[c.VM]++
				r.mu.Unlock()
				wg.Add(1)
				go func() {
					defer wg.Done()
					r.runWorker(ctx, c.VM, job, wc, runTime)
				}()
			}
			seen = len(calls)
		}
	}()
}

func (r *rig) runWorker(ctx context.Context, vm, job string, wc spawn.WorkerConfig, runTime time.Duration) {
	api := r.sims.API
	w, err := cdssim.StartWorker(ctx, api.URL(), cdssim.WorkerJob{
		Token: wc.APIToken, V1JobID: wc.BookedJobID, RunJobID: wc.RunJobID, Region: api.Region(), LogAddr: wc.GelfServiceAddr,
	})
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("test worker: sign-in refused", "vm", vm, "job", job, "err", err)
		}
		return
	}
	tm := time.NewTimer(runTime) // the build's duration, not a synchronisation
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return
	case <-tm.C:
	}
	if err := w.End(ctx, sdk.StatusSuccess); err != nil && ctx.Err() == nil {
		r.log.Warn("test worker: result refused", "vm", vm, "job", job, "err", err)
	}
	if ref, ok := r.vmRef(vm); ok {
		task, err := object.NewVirtualMachine(r.sims.Env.Admin.Client, ref).PowerOff(ctx)
		if err == nil {
			err = task.Wait(ctx)
		}
		if err != nil && ctx.Err() == nil {
			r.log.Warn("test worker: power off", "vm", vm, "err", err)
		}
	}
}

func (r *rig) vmRef(name string) (types.ManagedObjectReference, bool) {
	st, ok := r.sims.Env.Inspect(name)
	return st.Ref, ok
}

// launchJob is the job of a launch and the worker configuration it got,
// from its CDS_CONFIG.
func launchJob(c vcsimtest.GuestCall) (string, spawn.WorkerConfig, bool) {
	for _, e := range c.EnvVariables {
		if enc, ok := strings.CutPrefix(e, "CDS_CONFIG="); ok {
			wc, err := spawn.DecodeWorkerConfig(enc)
			if err != nil {
				return "", wc, false
			}
			if wc.BookedJobID != 0 {
				return strconv.FormatInt(wc.BookedJobID, 10), wc, true
			}
			return wc.RunJobID, wc, wc.RunJobID != ""
		}
	}
	return "", spawn.WorkerConfig{}, false
}

// ourVMs splits the hatchery's VMs in the simulator (templates and the
// demo's instant parents aside): provisioned (warm pool) and workers.
func (r *rig) ourVMs() (pool, workers []demo.SimVM) {
	name := r.sims.Config.CommonConfiguration.Name
	for _, v := range demo.ListVMs(r.sims.Env) {
		if v.Template || v.Annotation == nil || v.Annotation.HatcheryName != name || v.InstantParent {
			continue
		}
		if v.Annotation.Provisioning {
			pool = append(pool, v)
		} else {
			workers = append(workers, v)
		}
	}
	return pool, workers
}

// sampleAlong calls sample every period from a goroutine of its own, from
// now until the test's cleanup, which stops and joins it.
func (r *rig) sampleAlong(period time.Duration, sample func()) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(period)
		defer tk.Stop()
		for {
			sample()
			select {
			case <-stop:
				return
			case <-tk.C:
			}
		}
	}()
	r.t.Cleanup(func() { close(stop); wg.Wait() })
}

// assertOnlyWarmPool waits up to within for the hatchery's VMs to be the
// warm pool alone, at its size and powered off, and logs what is left
// otherwise.
func (r *rig) assertOnlyWarmPool(within, tick time.Duration, msg string) bool {
	r.t.Helper()
	settled := assert.Eventually(r.t, func() bool {
		pool, workers := r.ourVMs()
		if len(workers) > 0 || len(pool) != r.poolSize() {
			return false
		}
		for _, v := range pool {
			if v.PoweredOn {
				return false
			}
		}
		return true
	}, within, tick, msg)
	if !settled {
		pool, workers := r.ourVMs()
		for _, v := range append(pool, workers...) {
			r.t.Logf("left: %s on=%v annotation=%+v", v.Name, v.PoweredOn, *v.Annotation)
		}
	}
	return settled
}

// poolSize is the configured warm pool size.
func (r *rig) poolSize() int {
	n := 0
	for _, p := range r.sims.Config.WorkerProvisioning {
		n += p.Number
	}
	return n
}

// spawnCounter is an Observer counting spawns; reached is closed once
// threshold spawns are in flight at once after at least minOK succeeded.
type spawnCounter struct {
	hatchery.NopObserver
	mu                 sync.Mutex
	started, succeeded int
	failed             int
	threshold, minOK   int
	reached            chan struct{}
	cut                int // failed spawns whose error is a cancellation: cut by a stop
}

func newSpawnCounter(threshold, minOK int) *spawnCounter {
	return &spawnCounter{threshold: threshold, minOK: minOK, reached: make(chan struct{})}
}

// checkLocked closes reached when the condition holds.
func (c *spawnCounter) checkLocked() {
	if c.threshold > 0 && c.started-c.succeeded-c.failed >= c.threshold && c.succeeded >= c.minOK {
		close(c.reached)
		c.threshold = 0
	}
}

func (c *spawnCounter) SpawnStarted(ev hatchery.SpawnEvent) {
	if ev.RegisterOnly {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.started++
	c.checkLocked()
}

func (c *spawnCounter) SpawnSucceeded(ev hatchery.SpawnEvent, _ time.Duration) {
	if ev.RegisterOnly {
		return
	}
	c.mu.Lock()
	c.succeeded++
	c.checkLocked()
	c.mu.Unlock()
}

func (c *spawnCounter) SpawnFailed(ev hatchery.SpawnEvent, _ time.Duration) {
	if ev.RegisterOnly {
		return
	}
	c.mu.Lock()
	c.failed++
	if errors.Is(ev.Err, context.Canceled) {
		c.cut++
	}
	c.mu.Unlock()
}

// cutSpawns is the number of failed spawns cut by a stop (their error a
// cancellation).
func (c *spawnCounter) cutSpawns() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cut
}

func (c *spawnCounter) counts() (started, succeeded, failed int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.started, c.succeeded, c.failed
}

// oneSimulatorTask bounds the hatchery's vCenter tasks in flight to one.
// vcsim v0.56.0 races with itself on concurrent clones (CloneVM_Task
// against another clone's folder and datastore updates: seen under -race
// in its Datastore.resolve, folderPutChild and createVM), which no
// version the proxy serves fixes: the tests serialise the
// tasks, while spawns stay concurrent around them.
func oneSimulatorTask(cfg *config.Config) { cfg.MaxConcurrentTasks = 1 }

// syncBuffer is the shared concurrency-safe output sink.
type syncBuffer = testutil.SyncBuffer
