package poolsize

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTraceIsAWeekWithCycles(t *testing.T) {
	t.Parallel()
	a := Trace(TraceSeed, TraceStart)
	assert.Equal(t, a, Trace(TraceSeed, TraceStart), "the same seed gives the same week")
	assert.NotEqual(t, a, Trace(TraceSeed+1, TraceStart))
	require.NotEmpty(t, a)
	assert.False(t, a[0].Before(TraceStart))
	assert.True(t, a[len(a)-1].Before(TraceStart.Add(7*24*time.Hour)))
	count := func(day, fromH, toH int) int {
		from := TraceStart.Add(time.Duration(day*24+fromH) * time.Hour)
		to := TraceStart.Add(time.Duration(day*24+toH) * time.Hour)
		n := 0
		for _, x := range a {
			if !x.Before(from) && x.Before(to) {
				n++
			}
		}
		return n
	}
	assert.Greater(t, count(0, 10, 12), 10*count(0, 3, 6)+100, "a Monday's morning peak against its quiet night")
	assert.Greater(t, count(0, 8, 19), 2*count(4, 8, 19)/2, "Monday is heavier than Friday")
	assert.Greater(t, count(2, 8, 19), 20*count(5, 8, 19), "a weekday against a Saturday")
	assert.GreaterOrEqual(t, count(1, 2, 3), 12, "the nightly build")
}

// TestReplayDemandBeatsTheBestFixedPool is the aim on the
// benchmark's week: at least 90 % warm starts with at most 0.6 of the
// idle VM-hours of the smallest fixed pool that starts as many jobs warm.
// The replay is simulated (no clock): the figures are the same on any
// machine.
func TestReplayDemandBeatsTheBestFixedPool(t *testing.T) {
	t.Parallel()
	d, n, f := benchWeeks()
	require.GreaterOrEqual(t, d.WarmShare(), 0.9, "%+v", d)
	require.GreaterOrEqual(t, f.WarmShare(), d.WarmShare())
	shorter := ReplayFixed(Trace(TraceSeed, TraceStart), TraceStart, TraceStart.Add(7*24*time.Hour), benchModel(), n-1)
	assert.Less(t, shorter.WarmShare(), d.WarmShare(), "a fixed pool of %d would do", n-1)
	assert.LessOrEqual(t, d.IdleVMHours, 0.6*f.IdleVMHours, "demand %.1f, fixed %d: %.1f", d.IdleVMHours, n, f.IdleVMHours)
}

func TestReplayCountsWarmStartsAndIdleHours(t *testing.T) {
	t.Parallel()
	m := Model{Ready: time.Minute, Interval: time.Minute, Parallel: 4}
	from := TraceStart
	to := from.Add(time.Hour)
	// A pool of 2, full after a minute; two jobs at 30 min take both, a
	// third at 30 min 10 s finds none.
	arr := []time.Time{from.Add(30 * time.Minute), from.Add(30 * time.Minute), from.Add(30*time.Minute + 10*time.Second)}
	r := ReplayFixed(arr, from, to, m, 2)
	assert.Equal(t, 3, r.Jobs)
	assert.Equal(t, 2, r.Warm)
	// Ready from 1:00 to 30:00 (2 VMs), then refilled by the pass of
	// 30:00, ready from 31:00 to 60:00.
	assert.InDelta(t, (2*29+2*29)/60.0, r.IdleVMHours, 0.01)
}

// TestReplayKeepsSurplusForMinIdle: a pool whose target drops to 0 at
// 10:00 keeps its two VMs (cloned at 0:00, ready at 1:00) until the first
// pass at which they have waited MinIdle since their clone.
func TestReplayKeepsSurplusForMinIdle(t *testing.T) {
	t.Parallel()
	from := TraceStart
	target := func(now time.Time) int {
		if now.Sub(from) < 10*time.Minute {
			return 2
		}
		return 0
	}
	m := Model{Ready: time.Minute, Interval: time.Minute, Parallel: 4}
	r := Replay(nil, from, from.Add(time.Hour), m, target, nil)
	assert.InDelta(t, 2*9/60.0, r.IdleVMHours, 0.01, "removed by the pass of 10:00")
	m.MinIdle = 30 * time.Minute
	r = Replay(nil, from, from.Add(time.Hour), m, target, nil)
	assert.InDelta(t, 2*29/60.0, r.IdleVMHours, 0.01, "removed by the pass of 30:00")
}
