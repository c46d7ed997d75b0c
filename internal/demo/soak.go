package demo

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The soak (`demo --soak D`, `make soak`, docs/operations.md#soak): the
// demo's steady trickle of jobs — every kind of model, the warm pool, both
// placements, the instant model's parents — for D, then the end of a
// --once run (the jobs fed finish, the checks), with the process's figures
// sampled all along: live heap, goroutines, open files. It fails when a
// figure keeps growing (soakLevels) or anything is logged at WARN.
//
// The figures are the demo process's: the daemon, and beside it the two
// simulators and the simulated workers. Whatever of theirs grows counts
// against the daemon: a false alarm is possible, a hidden leak of the
// daemon's is not.

// Soak's figures and their tolerances.
const (
	// soakSampleEvery is the period of the soak's samples (shorter for a
	// soak under 15 minutes: a thirtieth of it, at least a second).
	soakSampleEvery = 30 * time.Second
	// soakHeapTolerance and soakHeapSlackMB: the late window's largest
	// live heap may exceed the middle window's by 10 % plus 2 MB.
	soakHeapTolerance = 0.10
	soakHeapSlackMB   = 2.0
	// soakGoroutineTolerance and soakGoroutineSlack: 10 % plus 10
	// goroutines (the jobs in flight at a sample vary: each is a spawn, a
	// simulated worker and its requests).
	soakGoroutineTolerance = 0.10
	soakGoroutineSlack     = 10
	// soakFileSlack: 10 open files more (connections of the jobs in
	// flight, both simulators' listeners).
	soakFileSlack = 10
)

// soakSample is the process's figures at one moment.
type soakSample struct {
	at time.Duration // since the soak started
	// heapMB is the live heap the daemon's code holds (daemonHeapMB);
	// processMB the whole process's, the simulators' records included.
	heapMB     float64
	processMB  float64
	goroutines int
	files      int // entries of /proc/self/fd (-1: not readable)
	done       int // jobs done (worker ran, VM destroyed) by then
}

// soakMeter samples the process all along a soak.
type soakMeter struct {
	start time.Time
	every time.Duration
	done  func() int

	mu      sync.Mutex
	samples []soakSample
}

func newSoakMeter(d time.Duration, done func() int) *soakMeter {
	every := soakSampleEvery
	if d < 15*time.Minute {
		every = max(d/30, time.Second)
	}
	return &soakMeter{start: time.Now(), every: every, done: done}
}

// run samples every m.every until ctx ends, and calls progress after each
// sample.
func (m *soakMeter) run(ctx context.Context, progress func(soakSample)) {
	t := time.NewTicker(m.every)
	defer t.Stop()
	progress(m.sample())
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			progress(m.sample())
		}
	}
}

// readFigures reads the live heap (runtime/metrics' /gc/heap/live:bytes
// after a forced collection: the heap marked live, not the garbage not yet
// collected), the goroutines and the open files.
func readFigures() (heapMB float64, goroutines, files int) {
	runtime.GC()
	runtime.GC() // the heap profile daemonHeapMB reads is a cycle behind
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/sched/goroutines:goroutines"}}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 {
		heapMB = float64(s[0].Value.Uint64()) / (1 << 20)
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		goroutines = int(s[1].Value.Uint64())
	}
	files = -1
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		files = len(fds)
	}
	return heapMB, goroutines, files
}

// sample takes one sample and keeps it.
func (m *soakMeter) sample() soakSample {
	process, g, f := readFigures()
	s := soakSample{at: time.Since(m.start), heapMB: daemonHeapMB(), processMB: process, goroutines: g, files: f, done: m.done()}
	m.mu.Lock()
	m.samples = append(m.samples, s)
	m.mu.Unlock()
	return s
}

// all returns the samples taken.
func (m *soakMeter) all() []soakSample {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]soakSample(nil), m.samples...)
}

// module is the import path prefix of this repository's packages.
const module = "github.com/cds-contrib/hatchery-vsphere/"

// simulated are the packages of the process that are not the daemon: the
// two simulators and the demo's driver (its simulated workers), and
// govmomi's simulator.
var simulated = []string{module + "internal/vcsimtest", module + "internal/cdssim", module + "internal/demo", "github.com/vmware/govmomi/simulator"}

// daemonHeapMB is the live heap the daemon's code holds, in MB: the
// in-use bytes of the heap profile's records whose innermost frame of
// this repository or of govmomi's simulator is the daemon's (not one of
// simulated), scaled as pprof scales the sampled profile. The demo runs
// the daemon beside both simulators in one process; their records of
// every task and job grow with the run (vCenter and the CDS API forget
// or store them elsewhere), and would read as the daemon's growth. An
// allocation of the libraries the daemon calls (govmomi's client, the
// HTTP client) counts as the daemon's; one under no frame of ours (an
// HTTP server's goroutine of a simulator) does not. The profile is read
// in its text form, whose stacks are whole (runtime.MemProfile cuts them
// at 32 frames, fewer than an XML decoding takes); it is the heap as of
// the last completed collection (readFigures forces two).
func daemonHeapMB() float64 {
	var buf bytes.Buffer
	if err := pprof.Lookup("heap").WriteTo(&buf, 1); err != nil {
		return 0
	}
	rate := float64(runtime.MemProfileRate)
	total := 0.0
	for _, line := range strings.Split(buf.String(), "\n") {
		// "inuse objects: inuse bytes [alloc objects: alloc bytes] @ pc pc…"
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
		if daemonStack(stk) <= 0 {
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

// daemonStack classifies an allocation's stack by its innermost frame of
// this repository or of govmomi's simulator: 1 the daemon's, -1 the
// simulators' or the demo driver's, 0 none (the runtime, a server's
// goroutine).
func daemonStack(stk []uintptr) int8 {
	frames := runtime.CallersFrames(stk)
	for {
		f, more := frames.Next()
		for _, p := range simulated {
			if strings.HasPrefix(f.Function, p) {
				return -1
			}
		}
		if strings.HasPrefix(f.Function, module) {
			return 1
		}
		if !more {
			return 0
		}
	}
}

// soakLevels is the soak's growth check over samples of a soak that fed
// jobs for d. A figure levels off when its largest value in the late
// window (the last third of d, and the samples after it: the drain) is at
// most its largest value in the middle window (the second third) plus the
// figure's tolerance; the first third is the warm-up (the warm pool, the
// instant parents, the connections and caches fill) and is not compared.
// A leak that grows with the jobs keeps growing from the middle window to
// the late one; a figure that found its level does not.
func soakLevels(samples []soakSample, d time.Duration) Check {
	c := Check{Name: "figures level off"}
	var mid, late []soakSample
	for _, s := range samples {
		switch {
		case s.at > 2*d/3:
			late = append(late, s)
		case s.at > d/3:
			mid = append(mid, s)
		}
	}
	if len(mid) == 0 || len(late) == 0 {
		c.Failed = fmt.Sprintf("too few samples: %d in the middle third, %d in the late one", len(mid), len(late))
		return c
	}
	maxOf := func(ss []soakSample, f func(soakSample) float64) float64 {
		m := f(ss[0])
		for _, s := range ss[1:] {
			m = max(m, f(s))
		}
		return m
	}
	var bad, detail []string
	figure := func(name, unit string, f func(soakSample) float64, tol, slack float64) {
		m, l := maxOf(mid, f), maxOf(late, f)
		limit := m*(1+tol) + slack
		detail = append(detail, fmt.Sprintf("%s %.4g→%.4g%s", name, m, l, unit))
		if l > limit {
			bad = append(bad, fmt.Sprintf("%s: late max %.4g%s above the middle max %.4g%s + %.0f %% + %.4g", name, l, unit, m, unit, tol*100, slack))
		}
	}
	figure("heap", " MB", func(s soakSample) float64 { return s.heapMB }, soakHeapTolerance, soakHeapSlackMB)
	figure("goroutines", "", func(s soakSample) float64 { return float64(s.goroutines) }, soakGoroutineTolerance, soakGoroutineSlack)
	if samples[0].files >= 0 {
		figure("open files", "", func(s soakSample) float64 { return float64(s.files) }, 0, soakFileSlack)
	}
	c.Failed = firstOf(bad)
	c.Detail = "max middle→late third: " + strings.Join(detail, ", ")
	return c
}

// soakLine is the soak's summary: jobs done, minutes fed, and each figure
// from the first sample (the daemon just ready) to the last (every job
// ended), with the records logged at WARN.
func soakLine(samples []soakSample, jobs int, d time.Duration, warns int64) string {
	first, last := samples[0], samples[len(samples)-1]
	files := "open files n/a"
	if first.files >= 0 {
		files = fmt.Sprintf("open files %d→%d", first.files, last.files)
	}
	return fmt.Sprintf("soak: %d jobs in %s min; heap %.1f→%.1f MB; goroutines %d→%d; %s; WARN %d",
		jobs, strconv.FormatFloat(d.Minutes(), 'f', -1, 64), first.heapMB, last.heapMB, first.goroutines, last.goroutines, files, warns)
}

// soakRun is a soak's state in the driver (nil outside a soak).
type soakRun struct {
	d     time.Duration
	start time.Time
	meter *soakMeter
	// profMu guards dir and profiles: the meter writes the middle
	// profile, the end of the run the last one.
	profMu sync.Mutex
	// dir holds the heap profiles (soakProfile).
	dir string
	// fed is the number of jobs fed once the feeding stopped, -1 before.
	fed atomic.Int64
	// held counts the feeder's periods spent waiting (soakWait).
	held atomic.Int64
	// profiles are the heap profiles written (soakProfile): the one at
	// the start of the middle third, then the end's.
	profiles []string
}

// soakProfile writes a heap profile of the process named name in the
// directory of the soak's profiles (made at the first), and remembers
// it; a failure is said on the demo's output, the soak goes on. Two
// profiles, `go tool pprof -base MIDDLE END`, show what grew between them.
func (d *driver) soakProfile(name string) {
	d.soak.profMu.Lock()
	defer d.soak.profMu.Unlock()
	if d.soak.dir == "" {
		dir, err := os.MkdirTemp("", "hatchery-vsphere-soak-")
		if err != nil {
			d.out.printf("soak: no heap profile: %v", err)
			return
		}
		d.soak.dir = dir
	}
	path := filepath.Join(d.soak.dir, name+".pprof")
	f, err := os.Create(path)
	if err != nil {
		d.out.printf("soak: no heap profile: %v", err)
		return
	}
	defer f.Close()
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		d.out.printf("soak: no heap profile: %v", err)
		return
	}
	d.soak.profiles = append(d.soak.profiles, path)
}

func newSoakRun(d time.Duration, done func() int) *soakRun {
	s := &soakRun{d: d, start: time.Now(), meter: newSoakMeter(d, done)}
	s.fed.Store(-1)
	return s
}

// soakBacklog is the most jobs a soak keeps fed but not ended: the
// trickle waits while that many are in hand, so that a machine slower
// than the trickle (a busy one) holds a steady load instead of a queue
// that grows with the run, which would grow the heap with it.
const soakBacklog = 12

// soakWait holds the feeder of a soak while soakBacklog jobs are fed but
// not ended, polling every period (the jobs' ends have no signal of
// their own for the feeder); false when ctx ended.
func (d *driver) soakWait(ctx context.Context, period time.Duration) bool {
	if d.soak == nil {
		return true
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		rep := d.report()
		if len(rep.Jobs)-rep.Done()-rep.Failed() < soakBacklog || time.Since(d.soak.start) >= d.soak.d {
			return true
		}
		d.soak.held.Add(1)
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// soakOver tells the feeder, about to feed job i (0-based), that the soak's
// time is over: the jobs fed are i, and the run now ends as a --once run.
func (d *driver) soakOver(i int) bool {
	if d.soak == nil || time.Since(d.soak.start) < d.soak.d {
		return false
	}
	d.soak.fed.Store(int64(i))
	d.out.printf("soak: %s over, %d jobs fed; waiting for them to end", d.soak.d, i)
	d.signal()
	return true
}

// jobsWanted is how many jobs a --once run waits for: Options.Jobs, or for
// a soak the jobs fed once the feeding stopped (-1 before: not yet).
func (d *driver) jobsWanted() int {
	if d.soak == nil {
		return d.o.Jobs
	}
	return int(d.soak.fed.Load())
}

// runSoakMeter samples the process until ctx ends, with a progress line
// per sample (the soak prints no job lines).
func (d *driver) runSoakMeter(ctx context.Context) {
	middle := false
	d.soak.meter.run(ctx, func(s soakSample) {
		if !middle && s.at > d.soak.d/3 {
			middle = true
			d.soakProfile("heap-middle")
		}
		files := ""
		if s.files >= 0 {
			files = fmt.Sprintf("; open files %d", s.files)
		}
		d.out.printf("soak %s: %d jobs done; heap %.1f MB (process %.1f MB); goroutines %d%s; feeder held %d times (%d jobs in hand)", s.at.Round(time.Second), s.done, s.heapMB, s.processMB, s.goroutines, files, d.soak.held.Load(), d.inHand())
	})
}

// soakChecks ends a soak: a last sample (every job ended), the growth
// check, and the soak's summary line for after the checks.
func (d *driver) soakChecks(quiet *warnCounter) (Check, string) {
	d.soak.meter.sample()
	samples := d.soak.meter.all()
	n, _ := quiet.count()
	d.soakProfile("heap-end")
	line := soakLine(samples, d.jobsWanted(), d.soak.d, n)
	first, last := samples[0], samples[len(samples)-1]
	line += fmt.Sprintf("\nsoak: heap is the daemon's (daemonHeapMB); the whole process's, both simulators' records of every job included: %.1f→%.1f MB", first.processMB, last.processMB)
	d.soak.profMu.Lock()
	if len(d.soak.profiles) == 2 {
		line += fmt.Sprintf("\nheap profiles (what grew: go tool pprof -base %s %s)", d.soak.profiles[0], d.soak.profiles[1])
	}
	d.soak.profMu.Unlock()
	return soakLevels(samples, d.soak.d), line
}

// inHand counts the jobs fed and not ended.
func (d *driver) inHand() int {
	rep := d.report()
	return len(rep.Jobs) - rep.Done() - rep.Failed()
}
