package demo

import (
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// soakSeries is a soak of d sampled every d/30, each figure given by f of
// the sample's time.
func soakSeries(d time.Duration, heap func(time.Duration) float64, goroutines, files func(time.Duration) int) []soakSample {
	var out []soakSample
	for at := time.Duration(0); at <= d+d/10; at += d / 30 {
		out = append(out, soakSample{at: at, heapMB: heap(at), goroutines: goroutines(at), files: files(at)})
	}
	return out
}

// TestSoakLevels: figures that climb during the warm-up and then stay at
// their level pass; a figure that keeps growing with the run fails,
// named; a soak without samples in the middle or late third fails.
func TestSoakLevels(t *testing.T) {
	t.Parallel()
	d := 30 * time.Minute
	frac := func(at time.Duration) float64 { return float64(at) / float64(d) }
	// Up to 20 MB, 300 goroutines and 40 files in the first third, then
	// flat with a jitter.
	warm := func(top float64) func(time.Duration) float64 {
		return func(at time.Duration) float64 {
			if frac(at) < 1.0/3 {
				return top * 3 * frac(at)
			}
			return top + float64(at/time.Minute%3) // 0..2 of jitter
		}
	}
	asInt := func(f func(time.Duration) float64) func(time.Duration) int {
		return func(at time.Duration) int { return int(f(at)) }
	}
	flat := soakSeries(d, warm(20), asInt(warm(300)), asInt(warm(40)))
	c := soakLevels(flat, d)
	assert.Empty(t, c.Failed)
	assert.Contains(t, c.Detail, "heap ")
	assert.Contains(t, c.Detail, "open files ")

	// A leak of a goroutine per job: +1 per 10 s keeps growing.
	leak := func(at time.Duration) int { return 300 + int(at/(10*time.Second)) }
	c = soakLevels(soakSeries(d, warm(20), leak, asInt(warm(40))), d)
	assert.Contains(t, c.Failed, "goroutines: late max")

	// The heap growing 1 MB a minute.
	grow := func(at time.Duration) float64 { return 20 + at.Minutes() }
	c = soakLevels(soakSeries(d, grow, asInt(warm(300)), asInt(warm(40))), d)
	assert.Contains(t, c.Failed, "heap: late max")

	// Open files growing by one a minute.
	fds := func(at time.Duration) int { return 40 + int(at.Minutes()) }
	c = soakLevels(soakSeries(d, warm(20), asInt(warm(300)), fds), d)
	assert.Contains(t, c.Failed, "open files: late max")

	c = soakLevels(flat[:5], d) // the first third only
	assert.Contains(t, c.Failed, "too few samples")
}

// TestSoakLine: the summary line gives the first and last sample's
// figures, the jobs, the minutes and the WARN count.
func TestSoakLine(t *testing.T) {
	t.Parallel()
	s := []soakSample{{heapMB: 4.26, goroutines: 78, files: 32}, {heapMB: 20, goroutines: 90, files: 40}, {heapMB: 13.04, goroutines: 101, files: 47}}
	assert.Equal(t, "soak: 60 jobs in 20 min; heap 4.3→13.0 MB; goroutines 78→101; open files 32→47; WARN 0", soakLine(s, 60, 20*time.Minute, 0))
	s[0].files = -1
	line := soakLine(s, 5, 90*time.Second, 2)
	assert.True(t, strings.HasPrefix(line, "soak: 5 jobs in 1.5 min;"), line)
	assert.Contains(t, line, "open files n/a; WARN 2")
}

// TestDaemonHeapCountsOnlyTheDaemonsCode: memory held by an allocation
// made under a frame of the simulators' packages is not the daemon's, one
// made under a frame of the daemon's packages is; daemonStack classifies
// stacks by their innermost frame of the repository. The figure is
// positive in a process that runs code of the repository.
func TestDaemonHeapCountsOnlyTheDaemonsCode(t *testing.T) {
	pcs := make([]uintptr, 32)
	n := runtime.Callers(1, pcs)
	// This test's own frame is in internal/demo: simulated, not daemon.
	assert.Equal(t, int8(-1), daemonStack(pcs[:n]))
	assert.Equal(t, int8(0), daemonStack(nil))

	// The heap profile samples one allocation in MemProfileRate bytes
	// (512 KB by default): the megabyte and a half held below gave no
	// sample at all in 7 of 80 runs (0.00 → 0.00 MB, once in a CI
	// run). Every allocation is recorded while this test runs (no other
	// test runs beside it: it is not parallel), and the rate is restored
	// after it.
	defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
	runtime.MemProfileRate = 1

	// Tables of the lifecycle package (a daemon package) held live count:
	// 4096 of them, each with its three maps, hold well over a megabyte.
	runtime.GC()
	runtime.GC()
	before := daemonHeapMB()
	held := make([]*lifecycle.Table, 4096)
	for i := range held {
		held[i] = lifecycle.New(nil)
		held[i].Set("x", lifecycle.Gone)
	}
	runtime.GC()
	runtime.GC()
	after := daemonHeapMB()
	assert.Greater(t, after-before, 0.5, "the daemon's heap grows by what a daemon package allocated and holds (%.2f → %.2f MB)", before, after)
	runtime.KeepAlive(held)
}
