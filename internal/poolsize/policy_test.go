package poolsize

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// monday is a Monday 00:00 UTC: the tests' clock starts there and is
// moved by hand (no sleeps, no wall clock).
var monday = time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)

// learnWeeks feeds s the given weeks of arrivals: perBucket(t) jobs in the
// quarter hour starting at t, spread evenly.
func learnWeeks(s *Sizer, from time.Time, weeks int, perBucket func(t time.Time) int) time.Time {
	end := from.Add(time.Duration(weeks) * 7 * 24 * time.Hour)
	for t := from; t.Before(end); t = t.Add(BucketWidth) {
		n := perBucket(t)
		for i := range n {
			s.Demand.Arrive(t.Add(time.Duration(i) * BucketWidth / time.Duration(n)))
		}
	}
	s.Demand.Observe(end)
	return end
}

// dailyPeak is a working day with a peak: 30 jobs a quarter hour from
// 10:00 to 12:00, 1 from 08:00 to 18:00 otherwise, none at night.
func dailyPeak(t time.Time) int {
	switch h := t.Hour(); {
	case h >= 10 && h < 12:
		return 30
	case h >= 8 && h < 18:
		return 1
	}
	return 0
}

func testPolicy() Policy {
	return Policy{Max: 100, WarmShare: 0.9, Refill: 4 * time.Minute, Ahead: 30 * time.Minute, IdleAfter: 30 * time.Minute}
}

func TestSizeServesTheShare(t *testing.T) {
	t.Parallel()
	assert.Equal(t, 0, Size(0, 0.9))
	prev := 0
	for _, lambda := range []float64{0.1, 0.5, 1, 2, 5, 8, 20} {
		n := Size(lambda, 0.9)
		assert.GreaterOrEqual(t, n, prev, "larger demand, larger pool (λ %.1f)", lambda)
		prev = n
		// E[min(N, n)] ≥ 0.9 λ, and n-1 falls short.
		served := func(n int) float64 {
			var s float64
			for k := 0; k < 200; k++ {
				pk := math.Exp(-lambda + float64(k)*math.Log(lambda) - lgamma(k+1))
				s += pk * float64(min(k, n))
			}
			return s
		}
		assert.GreaterOrEqual(t, served(n), 0.9*lambda-1e-6, "λ %.1f n %d", lambda, n)
		assert.Less(t, served(n-1), 0.9*lambda, "λ %.1f: %d is not the smallest", lambda, n)
	}
	assert.Greater(t, Size(5, 0.99), Size(5, 0.8), "a higher share needs a larger pool")
}

func lgamma(n int) float64 { v, _ := math.Lgamma(float64(n)); return v }

// TestGrowsAheadOfKnownDailyPeak: after two weeks of a 10:00 peak, the
// target rises before 10:00 (reason "ahead"), and is at the peak's size
// by the time the peak starts.
func TestGrowsAheadOfKnownDailyPeak(t *testing.T) {
	t.Parallel()
	s := &Sizer{}
	p := testPolicy()
	start := learnWeeks(s, monday, 2, dailyPeak)
	require.Equal(t, time.Monday, start.Weekday())

	at := func(h, m int) Decision {
		return s.Decide(p, Input{Now: start.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute), Limits: NoLimits})
	}
	early := at(8, 0)
	peakNeed := Size(30*float64(p.Refill)/float64(BucketWidth), p.warmShare())
	assert.Less(t, early.Target, peakNeed, "at 08:00 the pool is sized for the morning, not the peak")
	before := at(9, 35) // the peak is 25 minutes away, within Ahead
	assert.Equal(t, ReasonAhead, before.Reason, before.Detail)
	assert.Equal(t, peakNeed, before.Target, "full before the peak starts")
	assert.True(t, before.Changed)
	during := at(10, 30)
	assert.Equal(t, peakNeed, during.Target)
}

// TestShrinksAfterIdle: once the peak is over, the target is held for the
// idle period, then comes down (reason "idle"), never below min.
func TestShrinksAfterIdle(t *testing.T) {
	t.Parallel()
	s := &Sizer{}
	p := testPolicy()
	p.Min = 3
	start := learnWeeks(s, monday, 2, dailyPeak)
	// The last pass whose look-ahead still holds the peak.
	end := start.Add(11*time.Hour + 50*time.Minute)
	peak := s.Decide(p, Input{Now: end, Limits: NoLimits})
	require.Greater(t, peak.Target, 3)

	var shrunk Decision
	lastNeeded, held := end, 0
	for m := 2; m <= 90; m += 2 {
		now := end.Add(time.Duration(m) * time.Minute)
		d := s.Decide(p, Input{Now: now, Limits: NoLimits})
		if d.Target < peak.Target {
			shrunk = d
			assert.GreaterOrEqual(t, now.Sub(lastNeeded), p.IdleAfter, "shrunk %s after the need went down", now.Sub(lastNeeded))
			assert.Less(t, now.Sub(lastNeeded), p.IdleAfter+2*time.Minute, "shrunk at the first pass after the idle period")
			break
		}
		assert.Equal(t, peak.Target, d.Target)
		if d.Reason == ReasonHeld {
			held++
		} else {
			lastNeeded = now
		}
	}
	assert.Greater(t, held, 10, "the target was held while the need was lower")
	require.True(t, shrunk.Changed, "never shrunk")
	assert.Equal(t, ReasonMin, shrunk.Reason, "the afternoon's need (0.3 jobs a refill: 2 VMs) is below min 3: %s", shrunk.Detail)
	assert.Equal(t, 3, shrunk.Target)

	night := s.Decide(p, Input{Now: start.Add(23 * time.Hour), Limits: NoLimits})
	assert.Equal(t, 3, night.Target, "never below min")
}

// TestShrinkWaitsForTheWholeIdlePeriod: a need that comes back within the
// idle period restarts it.
func TestShrinkWaitsForTheWholeIdlePeriod(t *testing.T) {
	t.Parallel()
	s := &Sizer{}
	p := testPolicy()
	now := monday.Add(10 * time.Hour)
	for i := range 20 {
		s.Demand.Arrive(now.Add(time.Duration(i) * 10 * time.Second))
	}
	now = now.Add(4 * time.Minute)
	high := s.Decide(p, Input{Now: now, Queued: 6, Limits: NoLimits})
	require.Equal(t, ReasonQueue, high.Reason, high.Detail)
	d := s.Decide(p, Input{Now: now.Add(20 * time.Minute), Limits: NoLimits})
	assert.Equal(t, high.Target, d.Target, "held: %s", d.Detail)
	again := s.Decide(p, Input{Now: now.Add(25 * time.Minute), Queued: high.Target, Limits: NoLimits})
	assert.GreaterOrEqual(t, again.Target, high.Target)
	d = s.Decide(p, Input{Now: now.Add(50 * time.Minute), Limits: NoLimits})
	assert.Equal(t, again.Target, d.Target, "25 minutes after the need came back: still held")
	d = s.Decide(p, Input{Now: now.Add(56 * time.Minute), Limits: NoLimits})
	assert.Equal(t, ReasonIdle, d.Reason, d.Detail)
	assert.Less(t, d.Target, again.Target)
}

// TestQueueCorrectsTheLearntDemand: jobs waiting now, and a burst above
// the learnt rate, raise the target of a pool that learnt nothing.
func TestQueueCorrectsTheLearntDemand(t *testing.T) {
	t.Parallel()
	p := testPolicy()
	s := &Sizer{}
	d := s.Decide(p, Input{Now: monday.Add(10 * time.Hour), Limits: NoLimits})
	assert.Equal(t, 0, d.Target)
	assert.Equal(t, ReasonDemand, d.Reason)

	d = s.Decide(p, Input{Now: monday.Add(10*time.Hour + time.Minute), Queued: 3, Limits: NoLimits})
	assert.Equal(t, 3, d.Target)
	assert.Equal(t, ReasonQueue, d.Reason)
	assert.Contains(t, d.Detail, "3 jobs queued")

	s = &Sizer{}
	now := monday.Add(10 * time.Hour)
	for i := range 30 {
		s.Demand.Arrive(now.Add(time.Duration(i) * 20 * time.Second))
	}
	d = s.Decide(p, Input{Now: now.Add(10 * time.Minute), Limits: NoLimits})
	assert.Equal(t, ReasonQueue, d.Reason, d.Detail)
	assert.Equal(t, Size(30*4.0/15, p.warmShare()), d.Target, "30 arrivals in 15 minutes, 4 minutes a refill")
}

// TestCapsNeverExceeded: whatever the demand, the queue, the bounds and
// the schedules, the target never passes the capacity or the placements'
// headroom, never passes max, and is below min only when a cap is.
func TestCapsNeverExceeded(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	s := &Sizer{}
	learnWeeks(s, monday, 1, func(t time.Time) int { return rng.IntN(40) })
	now := monday.Add(7 * 24 * time.Hour)
	for i := range 2000 {
		now = now.Add(time.Duration(rng.IntN(600)) * time.Second)
		if rng.IntN(3) == 0 {
			s.Demand.Arrive(now)
		}
		p := testPolicy()
		p.Min = rng.IntN(6)
		p.Max = p.Min + rng.IntN(30)
		if rng.IntN(2) == 0 {
			p.Schedules = []Schedule{{From: 8 * time.Hour, To: 18 * time.Hour, Min: rng.IntN(5), Max: 5 + rng.IntN(10)}}
		}
		in := Input{Now: now, Queued: rng.IntN(20), Limits: Limits{Capacity: rng.IntN(25) - 1, Headroom: rng.IntN(25) - 1}}
		d := s.Decide(p, in)
		lo, hi, _ := p.bounds(now)
		if in.Limits.Capacity >= 0 {
			require.LessOrEqual(t, d.Target, in.Limits.Capacity, "pass %d: %+v", i, d)
		}
		if in.Limits.Headroom >= 0 {
			require.LessOrEqual(t, d.Target, in.Limits.Headroom, "pass %d: %+v", i, d)
		}
		if hi > 0 {
			require.LessOrEqual(t, d.Target, hi, "pass %d: %+v", i, d)
		}
		if d.Target < lo {
			require.Contains(t, []Reason{ReasonCapacity, ReasonPlacement}, d.Reason, "pass %d: below min %d: %+v", i, lo, d)
		}
		require.GreaterOrEqual(t, d.Target, 0)
	}
}

func TestCapReasons(t *testing.T) {
	t.Parallel()
	p := testPolicy()
	p.Min = 5
	now := monday.Add(10 * time.Hour)
	d := (&Sizer{}).Decide(p, Input{Now: now, Limits: Limits{Capacity: 3, Headroom: -1}})
	assert.Equal(t, Decision{Target: 3, Reason: ReasonCapacity, Detail: "need 0, capacity leaves room for 3", Changed: true}, d)
	d = (&Sizer{}).Decide(p, Input{Now: now, Limits: Limits{Capacity: 4, Headroom: 2}})
	assert.Equal(t, 2, d.Target)
	assert.Equal(t, ReasonPlacement, d.Reason)
	d = (&Sizer{}).Decide(p, Input{Now: now, Queued: 500, Limits: NoLimits})
	assert.Equal(t, 100, d.Target)
	assert.Equal(t, ReasonMax, d.Reason)
}

// TestSchedulesBoundTheTarget: a schedule's min holds the pool up during
// its period and its max holds it down; outside, the entry's own bounds.
func TestSchedulesBoundTheTarget(t *testing.T) {
	t.Parallel()
	p := testPolicy()
	p.Schedules = []Schedule{
		{Days: []time.Weekday{time.Monday, time.Tuesday, time.Wednesday, time.Thursday, time.Friday}, From: 8 * time.Hour, To: 18 * time.Hour, Min: 4, Max: 6},
		{From: 22 * time.Hour, To: 6 * time.Hour, Max: 1}, // nights, every day
	}
	s := &Sizer{}
	d := s.Decide(p, Input{Now: monday.Add(9 * time.Hour), Limits: NoLimits})
	assert.Equal(t, 4, d.Target)
	assert.Equal(t, ReasonSchedule, d.Reason)
	d = s.Decide(p, Input{Now: monday.Add(9*time.Hour + time.Minute), Queued: 9, Limits: NoLimits})
	assert.Equal(t, 6, d.Target)
	assert.Equal(t, ReasonSchedule, d.Reason)
	d = s.Decide(p, Input{Now: monday.Add(23 * time.Hour), Queued: 9, Limits: NoLimits})
	assert.Equal(t, 1, d.Target, "the night's max")
	d = s.Decide(p, Input{Now: monday.Add(24*time.Hour + 5*time.Hour), Queued: 9, Limits: NoLimits})
	assert.Equal(t, 1, d.Target, "Tuesday 05:00 is still Monday's night")
	d = s.Decide(p, Input{Now: monday.Add(5*24*time.Hour + 9*time.Hour), Queued: 9, Limits: NoLimits})
	assert.Equal(t, 9, d.Target, "Saturday 09:00: no schedule, the entry's max 100")
}

func TestScheduleContains(t *testing.T) {
	t.Parallel()
	night := Schedule{Days: []time.Weekday{time.Friday}, From: 20 * time.Hour, To: 2 * time.Hour}
	fri := monday.Add(4 * 24 * time.Hour)
	assert.True(t, night.Contains(fri.Add(21*time.Hour)))
	assert.True(t, night.Contains(fri.Add(25*time.Hour)), "Saturday 01:00 is Friday's night")
	assert.False(t, night.Contains(fri.Add(26*time.Hour)))
	assert.False(t, night.Contains(fri.Add(time.Hour)), "Friday 01:00 is Thursday's night")
	assert.False(t, night.Contains(fri.Add(19*time.Hour)))
}

func TestHitRatio(t *testing.T) {
	t.Parallel()
	s := &Sizer{}
	r, n := s.HitRatio()
	assert.Equal(t, 0, n)
	assert.Zero(t, r)
	s.Start(true)
	s.Start(true)
	s.Start(false)
	r, n = s.HitRatio()
	assert.Equal(t, 3, n)
	assert.InDelta(t, 2.0/3, r, 1e-9)
}

// TestDefaultLookAheadIsOneRefill: without Ahead, the target rises one
// refill before the peak: a VM cloned then is ready when it starts.
func TestDefaultLookAheadIsOneRefill(t *testing.T) {
	t.Parallel()
	s := &Sizer{}
	p := testPolicy()
	p.Ahead = 0
	start := learnWeeks(s, monday, 2, dailyPeak)
	peakNeed := Size(30*float64(p.Refill)/float64(BucketWidth), p.warmShare())
	early := s.Decide(p, Input{Now: start.Add(10*time.Hour - p.Refill - 2*time.Minute), Limits: NoLimits})
	assert.Less(t, early.Target, peakNeed, "%s before the peak: %s", p.Refill+2*time.Minute, early.Detail)
	d := s.Decide(p, Input{Now: start.Add(10*time.Hour - p.Refill), Limits: NoLimits})
	assert.Equal(t, peakNeed, d.Target, "one refill before the peak: %s", d.Detail)
	assert.Equal(t, ReasonAhead, d.Reason)
	assert.Equal(t, []time.Time{monday.Add(5 * time.Minute), monday.Add(10 * time.Minute), monday.Add(12 * time.Minute)}, aheadTimes(monday, 12*time.Minute))
}
