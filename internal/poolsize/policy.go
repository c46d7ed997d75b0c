package poolsize

import (
	"fmt"
	"math"
	"time"
)

// DefaultWarmShare is the share of jobs that should find a ready VM when
// the entry names none.
const DefaultWarmShare = 0.9

// DefaultIdleAfter is how long the VMs above what the demand needs are
// kept before the target comes down.
const DefaultIdleAfter = 30 * time.Minute

// aheadStep is the step at which the look-ahead window is scanned.
const aheadStep = 5 * time.Minute

// Policy is how one pool scales: its bounds, its aim and its timings.
type Policy struct {
	// Min and Max bound the target when no schedule is active (Max 0: no
	// bound of its own; the caps of Limits still hold).
	Min, Max int
	// WarmShare is the share of the pool's jobs that should find a ready
	// VM, in (0, 1] (0: DefaultWarmShare).
	WarmShare float64
	// Refill is how long a taken VM's slot stays empty: the pool's pass
	// interval plus a clone, boot and power-off (the latency model:
	// docs/warm-pools.md). The demand within Refill is what the pool
	// must hold.
	Refill time.Duration
	// Ahead is how far ahead the target looks for a rise in demand, so
	// that the pool is full when it starts: the refill windows starting
	// up to Ahead from now are read (0: Refill, the least that has a VM
	// ready when the rise comes).
	Ahead time.Duration
	// IdleAfter is how long the target stays above what the demand needs
	// before it comes down (0: DefaultIdleAfter).
	IdleAfter time.Duration
	// Schedules are periods of the week with their own Min and Max; the
	// first that contains the time applies.
	Schedules []Schedule
}

// Schedule is a period of the week with its own bounds.
type Schedule struct {
	// Days are the days the period starts on (empty: every day).
	Days []time.Weekday
	// From and To are the period's start and end as offsets from
	// midnight; To ≤ From runs past midnight into the next day.
	From, To time.Duration
	// Min and Max bound the target during the period (Max 0: the
	// policy's Max).
	Min, Max int
}

// Contains tells whether t (read in its own location) falls in the
// period.
func (s Schedule) Contains(t time.Time) bool {
	mid := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, t.Location())
	at := t.Sub(mid)
	day := t.Weekday()
	if s.To > s.From {
		return s.onDay(day) && at >= s.From && at < s.To
	}
	// Past midnight: the part after From on its day, or the part before
	// To on the next day.
	return (s.onDay(day) && at >= s.From) || (s.onDay((day+6)%7) && at < s.To)
}

func (s Schedule) onDay(d time.Weekday) bool {
	if len(s.Days) == 0 {
		return true
	}
	for _, x := range s.Days {
		if x == d {
			return true
		}
	}
	return false
}

// Limits are the caps the pool's target never passes, which the caller
// reads from the capacity and the placements each pass (negative: none).
type Limits struct {
	// Capacity is how many VMs of the pool its share of the hatchery's
	// capacity (maxWorkers, maxCpus, maxMemoryMB) leaves room for.
	Capacity int
	// Headroom is how many VMs of the pool its placements have room for
	// (the pool's VMs plus those that still fit).
	Headroom int
}

// NoLimits is Limits without caps.
var NoLimits = Limits{Capacity: -1, Headroom: -1}

// Reason says why a pool has its target (one log line per change; the
// status and the metrics show it).
type Reason string

// The reasons of a target.
const (
	// ReasonFixed: the entry's number.
	ReasonFixed Reason = "fixed"
	// ReasonDemand: the demand learnt for now.
	ReasonDemand Reason = "demand"
	// ReasonAhead: the demand learnt for later in the look-ahead, which
	// is higher than now's: the pool grows before it comes.
	ReasonAhead Reason = "ahead"
	// ReasonQueue: the queue now holds more than was learnt (jobs
	// waiting, or a burst in the last quarter hour).
	ReasonQueue Reason = "queue"
	// ReasonIdle: the demand went down and the VMs above it stayed idle
	// for the idle period: the pool shrinks.
	ReasonIdle Reason = "idle"
	// ReasonHeld: the demand went down less than the idle period ago:
	// the target stays.
	ReasonHeld Reason = "held"
	// ReasonMin and ReasonMax: the entry's bounds.
	ReasonMin Reason = "min"
	ReasonMax Reason = "max"
	// ReasonSchedule: the bounds of the active schedule.
	ReasonSchedule Reason = "schedule"
	// ReasonCapacity: the pool's share of the hatchery's capacity.
	ReasonCapacity Reason = "capacity"
	// ReasonPlacement: its placements' headroom.
	ReasonPlacement Reason = "placement"
)

// Input is what a decision reads besides the learnt demand.
type Input struct {
	// Now is the decision's time.
	Now time.Time
	// Queued is the jobs of the pool waiting in the queue now, not yet
	// served.
	Queued int
	// Limits are the caps of this pass.
	Limits Limits
}

// Decision is one pass's target of a pool.
type Decision struct {
	// Target is the number of VMs the pool is filled to.
	Target int
	// Reason says why.
	Reason Reason
	// Detail gives the figures, for the log line.
	Detail string
	// Changed tells whether the target differs from the previous pass's
	// (the first decision counts as a change).
	Changed bool
}

func (p Policy) warmShare() float64 {
	if p.WarmShare <= 0 || p.WarmShare > 1 {
		return DefaultWarmShare
	}
	return p.WarmShare
}

func (p Policy) ahead() time.Duration {
	if p.Ahead <= 0 {
		return p.Refill
	}
	return p.Ahead
}

func (p Policy) idleAfter() time.Duration {
	if p.IdleAfter <= 0 {
		return DefaultIdleAfter
	}
	return p.IdleAfter
}

// bounds are the min and max at t, and the reason naming them.
func (p Policy) bounds(t time.Time) (lo, hi int, why Reason) {
	for _, s := range p.Schedules {
		if s.Contains(t) {
			hi = s.Max
			if hi <= 0 {
				hi = p.Max
			}
			return s.Min, hi, ReasonSchedule
		}
	}
	return p.Min, p.Max, ""
}

// Size is the smallest pool that serves share of arrivals warm when the
// arrivals within one refill are Poisson with mean lambda: the pool of n
// serves min(N, n) of N, so n is the least with E[min(N, n)] ≥ share·λ.
func Size(lambda, share float64) int {
	if lambda <= 0 {
		return 0
	}
	want := share * lambda
	served := 0.0
	pk := math.Exp(-lambda) // P(N = k)
	cdf := pk               // P(N ≤ k)
	for n := 1; ; n++ {
		// E[min(N, n)] = Σ_{k<n} P(N > k)
		served += 1 - cdf
		if served >= want-1e-9 || n > 10000 {
			return n
		}
		pk *= lambda / float64(n)
		cdf += pk
	}
}

// need is the pool the demand calls for at t: the arrivals learnt within
// one refill from t, sized for the warm share.
func (p Policy) need(d *Demand, t time.Time) (int, float64) {
	lambda := d.Expected(t, t.Add(p.Refill))
	return Size(lambda, p.warmShare()), lambda
}

// Sizer holds one pool's decisions: its learnt demand, its target, since
// when the demand needed it, and its warm and cold starts.
type Sizer struct {
	// Demand is the pool's learnt demand.
	Demand Demand

	target   int
	decided  bool
	lastNeed time.Time
	warm     int
	cold     int
}

// Target is the last decision's target (0 before the first).
func (s *Sizer) Target() int { return s.target }

// Start counts one job of the pool started from a ready VM (warm) or a
// fresh clone.
func (s *Sizer) Start(warm bool) {
	if warm {
		s.warm++
	} else {
		s.cold++
	}
}

// HitRatio is the share of the pool's starts that found a ready VM (0
// before any start) and the number of starts.
func (s *Sizer) HitRatio() (float64, int) {
	n := s.warm + s.cold
	if n == 0 {
		return 0, 0
	}
	return float64(s.warm) / float64(n), n
}

// Decide is the pool's target for this pass: the largest need of the
// look-ahead (Policy.Ahead) plus the short-term correction (jobs queued
// now, a burst above the learnt rate), kept until it has been above the
// need for the idle period, then held between the bounds and under the
// caps. The caps win over the min: the pool never holds what does not
// fit.
func (s *Sizer) Decide(p Policy, in Input) Decision {
	now := in.Now
	s.Demand.Observe(now)
	need, lambda := p.need(&s.Demand, now)
	reason, detail := ReasonDemand, fmt.Sprintf("%.1f jobs expected within %s", lambda, p.Refill)
	for _, t := range aheadTimes(now, p.ahead()) {
		if n, l := p.need(&s.Demand, t); n > need {
			need, reason, detail = n, ReasonAhead, fmt.Sprintf("%.1f jobs expected within %s from %s", l, p.Refill, t.Sub(now))
		}
	}
	// Short-term correction: a burst above the learnt rate in the last
	// quarter hour is expected to go on for one refill, and the jobs
	// waiting now each take a VM.
	learntRecent := s.Demand.Expected(now.Add(-BucketWidth), now)
	if r := float64(s.Demand.Recent()); r > 1.5*learntRecent+1 {
		burst := r * float64(p.Refill) / float64(BucketWidth)
		if n := Size(burst, p.warmShare()); n > need {
			need, reason, detail = n, ReasonQueue, fmt.Sprintf("%d arrivals in the last %s, %.1f learnt", int(r), BucketWidth, learntRecent)
		}
	}
	if in.Queued > 0 {
		need += in.Queued
		reason, detail = ReasonQueue, fmt.Sprintf("%s; %d jobs queued now", detail, in.Queued)
	}

	target := need
	switch {
	case !s.decided || need >= s.target:
		s.lastNeed = now
	case now.Sub(s.lastNeed) >= p.idleAfter():
		reason, detail = ReasonIdle, fmt.Sprintf("need %d, idle since %s", need, s.lastNeed.Format(time.RFC3339))
	default:
		target, reason, detail = s.target, ReasonHeld, fmt.Sprintf("need %d, target kept until %s idle", need, p.idleAfter())
	}

	lo, hi, why := p.bounds(now.In(s.Demand.loc()))
	if target < lo {
		target, reason, detail = lo, orReason(why, ReasonMin), fmt.Sprintf("need %d, min %d", need, lo)
	}
	if hi > 0 && target > hi {
		target, reason, detail = hi, orReason(why, ReasonMax), fmt.Sprintf("need %d, max %d", need, hi)
	}
	if c := in.Limits.Capacity; c >= 0 && target > c {
		target, reason, detail = c, ReasonCapacity, fmt.Sprintf("need %d, capacity leaves room for %d", need, c)
	}
	if h := in.Limits.Headroom; h >= 0 && target > h {
		target, reason, detail = h, ReasonPlacement, fmt.Sprintf("need %d, placements have room for %d", need, h)
	}
	d := Decision{Target: target, Reason: reason, Detail: detail, Changed: !s.decided || target != s.target}
	s.target, s.decided = target, true
	return d
}

// aheadTimes are the starts of the refill windows the look-ahead reads:
// every aheadStep after now, and now+ahead itself.
func aheadTimes(now time.Time, ahead time.Duration) []time.Time {
	var out []time.Time
	for d := aheadStep; d < ahead; d += aheadStep {
		out = append(out, now.Add(d))
	}
	if ahead > 0 {
		out = append(out, now.Add(ahead))
	}
	return out
}

func orReason(r, def Reason) Reason {
	if r != "" {
		return r
	}
	return def
}
