package vsphere_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/daemon"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/internal/vsphere"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// The inventory benchmarks: what the hatchery costs vCenter in each inventory
// mode, on vcsim with 1,000 and 5,000 VMs (all but the template foreign,
// registered straight in the simulator's registry). Run them with
//
//	make bench   # go test -run '^$' -bench BenchmarkInventoryModes -benchtime 1x ./internal/vsphere/
//
// Every figure comes from counters: the adapter's SOAP counters (requests
// and bytes by method, vcenter.Client.Stats) and a decorator over the
// vcenter.Port that counts ListVirtualMachines calls and timestamps
// CloneVirtualMachine submissions. One scenario runs per sub-benchmark
// whatever b.N is, so -benchtime 1x is the intended setting.
//
// Environment knobs (defaults in brackets): HATCHERY_VSPHERE_BENCH_SIZES
// [1000,5000], HATCHERY_VSPHERE_BENCH_BURST [200],
// HATCHERY_VSPHERE_BENCH_MODES [spec,listing,shared,watch].

// benchClient decorates the hatchery's vcenter.Port: it counts listings
// and records when each clone is submitted (before the task-slot wait, so a
// bounded MaxConcurrentTasks shows in the burst time, not in the decision).
type benchClient struct {
	vcenter.Port
	lists atomic.Int64

	mu     sync.Mutex
	clones map[string]time.Time
}

func newBenchClient(c vcenter.Port) *benchClient {
	return &benchClient{Port: c, clones: map[string]time.Time{}}
}

func (c *benchClient) ListVirtualMachines(ctx context.Context) ([]vctypes.VMInfo, error) {
	c.lists.Add(1)
	return c.Port.ListVirtualMachines(ctx)
}

func (c *benchClient) CloneVirtualMachine(ctx context.Context, vm types.ManagedObjectReference, folder types.ManagedObjectReference, name string, spec *types.VirtualMachineCloneSpec) (*types.ManagedObjectReference, error) {
	c.mu.Lock()
	c.clones[name] = time.Now()
	c.mu.Unlock()
	return c.Port.CloneVirtualMachine(ctx, vm, folder, name, spec)
}

func (c *benchClient) cloneAt(name string) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.clones[name]
	return t, ok
}

// refusals counts the details (the `detail` key) of "cannot spawn" and "spawn failed" log
// lines, to explain failed burst spawns.
type refusals struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *refusals) Enabled(context.Context, slog.Level) bool { return true }
func (r *refusals) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *refusals) WithGroup(string) slog.Handler            { return r }
func (r *refusals) Handle(_ context.Context, rec slog.Record) error {
	if rec.Message != "cannot spawn" && rec.Message != "spawn failed" {
		return nil
	}
	reason := ""
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "detail" {
			reason = a.Value.String()
			if i := strings.IndexAny(reason, ":"); i > 0 {
				reason = reason[:i]
			}
		}
		return true
	})
	r.mu.Lock()
	r.n[rec.Message+": "+reason]++
	r.mu.Unlock()
	return nil
}

func (r *refusals) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var parts []string
	for k, v := range r.n {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

// benchResult is one row of the printed table.
type benchResult struct {
	vms  int
	mode string

	jobs               int
	jobReqs, jobBytes  float64 // SOAP per spawned job, inventory refreshes included
	jobListings        float64 // ListVirtualMachines on the job path (hatchery client)
	jobRefreshes       float64 // inventory refreshes per job (shared: triggered by the job's writes)
	listingBytes       float64 // bytes of one full listing
	decP50, decP99     time.Duration
	burst              int
	burstSubmitted     time.Duration
	burstFailed        int
	burstWhy           string
	idleReqs, idleMB   float64 // per minute
	idleDetail         string
	jobsNote           string  // why per-job and burst figures were not run
	resyncReqs         float64 // watch mode: the first refresh (a resync) and the two after it
	resyncBytes        float64
	metricsPass        time.Duration
	heapMB             float64
	heapNote           string
	perMethodPerJobTop string
}

var (
	benchResultsMu sync.Mutex
	benchResults   []benchResult
)

func benchSizes(b *testing.B) []int {
	s := os.Getenv("HATCHERY_VSPHERE_BENCH_SIZES")
	if s == "" {
		return []int{1000, 5000}
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			b.Fatalf("HATCHERY_VSPHERE_BENCH_SIZES=%q: %v", s, err)
		}
		out = append(out, n)
	}
	return out
}

func benchBurst(b *testing.B) int {
	if s := os.Getenv("HATCHERY_VSPHERE_BENCH_BURST"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("HATCHERY_VSPHERE_BENCH_BURST=%q: %v", s, err)
		}
		return n
	}
	return 200
}

// BenchmarkInventoryModes runs the scenario for each size and mode, then
// prints the table and checks the inventory targets against the figures.
func BenchmarkInventoryModes(b *testing.B) {
	benchResultsMu.Lock()
	benchResults = nil
	benchResultsMu.Unlock()
	for _, n := range benchSizes(b) {
		for _, mode := range benchModes() {
			b.Run(fmt.Sprintf("vms=%d/mode=%s", n, mode), func(b *testing.B) {
				r := runInventoryScenario(b, n, mode)
				b.ReportMetric(r.jobReqs, "soap-req/job")
				b.ReportMetric(r.jobBytes, "soap-B/job")
				b.ReportMetric(r.jobListings, "listings/job")
				b.ReportMetric(r.idleReqs, "idle-req/min")
				b.ReportMetric(r.idleMB*1e6, "idle-B/min")
				b.ReportMetric(float64(r.decP50.Microseconds())/1000, "decision-p50-ms")
				b.ReportMetric(float64(r.decP99.Microseconds())/1000, "decision-p99-ms")
				b.ReportMetric(r.burstSubmitted.Seconds(), "burst-s")
				b.ReportMetric(float64(r.metricsPass.Microseconds())/1000, "metrics-pass-ms")
				b.ReportMetric(r.heapMB, "heap-MB")
				benchResultsMu.Lock()
				benchResults = append(benchResults, r)
				benchResultsMu.Unlock()
			})
		}
	}
	benchResultsMu.Lock()
	printBenchTable(os.Stdout, benchResults)
	benchResultsMu.Unlock()
	benchIdleWatchSteady(b)
}

// benchModes are the modes measured: the whole-object baseline (whole objects
// listed by every decision, test-only), the product's leaf-property listing
// mode, the shared inventory refreshed by listings, and the watch inventory
// (the default).
func benchModes() []string {
	if s := os.Getenv("HATCHERY_VSPHERE_BENCH_MODES"); s != "" {
		return strings.Split(s, ",")
	}
	return []string{benchModeSpec, config.InventoryListing, config.InventoryShared, config.InventoryWatch}
}

// benchJobs is how many jobs are spawned one after the other for the
// per-job and decision-latency figures: fewer where each costs seconds.
func benchJobs(n int, mode string) int {
	switch {
	case mode == benchModeSpec && n >= 5000:
		return 3
	case mode == benchModeSpec:
		return 5
	case mode == config.InventoryListing && n >= 5000:
		return 5
	case mode == config.InventoryListing:
		return 10
	default:
		return 30
	}
}

// benchV2Model is a V2 model cloned from the simulator's template.
func benchV2Model() sdk.WorkerStarterWorkerModel {
	return sdk.WorkerStarterWorkerModel{
		ModelV2:     &sdk.V2WorkerModel{Name: "bench", Type: sdk.VSphere},
		VSphereSpec: sdk.V2WorkerModelVSphereSpec{Image: vcsimtest.DefaultTemplate, Username: vcsimtest.DefaultGuestUser, Password: vcsimtest.DefaultGuestPassword},
		Cmd:         "./worker --name={{.Name}}",
	}
}

const benchHatchery = "hatch-bench"

// spawnJob drives a job through the framework's calls: CanSpawn,
// CanAllocateResources, SpawnWorker. It returns the decision start.
func spawnJob(ctx context.Context, h *vsphere.HatcheryVSphere, jobID, worker string) (time.Time, error) {
	model := benchV2Model()
	start := time.Now()
	if r := h.CanSpawn(ctx, model, jobID, nil); r != nil {
		return start, fmt.Errorf("job %s: cannot spawn: %w", jobID, r)
	}
	ok, err := h.CanAllocateResources(ctx, model, jobID, nil)
	if err != nil || !ok {
		return start, fmt.Errorf("job %s: cannot allocate: %v", jobID, err)
	}
	wc := spawn.WorkerConfig{Name: worker, HatcheryName: benchHatchery, APIEndpoint: "http://api", APIToken: "jwt", RunJobID: jobID, Model: "bench"}
	return start, h.SpawnWorker(ctx, spawn.Arguments{
		WorkerName: worker, JobID: jobID, HatcheryName: benchHatchery, WorkerConfig: wc, Model: model,
	})
}

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func runInventoryScenario(b *testing.B, n int, mode string) benchResult {
	r := benchResult{vms: n, mode: mode, burst: benchBurst(b)}
	if mode == benchModeSpec {
		// Whole-object listings by each of hundreds of concurrent jobs take
		// minutes in vcsim: the baseline's burst is not measured.
		r.burst = 0
	}
	env := vcsimtest.Start(b, vcsimtest.Options{ForeignVMs: n})
	env.SetResourcePoolRuntime(func(rt *types.ResourcePoolRuntimeInfo) {
		rt.Memory.UnreservedForVm = 1 << 50
		rt.Cpu.UnreservedForVm = 1 << 40
	})
	ctx := env.Context()

	cfg := new(config.Config)
	*cfg = config.Default()
	base := env.Config()
	cfg.User, cfg.Endpoint, cfg.Password, cfg.CAFile = base.User, base.Endpoint, base.Password, base.CAFile
	cfg.DatacenterString, cfg.DatastoreString, cfg.NetworkString = base.DatacenterString, base.DatastoreString, base.NetworkString
	cfg.ResourcePoolString, cfg.FolderString, cfg.CardName = base.ResourcePoolString, base.FolderString, base.CardName
	cfg.CommonConfiguration.Name = benchHatchery
	cfg.IPRange, cfg.Gateway, cfg.SubnetMask, cfg.DNS = "10.60.0.10/20", "10.60.0.1", "255.255.240.0", "10.60.0.2"
	cfg.InventoryMode = mode
	if mode == benchModeSpec {
		cfg.InventoryMode = config.InventoryListing
	}

	// Baseline heap: simulator and fixtures built, no hatchery yet.
	heapBase := heapAlloc()

	// The production client: default poll interval, MaxConcurrentTasks
	// from the configuration (VCenterConfig).
	gc := env.NewClient(func(c *vcenter.Config) {
		c.PollInterval = vcenter.DefaultPollInterval
		c.MaxConcurrentTasks = daemon.VCenterConfig(cfg).MaxConcurrentTasks
	})
	hc := newBenchClient(gc) // the hatchery's port: job path and loops
	ic := newBenchClient(gc) // the inventory owner's port: refreshes
	why := &refusals{n: map[string]int{}}
	log := slog.New(why)
	inv, run, err := inventory.New(cfg, ic, log)
	if err != nil {
		b.Fatal(err)
	}
	var spec *specListingInventory
	switch mode {
	case config.InventoryListing:
		inv = inventory.Listing{Client: hc} // listings are the job path's own
	case benchModeSpec:
		spec = &specListingInventory{client: gc}
		inv = spec
	}
	listings := func() int64 { // listings on the job path
		if spec != nil {
			return spec.lists.Load()
		}
		return hc.lists.Load()
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	preRun := gc.Stats()
	wg.Add(1)
	go func() { defer wg.Done(); run(runCtx) }()
	b.Cleanup(func() { stop(); wg.Wait() })

	h, err := vsphere.New(vsphere.Options{Config: cfg, Client: hc, CDS: warmVcsimAPI(), Inventory: inv, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	m, err := metrics.New(fmt.Sprintf("bench-%d-%s", n, mode))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(m.Close)
	m.Logger = log
	m.SOAP = daemon.SOAPHook(gc)
	m.Headroom = h.FlavorHeadroom

	// Warm-up: first snapshot, one pass of every loop.
	if _, err := inv.VMs(ctx); err != nil {
		b.Fatal(err)
	}
	if mode == config.InventoryWatch {
		// A resync (the first refresh) and the refreshes after it: the
		// watch's start-up cost, paid again every watch resync interval.
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		if err := inv.(*inventory.Shared).WaitRefresh(wctx); err != nil {
			b.Fatal(err)
		}
		cancel()
		d := gc.Stats().Sub(preRun).Total()
		r.resyncReqs, r.resyncBytes = float64(d.Requests), float64(d.RequestBytes+d.ResponseBytes)
	}
	h.WarmProvisioningPass(ctx)
	h.WarmKillAwolServersPass(ctx)
	h.BenchKillDisabledWorkersPass(ctx)
	h.BenchCollectMetrics(ctx, m)
	r.heapMB = float64(int64(heapAlloc())-int64(heapBase)) / 1e6
	r.heapNote = "heap after warm-up minus heap before the hatchery was built (vcsim runs in-process)"

	// Idle: one pass of each loop, its SOAP delta, times passes per minute
	// at the default intervals.
	type pass struct {
		name   string
		perMin float64
		fn     func()
	}
	perMin := func(seconds int) float64 { return 60 / float64(seconds) }
	passes := []pass{
		{"provisioning", perMin(config.DefaultWorkerProvisioningInterval), func() { h.WarmProvisioningPass(ctx) }},
		{"killAwolServers", perMin(config.DefaultKillAwolServersInterval), func() { h.WarmKillAwolServersPass(ctx) }},
		{"killDisabledWorkers", perMin(config.DefaultKillDisabledWorkersInterval), func() { h.BenchKillDisabledWorkersPass(ctx) }},
		{"metrics", 60 / metrics.Interval.Seconds(), func() {
			t0 := time.Now()
			h.BenchCollectMetrics(ctx, m)
			r.metricsPass = time.Since(t0)
		}},
	}
	if mode == config.InventoryShared {
		passes = append(passes, pass{"inventoryRefresh", perMin(config.DefaultInventoryRefreshInterval), func() {
			if _, err := ic.ListVirtualMachines(ctx); err != nil { // what one refresh does
				b.Fatal(err)
			}
		}})
	}
	var watchCycles float64
	if mode == config.InventoryWatch {
		// Real refreshes of the running owner loop (WaitRefresh waits for
		// two): their cost is divided by how many ran.
		s := inv.(*inventory.Shared)
		passes = append(passes, pass{"inventoryRefresh", perMin(config.DefaultInventoryRefreshInterval), func() {
			r0 := s.Stats().Refreshes
			wctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			if err := s.WaitRefresh(wctx); err != nil {
				b.Fatal(err)
			}
			watchCycles = max(1, float64(s.Stats().Refreshes-r0))
		}})
	}
	var details []string
	for _, p := range passes {
		before := gc.Stats()
		watchCycles = 1
		p.fn()
		d := gc.Stats().Sub(before).Total()
		reqs, bytes := float64(d.Requests)/watchCycles, float64(d.RequestBytes+d.ResponseBytes)/watchCycles
		r.idleReqs += reqs * p.perMin
		r.idleMB += bytes * p.perMin / 1e6
		details = append(details, fmt.Sprintf("%s %.0f req %.1f KB ×%.1f/min", p.name, reqs, bytes/1e3, p.perMin))
	}
	if mode == config.InventoryWatch {
		perMin := 1 / vsphere.WatchResyncInterval.Minutes()
		r.idleReqs += r.resyncReqs * perMin
		r.idleMB += r.resyncBytes * perMin / 1e6
		details = append(details, fmt.Sprintf("watch resync and the refreshes after it %.0f req %.0f KB ×%.3f/min", r.resyncReqs, r.resyncBytes/1e3, perMin))
	}
	r.idleDetail = strings.Join(details, "; ")
	{
		before := gc.Stats()
		list := func() error { _, err := gc.ListVirtualMachines(ctx); return err }
		if spec != nil {
			list = func() error { _, err := spec.VMs(ctx); return err }
		}
		if err := list(); err != nil {
			b.Fatal(err)
		}
		d := gc.Stats().Sub(before).Total()
		r.listingBytes = float64(d.RequestBytes + d.ResponseBytes)
	}

	if mode == config.InventoryWatch {
		// The simulator recomputes every filter of a collector for every
		// change anywhere in its inventory (WaitForUpdatesEx, vcsim
		// v0.56.0): with 1,000 VMs watched, the first refresh after a
		// spawn takes over a minute of simulator CPU, where vCenter sends
		// the changed properties only. Per-job and burst figures of this
		// mode would measure the simulator: they are not run.
		r.jobsNote = "not run: vcsim recomputes every watch filter for every change"
		return r
	}

	// Per job, one after the other: SOAP and listings per job, decision
	// latency (CanSpawn → clone submitted).
	r.jobs = benchJobs(n, mode)
	before := gc.Stats()
	hl0, il0 := listings(), ic.lists.Load()
	var lat []time.Duration
	for i := range r.jobs {
		job, worker := fmt.Sprintf("seq-%d", i), fmt.Sprintf("worker-seq-%d", i)
		t0, err := spawnJob(ctx, h, job, worker)
		if err != nil {
			b.Fatalf("sequential spawn: %v", err)
		}
		at, ok := hc.cloneAt(worker)
		if !ok {
			b.Fatalf("job %s: no clone submitted", job)
		}
		lat = append(lat, at.Sub(t0))
	}
	// Refreshes the last jobs' writes asked for are the jobs' cost too.
	if s, ok := inv.(*inventory.Shared); ok {
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		if err := s.WaitRefresh(wctx); err != nil {
			b.Fatal(err)
		}
		cancel()
	}
	d := gc.Stats().Sub(before)
	t := d.Total()
	r.jobReqs = float64(t.Requests) / float64(r.jobs)
	r.jobBytes = float64(t.RequestBytes+t.ResponseBytes) / float64(r.jobs)
	r.jobListings = float64(listings()-hl0) / float64(r.jobs)
	r.jobRefreshes = float64(ic.lists.Load()-il0) / float64(r.jobs)
	r.perMethodPerJobTop = topMethods(d, r.jobs)
	r.decP50, r.decP99 = percentile(lat, 50), percentile(lat, 99)

	// Burst: r.burst jobs at once; time until every clone is submitted.
	var failed atomic.Int64
	var bwg sync.WaitGroup
	startAll := make(chan struct{})
	for i := range r.burst {
		bwg.Add(1)
		go func() {
			defer bwg.Done()
			<-startAll
			if _, err := spawnJob(ctx, h, fmt.Sprintf("burst-%d", i), fmt.Sprintf("worker-burst-%d", i)); err != nil {
				failed.Add(1)
			}
		}()
	}
	t0 := time.Now()
	close(startAll)
	bwg.Wait()
	var last time.Time
	for i := range r.burst {
		at, ok := hc.cloneAt(fmt.Sprintf("worker-burst-%d", i))
		if ok && at.After(last) {
			last = at
		}
	}
	if !last.IsZero() {
		r.burstSubmitted = last.Sub(t0)
	}
	r.burstFailed = int(failed.Load())
	r.burstWhy = why.String()
	return r
}

func topMethods(d vcenter.SOAPStats, jobs int) string {
	type kv struct {
		k string
		v vcenter.SOAPMethodStats
	}
	var all []kv
	for k, v := range d {
		all = append(all, kv{k, v})
	}
	sort.Slice(all, func(i, j int) bool {
		return all[i].v.RequestBytes+all[i].v.ResponseBytes > all[j].v.RequestBytes+all[j].v.ResponseBytes
	})
	var parts []string
	for i, e := range all {
		if i == 4 {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.1f req %.0f KB", e.k, float64(e.v.Requests)/float64(jobs), float64(e.v.RequestBytes+e.v.ResponseBytes)/float64(jobs)/1e3))
	}
	return strings.Join(parts, ", ")
}

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	if i < 1 {
		i = 1
	}
	return s[i-1]
}

func printBenchTable(w io.Writer, rs []benchResult) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Inventory modes — hatchery cost to vCenter (vcsim, figures from the SOAP counters and a counting client decorator)")
	fmt.Fprintf(w, "%-6s %-8s %5s %10s %11s %9s %9s %10s %11s %9s %9s %12s %9s %8s\n",
		"VMs", "mode", "jobs", "req/job", "KB/job", "lists/job", "refr/job", "idle req/m", "idle MB/min", "dec p50", "dec p99", "burst", "metrics", "heap MB")
	for _, r := range rs {
		if r.jobsNote != "" {
			fmt.Fprintf(w, "%-6d %-8s %5s %10s %11s %9s %9s %10.1f %11.2f %9s %9s %12s %9s %8.1f\n",
				r.vms, r.mode, "-", "-", "-", "-", "-", r.idleReqs, r.idleMB, "-", "-", "not run", r.metricsPass.Round(10*time.Microsecond), r.heapMB)
			continue
		}
		burst := fmt.Sprintf("%d in %.2fs", r.burst, r.burstSubmitted.Seconds())
		switch {
		case r.burst == 0:
			burst = "not run"
		case r.burstSubmitted == 0:
			burst = fmt.Sprintf("%d: none", r.burst)
		}
		if r.burstFailed > 0 {
			burst += fmt.Sprintf(" (%d failed)", r.burstFailed)
		}
		fmt.Fprintf(w, "%-6d %-8s %5d %10.1f %11.1f %9.2f %9.2f %10.1f %11.2f %9s %9s %12s %9s %8.1f\n",
			r.vms, r.mode, r.jobs, r.jobReqs, r.jobBytes/1e3, r.jobListings, r.jobRefreshes, r.idleReqs, r.idleMB,
			r.decP50.Round(10*time.Microsecond), r.decP99.Round(10*time.Microsecond), burst, r.metricsPass.Round(10*time.Microsecond), r.heapMB)
	}
	fmt.Fprintln(w)
	for _, r := range rs {
		if r.jobsNote != "" {
			fmt.Fprintf(w, "%d/%s: one listing %.0f KB; per job and burst %s\n", r.vms, r.mode, r.listingBytes/1e3, r.jobsNote)
		} else {
			fmt.Fprintf(w, "%d/%s: one listing %.0f KB; per job by method: %s\n", r.vms, r.mode, r.listingBytes/1e3, r.perMethodPerJobTop)
		}
		fmt.Fprintf(w, "%d/%s idle passes: %s\n", r.vms, r.mode, r.idleDetail)
		if r.burstWhy != "" {
			fmt.Fprintf(w, "%d/%s refusals and failures logged: %s\n", r.vms, r.mode, r.burstWhy)
		}
	}
	fmt.Fprintln(w, `
Modes: spec = the whole-object baseline (whole objects, test-only); listing = leaf listing on every
read; shared = one inventory refreshed by listings; watch = one inventory refreshed from a change
watch (the default inventoryMode).
Method: per job = SOAP counter delta over the sequential jobs (CanSpawn, CanAllocateResources,
SpawnWorker to worker launched), shared-inventory refreshes their writes triggered included, divided by
the jobs; lists/job counts ListVirtualMachines on the job path, refr/job the inventory owner's refreshes.
Idle = the SOAP delta of one pass of each loop (provisioning with no entries, killAwolServers,
killDisabledWorkers, metrics collection, and in shared mode one inventory refresh) times its passes per
minute at the default intervals (provisioning/awol/disabled 120 s, metrics 30 s, inventory 60 s). In
watch mode the inventory refresh is the running owner loop's (SOAP delta over two real refreshes, halved),
and the watch's resync (its first refresh and the two after it, measured at start) counts once per hour.
Decision latency = CanSpawn start → CloneVirtualMachine submitted (sequential jobs). Burst = time from
starting all jobs at once to the last clone submitted. Heap = after GC, after warm-up, minus before the
hatchery was built (vcsim runs in the same process).`)

	// Targets of the inventory work, checked on the figures above.
	find := func(n int, mode string) (benchResult, bool) {
		for _, r := range rs {
			if r.vms == n && r.mode == mode {
				return r, true
			}
		}
		return benchResult{}, false
	}
	check := func(name string, ok bool, detail string) {
		v := "MET"
		if !ok {
			v = "MISSED"
		}
		fmt.Fprintf(w, "target %-62s %-6s %s\n", name, v, detail)
	}
	fmt.Fprintln(w)
	for _, r := range rs {
		if r.mode != benchModeSpec && r.mode != config.InventoryListing && r.jobsNote == "" {
			check(fmt.Sprintf("%d VMs %s: zero full listings per job", r.vms, r.mode), r.jobListings == 0, fmt.Sprintf("%.2f", r.jobListings))
		}
	}
	// Ratios of the inventory modes against both references: the
	// whole-object baseline and the product's leaf listing.
	refs := []struct{ mode, label string }{
		{benchModeSpec, "whole-object baseline (listing per decision)"},
		{config.InventoryListing, "leaf listing (listing per decision)"},
	}
	for _, inv := range inventoryModes(rs) {
		for _, ref := range refs {
			l, ok := find(1000, ref.mode)
			s, ok2 := find(1000, inv)
			if !ok || !ok2 {
				continue
			}
			check(fmt.Sprintf("1000 VMs idle %s: bytes/min ≥50× below %s", inv, ref.mode), s.idleMB*50 <= l.idleMB,
				fmt.Sprintf("%.2f vs %.2f MB/min (%.1f×) — vs %s", s.idleMB, l.idleMB, l.idleMB/s.idleMB, ref.label))
			check(fmt.Sprintf("1000 VMs idle %s: req/min ≤ ⅓ of %s", inv, ref.mode), s.idleReqs*3 <= l.idleReqs,
				fmt.Sprintf("%.1f vs %.1f (%.1f×) — vs %s", s.idleReqs, l.idleReqs, l.idleReqs/s.idleReqs, ref.label))
		}
		for _, ref := range refs {
			l, ok := find(5000, ref.mode)
			s, ok2 := find(5000, inv)
			if !ok || !ok2 || s.jobsNote != "" {
				continue
			}
			check(fmt.Sprintf("5000 VMs %s: SOAP bytes/job ≥20× below %s", inv, ref.mode), s.jobBytes*20 <= l.jobBytes,
				fmt.Sprintf("%.0f vs %.0f KB (%.1f×) — vs %s", s.jobBytes/1e3, l.jobBytes/1e3, l.jobBytes/s.jobBytes, ref.label))
		}
		if s, ok := find(5000, inv); ok {
			if s.jobsNote == "" {
				check(fmt.Sprintf("5000 VMs %s: spawn-decision p50 < 5 ms", inv), s.decP50 < 5*time.Millisecond, s.decP50.String())
			}
			check(fmt.Sprintf("5000 VMs %s: a metrics pass < 1 s", inv), s.metricsPass < time.Second, s.metricsPass.String())
			check(fmt.Sprintf("5000 VMs %s: heap < 150 MB", inv), s.heapMB < 150, fmt.Sprintf("%.1f MB", s.heapMB))
		}
	}
}

// inventoryModes are the measured modes that keep an inventory (not the
// two listing references).
func inventoryModes(rs []benchResult) []string {
	var out []string
	for _, r := range rs {
		if r.mode != benchModeSpec && r.mode != config.InventoryListing && !slices.Contains(out, r.mode) {
			out = append(out, r.mode)
		}
	}
	return out
}
