package vsphere_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/object"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/spawntiming"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vsphere"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// latencyScenario is one burst of jobs against one pool strategy and clone
// mode.
type latencyScenario struct {
	name string
	// pool: "none" (every job clones), or the idle state of the pool
	// every job claims from (provisioned before the burst): "powered-off",
	// "suspended" or "powered-on" (the hot pools, pre-sized to the
	// flavor every job asks for).
	pool string
	// linked: the template has a snapshot, so clones are linked.
	linked bool
	jobs   int
	tasks  int // maxConcurrentTasks
	// pollInterval is the client's wait poll interval (0: the
	// simulator's, vcsimtest.TestPollInterval, the real 1 s scaled).
	pollInterval time.Duration
}

// latencyResult is what one scenario measured, per job.
type latencyResult struct {
	scenario latencyScenario
	jobStart []time.Duration
	overhead []time.Duration
	// stageOverhead is measured minus modelled, per stage, per job.
	stageOverhead map[spawntiming.Stage][]time.Duration
	// requests are the hatchery client's SOAP requests by method during
	// the burst (the inventory reads through a client of its own).
	requests vcenter.SOAPStats
}

// BenchmarkJobStartLatency (make bench-latency) spawns bursts of jobs
// through the real govmomi adapter against vcsim taught the latency model
// of internal/vcsimtest (every task and guest boot takes its real duration
// divided by vcsimtest.LatencyScale, with jitter) and prints, per pool
// strategy and clone mode, the job start (queued -> worker launched)
// p50/p95/max and the hatchery's own overhead: the measured time minus the
// modelled critical path, per stage. All of a burst's jobs are queued at
// once and booked at once; the modelled critical path of the i-th clone to
// start includes waiting for a task slot as an ideal scheduler would
// (floor(i / maxConcurrentTasks) modelled clones), so what remains is the
// hatchery's own time. The last line compares the suspended pool's p50
// with the fresh linked clone's (the faster fresh start); then the instant
// clone's p50 over the fresh linked clone's (bursts of 8) and the instant
// rows' overhead p95.
func BenchmarkJobStartLatency(b *testing.B) {
	useLatencyModelFile(b)
	scenarios := []latencyScenario{
		{name: "no pool, full clone", pool: "none", jobs: 8, tasks: 8},
		{name: "no pool, linked clone", pool: "none", linked: true, jobs: 8, tasks: 8},
		{name: "powered-off pool, full clone", pool: "powered-off", jobs: 8, tasks: 8},
		{name: "powered-off pool, linked clone", pool: "powered-off", linked: true, jobs: 8, tasks: 8},
		{name: "suspended pool", pool: "suspended", linked: true, jobs: 8, tasks: 8},
		{name: "powered-on pool", pool: "powered-on", linked: true, jobs: 8, tasks: 8},
		{name: "burst 50, no pool, linked clone", pool: "none", linked: true, jobs: 50, tasks: 8},
		{name: "instant clone", pool: "instant", linked: true, jobs: 8, tasks: 8},
		{name: "burst 50, instant clone", pool: "instant", linked: true, jobs: 50, tasks: 8},
	}
	// LATENCY_SCENARIOS=REGEXP runs only the scenarios whose name it
	// matches (an A/B of two builds on a busy machine: the burst and the
	// rows of the hot/fresh ratio, back to back).
	if only := os.Getenv("LATENCY_SCENARIOS"); only != "" {
		re := regexp.MustCompile(only)
		scenarios = slices.DeleteFunc(scenarios, func(sc latencyScenario) bool { return !re.MatchString(sc.name) })
	}
	out := io.Writer(os.Stdout)
	for i := 0; i < b.N; i++ {
		var results []latencyResult
		for _, sc := range scenarios {
			results = append(results, runLatencyScenario(b, sc))
		}
		if i == b.N-1 {
			printLatency(out, results)
		}
	}
}

// BenchmarkSpawnPaths (make bench-latency, make bench) runs each spawn
// path — fresh clone, powered-off claim, hot claim — with one job alone
// on vcsim taught the latency model, once with the simulator's scaled
// wait settings and once with the daemon's production ones, and prints
// per path the time spent waiting beyond the modelled operations and the
// hatchery client's SOAP requests by method (each path on a client of its
// own: the requests made once per session are counted, and said so).
// SPAWN_TRACE=1 prints every request (bench_trace_test.go).
func BenchmarkSpawnPaths(b *testing.B) {
	useLatencyModelFile(b)
	for i := 0; i < b.N; i++ {
		paths := runSpawnPaths(b)
		if i == b.N-1 {
			printSpawnPaths(os.Stdout, paths)
		}
	}
}

// spawnPaths are the three ways a job gets its VM, one job each, alone:
// what one spawn costs in requests and in waiting beyond the modelled
// operations, with nothing else competing.
var spawnPaths = []latencyScenario{
	{name: "fresh clone", pool: "none", linked: true, jobs: 1, tasks: 8},
	{name: "powered-off claim", pool: "powered-off", linked: true, jobs: 1, tasks: 8},
	{name: "hot claim (suspended)", pool: "suspended", linked: true, jobs: 1, tasks: 8},
}

// runSpawnPaths runs each spawn path with the simulator's scaled wait
// settings and with the daemon's production ones (vcenter.DefaultPollInterval).
func runSpawnPaths(b *testing.B) []latencyResult {
	var out []latencyResult
	for _, poll := range []time.Duration{vcsimtest.TestPollInterval, vcenter.DefaultPollInterval} {
		for _, sc := range spawnPaths {
			sc.pollInterval = poll
			out = append(out, runLatencyScenario(b, sc))
		}
	}
	return out
}

// printSpawnPaths writes one line per spawn path and wait setting: the
// time spent beyond the modelled operations (in total and per stage) and
// the hatchery client's SOAP requests by method.
func printSpawnPaths(w io.Writer, results []latencyResult) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "spawn paths, one job alone: waiting beyond the modelled operations (s) and SOAP requests by method:")
	for _, r := range results {
		var parts []string
		for _, s := range spawntiming.Stages {
			if s == spawntiming.StageQueueToBook {
				continue
			}
			if d, ok := r.stageOverhead[s]; ok && len(d) > 0 {
				parts = append(parts, fmt.Sprintf("%s=%s", s, sec(d[0])))
			}
		}
		methods := make([]string, 0, len(r.requests))
		for m := range r.requests {
			methods = append(methods, m)
		}
		sort.Strings(methods)
		var reqs []string
		for _, m := range methods {
			reqs = append(reqs, fmt.Sprintf("%s=%d", m, r.requests[m].Requests))
		}
		fmt.Fprintf(w, "  %-22s poll %-6s beyond %s s (%s)\n    requests %d%s: %s\n", r.scenario.name, r.scenario.pollInterval,
			sec(pct(r.overhead, 0.5)), strings.Join(parts, " "), r.requests.Total().Requests, sessionShare(r.requests), strings.Join(reqs, " "))
	}
}

// sessionSetUp are the requests the client makes once per session, at its
// first wait: the wait collector, its view and its filter.
var sessionSetUp = []string{"CreatePropertyCollector", "CreateListView", "CreateFilter"}

// sessionShare says how many of a path's requests are the session's
// set-up (counted: a fresh clone is its client's first wait).
func sessionShare(reqs vcenter.SOAPStats) string {
	var n int64
	for _, m := range sessionSetUp {
		n += reqs[m].Requests
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d once per session, counted: the wait collector's set-up)", n)
}

func runLatencyScenario(b testing.TB, sc latencyScenario) latencyResult {
	b.Helper()
	cloneOp := vcsimtest.OpFullClone
	if sc.linked {
		cloneOp = vcsimtest.OpLinkedClone
	}
	restore := vcsimtest.ApplyTaskDelays(cloneOp)
	defer restore()

	env := vcsimtest.Start(b, vcsimtest.LatencyOptions(vcsimtest.Options{}))
	ctx := env.Context()
	if sc.linked {
		tpl := env.MustInspect(vcsimtest.DefaultTemplate)
		task, err := object.NewVirtualMachine(env.Admin.Client, tpl.Ref).CreateSnapshot(ctx, "base", "", false, false)
		require.NoError(b, err)
		require.NoError(b, task.Wait(ctx))
	}
	newClient := env.NewClient
	var rec *vcsimtest.Recorder
	if os.Getenv("SPAWN_TRACE") != "" { // bench_trace_test.go
		rec = env.StartRecorder()
		newClient = rec.NewClient
	}
	client := newClient(func(c *vcenter.Config) {
		c.MaxConcurrentTasks = sc.tasks
		if sc.pollInterval > 0 {
			c.PollInterval = sc.pollInterval
		}
	})
	cfg := env.Config()
	cfg.CommonConfiguration.Name = "hatch-bench-latency"
	cfg.MaxConcurrentTasks = sc.tasks
	// The simulator reports a guest IP only from a fixed-IP customization.
	cfg.IPRange, cfg.Gateway, cfg.SubnetMask, cfg.DNS = "192.168.80.10/24", "192.168.80.1", "255.255.255.0", "192.168.80.2"
	flavor := ""
	switch sc.pool {
	case "powered-off":
		cfg.WorkerProvisioning = []config.WorkerProvisioning{{ModelVMWare: vcsimtest.DefaultTemplate, Number: sc.jobs}}
	case "suspended", "powered-on":
		state := config.IdleStateSuspended
		if sc.pool == "powered-on" {
			state = config.IdleStatePoweredOn
		}
		flavor = "bench"
		cfg.Flavors = []config.Flavor{{Name: flavor, CPUs: 2, MemoryMB: 2048}}
		cfg.WorkerProvisioning = []config.WorkerProvisioning{{ModelVMWare: vcsimtest.DefaultTemplate, Number: sc.jobs, Flavor: flavor, IdleState: state}}
	}
	if sc.pool == "instant" {
		// The model forks its workers from a running parent
		// (docs/instant-clones.md): cloud-init's guestinfo, Linux.
		cfg.GuestCredentials = []config.GuestCredential{{ModelVMWare: vcsimtest.DefaultTemplate, Bootstrap: config.BootstrapCloudInit, CloneMode: config.CloneModeInstant}}
	}
	cfg.WorkerProvisioningPoolSize = max(sc.jobs, 1)
	inv := env.Inventory(cfg)
	h, err := vsphere.New(vsphere.Options{Config: cfg, Client: client, Inventory: inv,
		Logger: testutil.DiscardLogger()})
	require.NoError(b, err)
	switch sc.pool {
	case "none":
	case "instant":
		// The parent is built before the burst, as the instant-parents
		// loop keeps it running all day.
		for i := 0; ; i++ {
			require.Less(b, i, 3, "no instant parent ready")
			env.WaitInventory(inv)
			h.InstantParentsPass(ctx)
			if _, ok := h.InstantReadyParent(vcsimtest.DefaultTemplate); ok {
				break
			}
		}
	default:
		h.WarmProvisioningPass(ctx)
		env.WaitInventory(inv)
	}

	var mu sync.Mutex
	var timings []spawntiming.Timing
	h.BenchOnSpawnTimed(func(_ spawn.Arguments, t spawntiming.Timing) {
		mu.Lock()
		defer mu.Unlock()
		timings = append(timings, t)
	})

	before := client.Stats()
	nrec := 0
	if rec != nil {
		nrec = len(rec.Exchanges())
	}
	queued := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, sc.jobs)
	for j := 0; j < sc.jobs; j++ {
		wg.Add(1)
		go func(j int) {
			defer wg.Done()
			args := viV2Args(cfg.CommonConfiguration.Name, fmt.Sprintf("lat-%d", j), fmt.Sprintf("run-lat-%d", j), flavor)
			args.Queued, args.Booked = queued, time.Now()
			errs[j] = h.SpawnWorker(context.WithoutCancel(ctx), args)
		}(j)
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(b, err)
	}
	require.Len(b, timings, sc.jobs)
	requests := statsDelta(client.Stats(), before)
	if rec != nil {
		traceExchanges(os.Stdout, sc.name, rec.Exchanges()[nrec:], queued, timings)
	}
	// The hatchery's inventory reads the burst's last changes before it
	// is stopped: at the end of a burst its change watch is still
	// catching up (one poll of the burst's updates takes the simulator
	// up to a few seconds on a busy machine), and Close's cancel cut that
	// poll on the client only. The simulator cannot end a poll's
	// computation, so its server went on answering a client that had
	// gone, and the server's Close waited for it ("httptest.Server
	// blocked in Close after 5 seconds"). Stopped idle, the inventory
	// leaves nothing running. After the measurement: no figure changes.
	env.WaitInventory(inv)
	// Stop this scenario's simulator, inventory and clients now, not at
	// the end of the benchmark: left running, the simulator keeps
	// computing the change-watch updates of the burst (its property
	// collector copies every watched VM per change) on the same 2 cores
	// while the next scenarios are measured, and their "overhead" grew
	// with every scenario before them.
	env.Close()
	r := latencyOf(sc, cloneOp, timings)
	r.requests = requests
	return r
}

// statsDelta returns after - before, per method, without the methods that
// made no request meanwhile.
func statsDelta(after, before vcenter.SOAPStats) vcenter.SOAPStats {
	d := vcenter.SOAPStats{}
	for m, a := range after {
		p := before[m]
		if n := a.Requests - p.Requests; n > 0 {
			d[m] = vcenter.SOAPMethodStats{Requests: n, RequestBytes: a.RequestBytes - p.RequestBytes, ResponseBytes: a.ResponseBytes - p.ResponseBytes}
		}
	}
	return d
}

// modelledStage is the modelled duration of a stage of a spawn from pool
// (0: the hatchery's own work, or a guest program that starts at once). A
// hot claim's power-on stage is the resume and the check (the guest
// answers after the resume of a suspended VM, at once when it runs), and
// its guest is ready by the IP stage.
func modelledStage(s spawntiming.Stage, pool, cloneOp string) time.Duration {
	if pool == "instant" {
		// The fork's task, then the child's re-identification from its
		// guestinfo until it reports its address; no power-on, no launch
		// (cloud-init's guestinfo starts the worker).
		switch s {
		case spawntiming.StageClone:
			return vcsimtest.Modelled(vcsimtest.OpInstantCloneTask)
		case spawntiming.StageIP:
			return vcsimtest.Modelled(vcsimtest.OpInstantReidentify)
		}
		return 0
	}
	hot := pool == "suspended" || pool == "powered-on"
	switch {
	case hot && s == spawntiming.StagePowerOn && pool == "suspended":
		return vcsimtest.Modelled(vcsimtest.OpPowerOn) + vcsimtest.Modelled(vcsimtest.OpResume)
	case hot && (s == spawntiming.StagePowerOn || s == spawntiming.StageIP):
		return 0
	}
	switch s {
	case spawntiming.StageClone:
		return vcsimtest.Modelled(cloneOp) + vcsimtest.Modelled(vcsimtest.OpPowerOn)
	case spawntiming.StageClaim:
		// One reconfigure renames the VM and writes its record.
		return vcsimtest.Modelled(vcsimtest.OpReconfigure)
	case spawntiming.StagePowerOn:
		return vcsimtest.Modelled(vcsimtest.OpPowerOn)
	case spawntiming.StageIP:
		return vcsimtest.Modelled(vcsimtest.OpGuestReady)
	case spawntiming.StageLaunch:
		// The annotation write after the launch is not in the stage; the
		// launch itself is a guest program start.
		return 0
	}
	return 0
}

func latencyOf(sc latencyScenario, cloneOp string, timings []spawntiming.Timing) latencyResult {
	r := latencyResult{scenario: sc, stageOverhead: map[spawntiming.Stage][]time.Duration{}}
	// Ideal task-slot wait: the i-th job (by the time it spent before its
	// clone or claim was sent plus that stage) waited floor(i/slots)
	// modelled task durations.
	order := make([]int, len(timings))
	for i := range order {
		order[i] = i
	}
	first := func(t spawntiming.Timing) time.Duration {
		var d time.Duration
		for _, s := range t.Stages {
			d += s.D
			if s.Stage == spawntiming.StageClone || s.Stage == spawntiming.StageClaim {
				return d
			}
		}
		return d
	}
	sort.Slice(order, func(a, b int) bool { return first(timings[order[a]]) < first(timings[order[b]]) })
	for rank, i := range order {
		t := timings[i]
		var modelled time.Duration
		for _, s := range t.Stages {
			m := modelledStage(s.Stage, sc.pool, cloneOp)
			if s.Stage == spawntiming.StageClone || s.Stage == spawntiming.StageClaim {
				m += time.Duration(rank/sc.tasks) * modelledStage(s.Stage, sc.pool, cloneOp)
			}
			if s.Stage == spawntiming.StageQueueToBook {
				m = s.D // booked when queued: the burst's own fan-out, not modelled
			}
			modelled += m
			r.stageOverhead[s.Stage] = append(r.stageOverhead[s.Stage], s.D-m)
		}
		r.jobStart = append(r.jobStart, t.JobStart)
		r.overhead = append(r.overhead, t.JobStart-modelled)
	}
	return r
}

// pct is the p-th percentile (nearest rank) of ds.
func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func sec(d time.Duration) string { return fmt.Sprintf("%.2f", d.Seconds()) }

func printLatency(w io.Writer, results []latencyResult) {
	vcsimtest.PrintLatencyModel(w)
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%-34s %5s %5s | %8s %8s %8s | %12s %12s\n", "scenario (times in s, modelled)", "jobs", "tasks", "p50", "p95", "max", "overhead p50", "overhead p95")
	var burst, hot, fresh, instant, instantOver8, instantOver50 time.Duration
	for _, r := range results {
		fmt.Fprintf(w, "%-34s %5d %5d | %8s %8s %8s | %12s %12s\n", r.scenario.name, r.scenario.jobs, r.scenario.tasks,
			sec(pct(r.jobStart, 0.5)), sec(pct(r.jobStart, 0.95)), sec(pct(r.jobStart, 1)),
			sec(pct(r.overhead, 0.5)), sec(pct(r.overhead, 0.95)))
		switch {
		case r.scenario.pool == "instant" && r.scenario.jobs == 50:
			instantOver50 = pct(r.overhead, 0.95)
		case r.scenario.pool == "instant":
			instant, instantOver8 = pct(r.jobStart, 0.5), pct(r.overhead, 0.95)
		case r.scenario.jobs == 50:
			burst = pct(r.overhead, 0.95)
		case r.scenario.pool == "suspended":
			hot = pct(r.jobStart, 0.5)
		case r.scenario.pool == "none" && r.scenario.linked:
			fresh = pct(r.jobStart, 0.5)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "overhead per stage, p95 (measured - modelled, s):")
	for _, r := range results {
		var parts []string
		for _, s := range spawntiming.Stages {
			if s == spawntiming.StageQueueToBook {
				continue
			}
			if d, ok := r.stageOverhead[s]; ok {
				parts = append(parts, fmt.Sprintf("%s=%s", s, sec(pct(d, 0.95))))
			}
		}
		fmt.Fprintf(w, "  %-34s %s\n", r.scenario.name, strings.Join(parts, " "))
	}
	ratio := 0.0
	if fresh > 0 {
		ratio = hot.Seconds() / fresh.Seconds()
	}
	fmt.Fprintf(w, "hot/fresh p50 ratio: %.3f; overhead p95: %s s\n", ratio, sec(burst))
	iratio := 0.0
	if fresh > 0 {
		iratio = instant.Seconds() / fresh.Seconds()
	}
	fmt.Fprintf(w, "instant/linked p50 ratio: %.3f\n", iratio)
	fmt.Fprintf(w, "instant overhead p95: burst 8 %s s, burst 50 %s s\n", sec(instantOver8), sec(instantOver50))
}

// latencyModelFile loads, once, the latency model file named by
// $LATENCY_MODEL (`make bench-latency LATENCY_MODEL=FILE`: what `vcenter
// check --latency-model` measured on an operator's vCenter) in place of
// the model's own figures; unset, the model is the project's.
var latencyModelFile = sync.OnceValue(func() error {
	path := os.Getenv("LATENCY_MODEL")
	if path == "" {
		return nil
	}
	return vcsimtest.UseLatencyFile(path)
})

func useLatencyModelFile(b *testing.B) {
	b.Helper()
	if err := latencyModelFile(); err != nil {
		b.Fatal(err)
	}
}
