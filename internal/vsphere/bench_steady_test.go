package vsphere_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
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
// with templateFolders set (the scope), then the same figures of the
// default configuration (no templateFolders: the whole VM folder). The
// inventory runs alone on a client of its own, so the SOAP counters hold
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

// steadyResult is one size and scope's figure.
type steadyResult struct {
	vms                    int
	scoped                 bool
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

// benchIdleWatchSteady runs the steady scenario for each size, scoped and
// unscoped, and prints the line and its target.
func benchIdleWatchSteady(b *testing.B) {
	var rs []steadyResult
	for _, scoped := range []bool{true, false} {
		for _, n := range steadySizes(b) {
			b.Run(fmt.Sprintf("steady/vms=%d/scoped=%t", n, scoped), func(b *testing.B) {
				r := runIdleWatchSteady(b, n, scoped)
				b.ReportMetric(r.perMinKB, "idle-KB/min")
				rs = append(rs, r)
			})
		}
	}
	printSteady(os.Stdout, rs)
}

func runIdleWatchSteady(b *testing.B, n int, scoped bool) steadyResult {
	r := steadyResult{vms: n, scoped: scoped}
	opts := vcsimtest.Options{
		Folder:         steadyFolder,
		TemplateFolder: steadyTemplates,
		ForeignVMs:     n - steadyOurs,
		ForeignFolders: steadyTeams,
	}
	env := vcsimtest.Start(b, opts)
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
	env.AddVMsIn(steadyFolder, ours)

	cfg := env.Config()
	cfg.CommonConfiguration.Name = benchHatchery
	cfg.InventoryMode = config.InventoryWatch
	cfg.InventoryRefreshInterval = config.DefaultInventoryRefreshInterval
	if !scoped {
		cfg.TemplateFolders = nil
	}
	ic := env.NewClient(func(c *vcenter.Config) {
		c.PollInterval = vcenter.DefaultPollInterval
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
	if !scoped {
		wantVMs = n + 1
	}
	if len(vms) != wantVMs {
		b.Fatalf("inventory holds %d vms, want %d", len(vms), wantVMs)
	}
	wait()
	st := ic.Stats().Sub(pre).Total()
	r.startReqs, r.startKB = float64(st.Requests), float64(st.RequestBytes+st.ResponseBytes)/1e3

	// The hourly resync, replayed on a second session of the same scope
	// with what watchResync (internal/inventory/watch.go) sends once its
	// session is warm (views made, the pool looked up once per process):
	// a new collector in place of the old one, the probe with the pool,
	// the filters, the leaf listing.
	rc := env.NewClient(func(c *vcenter.Config) {
		c.PollInterval = vcenter.DefaultPollInterval
		c.TemplateFolders = cfg.TemplateFolders
	})
	poolRef, err := rc.LoadResourcePool(ctx)
	if err != nil {
		b.Fatal(err)
	}
	pool := vcenter.MORef(poolRef)
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
	if _, err := rc.ListVirtualMachines(ctx); err != nil {
		b.Fatal(err)
	}
	rd := rc.Stats().Sub(rpre)
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
	}
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
	line := func(scoped bool) (string, map[int]float64) {
		var parts []string
		kb := map[int]float64{}
		for _, r := range rs {
			if r.scoped == scoped {
				parts = append(parts, fmt.Sprintf("%d VMs %.1f KB/min", r.vms, r.perMinKB))
				kb[r.vms] = r.perMinKB
			}
		}
		return strings.Join(parts, "; "), kb
	}
	fmt.Fprintln(w)
	scopedLine, kb := line(true)
	fmt.Fprintf(w, "idle watch steady: %s\n", scopedLine)
	unscopedLine, _ := line(false)
	fmt.Fprintf(w, "idle watch steady, default configuration (no templateFolders: the whole VM folder): %s\n", unscopedLine)
	for _, r := range rs {
		fmt.Fprintf(w, "  %d VMs scoped=%t: %.2f req/min; %s\n", r.vms, r.scoped, r.perMinReqs, r.detail)
	}
	fmt.Fprintf(w, "  (%d VMs of ours in %s, the template in %s, the others in %d other teams' folders; the inventory's own session)\n",
		steadyOurs, steadyFolder, steadyTemplates, len(steadyTeams))
	a, okA := kb[1000]
	bb, okB := kb[10000]
	if okA && okB {
		v := "MET"
		if !(a <= 20 && bb <= 1.5*a) {
			v = "MISSED"
		}
		fmt.Fprintf(w, "target idle watch steady: 1000 VMs ≤ 20 KB/min and 10000 VMs ≤ 1.5× that   %s %.1f / %.1f KB/min (%.2f×)\n", v, a, bb, bb/a)
	}
}
