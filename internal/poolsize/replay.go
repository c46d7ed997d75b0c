package poolsize

import (
	"time"
)

// Model is the pool the replay plays: how long a VM takes to become
// ready and how the provisioning loop refills it.
type Model struct {
	// Ready is a pool VM's clone to ready (clone, power on, guest ready
	// for its IP, power off): from the latency model.
	Ready time.Duration
	// Interval is the provisioning loop's period
	// (workerProvisioningInterval).
	Interval time.Duration
	// Parallel is how many pool VMs are made at once
	// (workerProvisioningPoolSize).
	Parallel int
	// MinIdle is how long a VM above the target must have waited since
	// its clone before a pass removes it (a demand pool's idle period:
	// internal/warmpool; 0: at once, as a fixed pool's).
	MinIdle time.Duration
}

// Result is what one replay measured.
type Result struct {
	// Jobs is the number of arrivals replayed; Warm those that found a
	// ready VM.
	Jobs, Warm int
	// IdleVMHours is the time VMs spent ready and unused, in hours.
	IdleVMHours float64
	// Decisions counts the target changes (demand-driven only).
	Decisions int
	// Reasons counts the target changes by reason.
	Reasons map[Reason]int
}

// WarmShare is the share of jobs that found a ready VM.
func (r Result) WarmShare() float64 {
	if r.Jobs == 0 {
		return 0
	}
	return float64(r.Warm) / float64(r.Jobs)
}

// Replay plays arrivals (sorted) in [from, to) against a pool on model m
// whose target each pass is target(now) (learn, when set, is told every
// arrival first). A pass every m.Interval removes the ready VMs above
// the target (oldest first, each once it has waited m.MinIdle since its
// clone) and starts clones up to it, at most m.Parallel in flight; a job takes the oldest ready VM when there is one (warm), else
// it is served by a clone of its own outside the pool (cold). The pool starts
// empty at from. Time advances by the second.
func Replay(arrivals []time.Time, from, to time.Time, m Model, target func(now time.Time) int, learn func(time.Time)) Result {
	res := Result{Reasons: map[Reason]int{}}
	var ready []time.Time   // clone start of the ready VMs, oldest first
	var cloning []time.Time // ready-at of the clones in flight
	next := 0
	for next < len(arrivals) && arrivals[next].Before(from) {
		next++
	}
	var idleSeconds float64
	nextPass := from
	for now := from; now.Before(to); now = now.Add(time.Second) {
		// Clones that became ready.
		k := 0
		for _, at := range cloning {
			if !at.After(now) {
				ready = append(ready, at.Add(-m.Ready))
				continue
			}
			cloning[k] = at
			k++
		}
		cloning = cloning[:k]
		// Arrivals of this second.
		for next < len(arrivals) && arrivals[next].Before(now.Add(time.Second)) {
			if learn != nil {
				learn(arrivals[next])
			}
			res.Jobs++
			if len(ready) > 0 {
				ready = ready[1:] // the claim takes the oldest
				res.Warm++
			}
			next++
		}
		if !now.Before(nextPass) {
			nextPass = nextPass.Add(m.Interval)
			t := target(now)
			// The surplus goes oldest first, each VM once it has waited
			// MinIdle.
			for len(ready) > t && now.Sub(ready[0]) >= m.MinIdle {
				ready = ready[1:]
			}
			for len(ready)+len(cloning) < t && len(cloning) < m.Parallel {
				cloning = append(cloning, now.Add(m.Ready))
			}
		}
		idleSeconds += float64(len(ready))
	}
	res.IdleVMHours = idleSeconds / 3600
	return res
}

// ReplayFixed replays arrivals against a fixed pool of n.
func ReplayFixed(arrivals []time.Time, from, to time.Time, m Model, n int) Result {
	return Replay(arrivals, from, to, m, func(time.Time) int { return n }, nil)
}

// ReplayDemand replays arrivals against a demand-driven pool of policy p
// whose sizer s has learnt what it has (the caller may have replayed
// earlier weeks into it); s keeps learning from the arrivals.
func ReplayDemand(arrivals []time.Time, from, to time.Time, m Model, p Policy, s *Sizer) Result {
	var changes int
	reasons := map[Reason]int{}
	res := Replay(arrivals, from, to, m, func(now time.Time) int {
		d := s.Decide(p, Input{Now: now, Limits: NoLimits})
		if d.Changed {
			changes++
			reasons[d.Reason]++
		}
		return d.Target
	}, s.Demand.Arrive)
	res.Decisions, res.Reasons = changes, reasons
	return res
}

// Learn feeds arrivals in [from, to) to s's demand, as a pool serving
// them would have seen them.
func Learn(s *Sizer, arrivals []time.Time, from, to time.Time) {
	for _, a := range arrivals {
		if !a.Before(from) && a.Before(to) {
			s.Demand.Arrive(a)
		}
	}
	s.Demand.Observe(to)
}

// BestFixed is the smallest fixed pool whose warm share reaches share on
// arrivals, and its result; up to limit.
func BestFixed(arrivals []time.Time, from, to time.Time, m Model, share float64, limit int) (int, Result) {
	var r Result
	for n := 0; n <= limit; n++ {
		r = ReplayFixed(arrivals, from, to, m, n)
		if r.WarmShare() >= share {
			return n, r
		}
	}
	return limit, r
}
