package vsphere_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// The steady idle cost of the watch inventory on a shared vCenter
// (docs/inventory-watch.md, "What it costs"): 50 VMs of ours in the
// hatchery's folder, a template in the template folder, and the rest of
// the datacenter other teams' VMs in their own folders. Printed as
//
//	idle watch steady: 1000 VMs A KB/min; 10000 VMs B KB/min
//
// with folderString and templateFolders set, then the same figures of the
// default configuration, printed as
//
//	idle default configuration: 1000 VMs A KB/min; 10000 VMs B KB/min; peak heap at 10000 VMs H MB
//
// (`config new`'s folderString and templateFolders, both empty: our VMs
// and the template in the VM folder's top level, where clones go by
// default; the scope is derived, internal/vcenter/govmomi_scope.go), with
// the peak of the live heap the hatchery's code holds (hatcheryHeapMB)
// over the run. The inventory runs alone on a client of its own, so the SOAP counters hold
// its requests only; the hatchery's loops make no idle request in watch
// mode (the idle passes of BenchmarkInventoryModes). Per minute: one
// steady refresh (the default inventoryRefreshInterval, 60 s), plus the
// hourly resync (replayed on a warm second session) divided by 60. The
// inventory's start-up (container views, the pool's lookup, the first
// resync) is printed apart: once per process. Knob: HATCHERY_VSPHERE_BENCH_STEADY_SIZES
// [1000,10000].

// Shape of the steady scenario.
const (
	steadyOurs      = 50
	steadyFolder    = "/DC0/vm/cds/hatch-bench"
	steadyTemplates = "/DC0/vm/cds/templates"
	// steadyRounds of WaitRefresh (three refreshes each) are measured.
	steadyRounds = 3
)

// steadyTeams are the other teams' folders the foreign VMs are spread over.
var steadyTeams = []string{
	"/DC0/vm/team-a", "/DC0/vm/team-b", "/DC0/vm/team-c/prod", "/DC0/vm/team-c/staging",
	"/DC0/vm/team-d", "/DC0/vm/legacy", "/DC0/vm/lab/ci", "/DC0/vm/lab/qa",
}

// steadyResult is one size and configuration's figure.
type steadyResult struct {
	vms                    int
	shape                  string  // steadyScoped, steadyDefault or steadyWhole
	peakHeapMB             float64 // the hatchery's live heap, largest sample
	refreshReqs, refreshKB float64 // one steady refresh
	resyncReqs, resyncKB   float64 // the hourly resync
	startReqs, startKB     float64 // the inventory's start: views, pool lookup, first resync, the refreshes after it
	perMinKB, perMinReqs   float64
	detail                 string
}

func steadySizes(b *testing.B) []int {
	s := os.Getenv("HATCHERY_VSPHERE_BENCH_STEADY_SIZES")
	if s == "" {
		return []int{1000, 10000}
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < steadyOurs {
			b.Fatalf("HATCHERY_VSPHERE_BENCH_STEADY_SIZES=%q: sizes of at least %d", s, steadyOurs)
		}
		out = append(out, n)
	}
	return out
}

// BenchmarkIdleWatchSteady runs the steady scenario alone (make bench
// runs it after BenchmarkInventoryModes).
func BenchmarkIdleWatchSteady(b *testing.B) { benchIdleWatchSteady(b) }

// The configurations measured.
const (
	steadyScoped  = "scoped"  // folderString and templateFolders set
	steadyDefault = "default" // config new's: both empty
	// steadyWhole is templateFolders = ["/DC0/vm"]: the whole VM folder,
	// what the default read before it was derived. Measured only with
	// HATCHERY_VSPHERE_BENCH_STEADY_WHOLE=1 (a listing of every VM).
	steadyWhole = "whole"
)

// benchIdleWatchSteady runs the steady scenario for each size, scoped and
// with the default configuration, and prints the lines and their targets.
func benchIdleWatchSteady(b *testing.B) {
	var rs []steadyResult
	shapes := []string{steadyScoped, steadyDefault}
	if os.Getenv("HATCHERY_VSPHERE_BENCH_STEADY_WHOLE") == "1" {
		shapes = append(shapes, steadyWhole)
	}
	for _, shape := range shapes {
		for _, n := range steadySizes(b) {
			b.Run(fmt.Sprintf("steady/vms=%d/config=%s", n, shape), func(b *testing.B) {
				r := runIdleWatchSteady(b, n, shape)
				b.ReportMetric(r.perMinKB, "idle-KB/min")
				rs = append(rs, r)
			})
		}
	}
	printSteady(os.Stdout, rs)
}

func runIdleWatchSteady(b *testing.B, n int, shape string) steadyResult {
	r := steadyResult{vms: n, shape: shape}
	opts := vcsimtest.Options{
		Folder:         steadyFolder,
		TemplateFolder: steadyTemplates,
		ForeignVMs:     n - steadyOurs,
		ForeignFolders: steadyTeams,
	}
	ourFolder := steadyFolder
	if shape != steadyScoped {
		// config new's defaults: clones and the template in the VM
		// folder's top level.
		opts.Folder, opts.TemplateFolder, ourFolder = "", "", vcsimtest.FolderPath
	}
	env := vcsimtest.Start(b, opts)
	heap := newHeapPeak()
	ours := make([]vcsimtest.ForeignVM, steadyOurs)
	for i := range ours {
		name := fmt.Sprintf("%s-worker-%02d", benchHatchery, i)
		ours[i] = vcsimtest.ForeignVM{
			Name:       name,
			Annotation: inventory.Annotation{HatcheryName: benchHatchery, WorkerName: name, Created: time.Now().UTC().Truncate(time.Second)}.Marshal(),
			PoweredOn:  true, NumCPU: 2, MemoryMB: 4096,
			IP: fmt.Sprintf("10.60.1.%d", 10+i),
		}
	}
	env.AddVMsIn(ourFolder, ours)

	cfg := env.Config()
	cfg.CommonConfiguration.Name = benchHatchery
	cfg.InventoryMode = config.InventoryWatch
	cfg.InventoryRefreshInterval = config.DefaultInventoryRefreshInterval
	switch shape {
	case steadyDefault:
		cfg.FolderString, cfg.TemplateFolders = "", nil
	case steadyWhole:
		cfg.FolderString, cfg.TemplateFolders = "", []string{vcsimtest.FolderPath}
	}
	// Every allocation of 4 KB on average is sampled from here on (the
	// default, one in 512 KB, gives no sample at all of a heap of a
	// megabyte), the hatchery's all included: the simulator's datacenter
	// is made before.
	defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
	runtime.MemProfileRate = 4096
	ic := env.NewClient(func(c *vcenter.Config) {
		c.PollInterval = vcenter.DefaultPollInterval
		c.Folder = cfg.FolderString
		c.TemplateFolders = cfg.TemplateFolders
	})
	// The session's start (login, the datacenter) is not the resync's:
	// counted from here.
	pre := ic.Stats()
	inv, run, err := inventory.New(cfg, ic, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	s := inv.(*inventory.Shared)
	ctx := env.Context()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); run(runCtx) }()
	b.Cleanup(func() { stop(); <-done })

	wait := func() {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		if err := s.WaitRefresh(wctx); err != nil {
			b.Fatal(err)
		}
	}
	// Start-up: the resync and the refreshes after it.
	vms, err := inv.VMs(ctx)
	if err != nil {
		b.Fatal(err)
	}
	wantVMs := steadyOurs + 1 // and the template
	if shape == steadyWhole {
		wantVMs = n + 1
	}
	if len(vms) != wantVMs {
		b.Fatalf("inventory holds %d vms, want %d", len(vms), wantVMs)
	}
	wait()
	heap.sample()
	st := ic.Stats().Sub(pre).Total()
	r.startReqs, r.startKB = float64(st.Requests), float64(st.RequestBytes+st.ResponseBytes)/1e3

	// The hourly resync, replayed on a second session of the same scope
	// with what watchResync (internal/inventory/watch.go) sends once its
	// session is warm (views made, the pool looked up once per process):
	// a new collector in place of the old one, the probe with the pool,
	// the filters, the leaf listing.
	rc := env.NewClient(func(c *vcenter.Config) {
		c.PollInterval = vcenter.DefaultPollInterval
		c.Folder = cfg.FolderString
		c.TemplateFolders = cfg.TemplateFolders
	})
	poolRef, err := rc.LoadResourcePool(ctx)
	if err != nil {
		b.Fatal(err)
	}
	pool := poolRef
	if err := rc.ResetVirtualMachineWatch(ctx); err != nil {
		b.Fatal(err)
	}
	if _, _, err := rc.ProbeInventory(ctx, &pool); err != nil {
		b.Fatal(err)
	}
	rpre := rc.Stats()
	if err := rc.ResetVirtualMachineWatch(ctx); err != nil {
		b.Fatal(err)
	}
	refs, _, err := rc.ProbeInventory(ctx, &pool)
	if err != nil {
		b.Fatal(err)
	}
	if err := rc.WatchVirtualMachines(ctx, refs); err != nil {
		b.Fatal(err)
	}
	listed, err := rc.ListVirtualMachines(ctx)
	if err != nil {
		b.Fatal(err)
	}
	rd := rc.Stats().Sub(rpre)
	heap.sample() // the listing held, as watchResync holds it
	runtime.KeepAlive(listed)
	t0 := rd.Total()
	r.resyncReqs, r.resyncKB = float64(t0.Requests), float64(t0.RequestBytes+t0.ResponseBytes)/1e3
	var rparts []string
	for m, v := range rd {
		rparts = append(rparts, fmt.Sprintf("%s %d req %.1f KB", m, v.Requests, float64(v.RequestBytes+v.ResponseBytes)/1e3))
	}
	sort.Strings(rparts)

	// Steady: refreshes with nothing changed.
	before, r0 := ic.Stats(), s.Stats().Refreshes
	for range steadyRounds {
		wait()
		heap.sample()
	}
	r.peakHeapMB = heap.peak
	d := ic.Stats().Sub(before)
	refreshes := float64(s.Stats().Refreshes - r0)
	t := d.Total()
	r.refreshReqs = float64(t.Requests) / refreshes
	r.refreshKB = float64(t.RequestBytes+t.ResponseBytes) / 1e3 / refreshes
	perMin := 60 / cfg.InventoryRefreshIntervalDuration().Seconds()
	perHour := 1 / inventory.WatchResyncInterval.Minutes()
	r.perMinKB = r.refreshKB*perMin + r.resyncKB*perHour
	r.perMinReqs = r.refreshReqs*perMin + r.resyncReqs*perHour
	var parts []string
	for m, v := range d {
		parts = append(parts, fmt.Sprintf("%s %.1f req %.1f KB", m, float64(v.Requests)/refreshes, float64(v.RequestBytes+v.ResponseBytes)/1e3/refreshes))
	}
	sort.Strings(parts)
	r.detail = fmt.Sprintf("per steady refresh (%0.f measured): %s; resync, once per %s: %.0f req %.1f KB (%s); start-up, once per process: %.0f req %.1f KB",
		refreshes, strings.Join(parts, ", "), inventory.WatchResyncInterval, r.resyncReqs, r.resyncKB, strings.Join(rparts, ", "), r.startReqs, r.startKB)
	return r
}

func printSteady(w io.Writer, rs []steadyResult) {
	line := func(shape string) (string, map[int]float64, map[int]float64) {
		var parts []string
		kb, heap := map[int]float64{}, map[int]float64{}
		for _, r := range rs {
			if r.shape == shape {
				parts = append(parts, fmt.Sprintf("%d VMs %.1f KB/min", r.vms, r.perMinKB))
				kb[r.vms], heap[r.vms] = r.perMinKB, r.peakHeapMB
			}
		}
		return strings.Join(parts, "; "), kb, heap
	}
	fmt.Fprintln(w)
	scopedLine, kb, _ := line(steadyScoped)
	fmt.Fprintf(w, "idle watch steady: %s\n", scopedLine)
	defLine, dkb, dheap := line(steadyDefault)
	if h, ok := dheap[10000]; ok {
		defLine += fmt.Sprintf("; peak heap at 10000 VMs %.1f MB", h)
	}
	fmt.Fprintf(w, "idle default configuration: %s\n", defLine)
	if wholeLine, _, wheap := line(steadyWhole); wholeLine != "" {
		if h, ok := wheap[10000]; ok {
			wholeLine += fmt.Sprintf("; peak heap at 10000 VMs %.1f MB", h)
		}
		fmt.Fprintf(w, "idle whole VM folder (templateFolders = [%q], the default before it was derived): %s\n", vcsimtest.FolderPath, wholeLine)
	}
	for _, r := range rs {
		fmt.Fprintf(w, "  %d VMs %s: %.2f req/min, peak heap %.1f MB; %s\n", r.vms, r.shape, r.perMinReqs, r.peakHeapMB, r.detail)
	}
	fmt.Fprintf(w, "  (%d VMs of ours, the template, the others in %d other teams' folders; scoped: ours in %s, the template in %s; default and whole: both in %s; the inventory's own session)\n",
		steadyOurs, len(steadyTeams), steadyFolder, steadyTemplates, vcsimtest.FolderPath)
	target := func(name string, kb map[int]float64, extra string, ok bool) {
		a, okA := kb[1000]
		bb, okB := kb[10000]
		if !okA || !okB {
			return
		}
		v := "MET"
		if !(a <= 20 && bb <= 1.5*a && ok) {
			v = "MISSED"
		}
		fmt.Fprintf(w, "target %s: 1000 VMs ≤ 20 KB/min and 10000 VMs ≤ 1.5× that%s   %s %.1f / %.1f KB/min (%.2f×)\n", name, extra, v, a, bb, bb/a)
	}
	target("idle watch steady", kb, "", true)
	h, okH := dheap[10000]
	target("idle default configuration", dkb, fmt.Sprintf(", peak heap ≤ 64 MB (%.1f MB)", h), !okH || h <= 64)
}

// heapPeak is the largest live heap the hatchery's code held over a run,
// sampled after each step (hatcheryHeapMB: the simulator, in the same
// process, holds every VM of the datacenter and is not counted).
type heapPeak struct{ peak float64 }

func newHeapPeak() *heapPeak { return &heapPeak{} }

// sample collects twice (the heap profile is the heap as of the last
// completed collection) and keeps the largest figure.
func (h *heapPeak) sample() {
	runtime.GC()
	runtime.GC()
	h.peak = max(h.peak, hatcheryHeapMB())
}

// benchModule is this repository's module path.
const benchModule = "github.com/cds-contrib/hatchery-vsphere/"

// benchSimulated are the packages of the bench's process that are not the
// hatchery: the simulator, its fixtures, and this bench's own code.
var benchSimulated = []string{benchModule + "internal/vcsimtest", benchModule + "internal/vsphere_test", "github.com/vmware/govmomi/simulator"}

// hatcheryHeapMB is the live heap the hatchery's code holds, in MB: the
// in-use bytes of the heap profile's records whose innermost frame of this
// repository or of govmomi's simulator is the hatchery's (not one of
// benchSimulated), scaled as pprof scales the sampled profile (the rule
// of internal/demo's daemonHeapMB, for the bench's process).
func hatcheryHeapMB() float64 {
	var buf bytes.Buffer
	if err := pprof.Lookup("heap").WriteTo(&buf, 1); err != nil {
		return 0
	}
	rate := float64(runtime.MemProfileRate)
	total := 0.0
	for _, line := range strings.Split(buf.String(), "\n") {
		head, pcs, ok := strings.Cut(line, " @ ")
		if !ok || strings.HasPrefix(line, "heap profile:") {
			continue
		}
		var inObj, inBytes, allocObj, allocBytes int64
		if _, err := fmt.Sscanf(head, "%d: %d [%d: %d]", &inObj, &inBytes, &allocObj, &allocBytes); err != nil || inBytes <= 0 {
			continue
		}
		var stk []uintptr
		for _, f := range strings.Fields(pcs) {
			if pc, err := strconv.ParseUint(f, 0, 64); err == nil {
				stk = append(stk, uintptr(pc))
			}
		}
		if !hatcheryStack(stk) {
			continue
		}
		scale := 1.0
		if rate > 1 && allocObj > 0 {
			avg := float64(allocBytes) / float64(allocObj)
			scale = 1 / (1 - math.Exp(-avg/rate))
		}
		total += float64(inBytes) * scale
	}
	return total / (1 << 20)
}

// hatcheryStack tells whether an allocation's innermost frame of this
// repository or of govmomi's simulator is the hatchery's.
func hatcheryStack(stk []uintptr) bool {
	frames := runtime.CallersFrames(stk)
	for {
		f, more := frames.Next()
		for _, p := range benchSimulated {
			if strings.HasPrefix(f.Function, p) {
				return false
			}
		}
		if strings.HasPrefix(f.Function, benchModule) {
			return true
		}
		if !more {
			return false
		}
	}
}
