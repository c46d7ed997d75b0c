package poolsize

import (
	"fmt"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// benchModel is the pool the benchmark replays: a linked clone, its
// power-on and its guest's boot for the IP, from the latency model
// (internal/vcsimtest/latency.go, real durations: the replay's clock is
// simulated), refilled by the default provisioning interval, 8 at once.
func benchModel() Model {
	var ready time.Duration
	for _, op := range []string{vcsimtest.OpLinkedClone, vcsimtest.OpPowerOn, vcsimtest.OpGuestReady} {
		for _, l := range vcsimtest.Latencies {
			if l.Op == op {
				ready += l.Real
			}
		}
	}
	return Model{Ready: ready, Interval: 120 * time.Second, Parallel: 8}
}

// benchPolicy is the demand-driven entry the benchmark replays.
func benchPolicy(m Model) Policy {
	return Policy{Min: 0, Max: 30, WarmShare: 0.95, Refill: m.Interval + m.Ready, Ahead: 30 * time.Minute, IdleAfter: 20 * time.Minute}
}

// benchWeeks replays the measured week (TraceSeed) against the demand
// pool, which has learnt the week before (TraceSeed-1) as a running
// hatchery would have, and against the smallest fixed pool reaching the
// same warm share.
func benchWeeks() (demand Result, n int, fixed Result) {
	m := benchModel()
	prevStart := TraceStart.Add(-7 * 24 * time.Hour)
	prev := Trace(TraceSeed-1, prevStart)
	week := Trace(TraceSeed, TraceStart)
	s := &Sizer{}
	Learn(s, prev, prevStart, TraceStart)
	end := TraceStart.Add(7 * 24 * time.Hour)
	p := benchPolicy(m)
	dm := m
	dm.MinIdle = p.IdleAfter // the daemon's rule for a demand pool's surplus
	demand = ReplayDemand(week, TraceStart, end, dm, p, s)
	n, fixed = BestFixed(week, TraceStart, end, m, demand.WarmShare(), 200)
	return demand, n, fixed
}

// BenchmarkDemandPool prints the issue-46 line: the demand-driven pool
// against the best fixed pool on a synthetic week (docs/warm-pools.md,
// "Measured").
func BenchmarkDemandPool(b *testing.B) {
	var d, f Result
	var n int
	for range b.N {
		d, n, f = benchWeeks()
	}
	b.StopTimer()
	m := benchModel()
	fmt.Printf("pool replay: %d jobs (seed %d, week of %s), a pool VM ready %s after its clone starts, pass every %s, %d at once\n",
		d.Jobs, TraceSeed, TraceStart.Format("2006-01-02"), m.Ready, m.Interval, m.Parallel)
	fmt.Printf("demand target changes: %d %v\n", d.Decisions, d.Reasons)
	fmt.Printf("pool demand: warm starts %.1f%%, idle VM-hours %.1f; fixed pool of %d at the same warm starts: idle VM-hours %.1f\n",
		100*d.WarmShare(), d.IdleVMHours, n, f.IdleVMHours)
	b.ReportMetric(100*d.WarmShare(), "warm%")
	b.ReportMetric(d.IdleVMHours/f.IdleVMHours, "idle-ratio")
}
