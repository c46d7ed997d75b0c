package poolsize

import (
	"math"
	"math/rand/v2"
	"sort"
	"time"
)

// TraceSeed is the seed of the week the benchmark measures; the week
// before it, which the demand policy learns from, is TraceSeed-1.
const TraceSeed = 46

// TraceStart is the Monday 00:00 UTC the benchmark's measured week
// starts on.
var TraceStart = time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)

// traceRate is the mean of the synthetic trace's job arrivals per minute
// at t (UTC): a working day with a morning and an afternoon peak around a
// lunch dip, quiet evenings and nights with a nightly build, weekdays
// heavier on Monday and lighter on Friday, weekends almost idle.
func traceRate(t time.Time) float64 {
	h := float64(t.Hour()) + float64(t.Minute())/60
	day := t.Weekday()
	if day == time.Saturday || day == time.Sunday {
		if h >= 9 && h < 18 {
			return 0.05
		}
		return 0.005
	}
	weekly := map[time.Weekday]float64{time.Monday: 1.2, time.Tuesday: 1.1, time.Wednesday: 1, time.Thursday: 1, time.Friday: 0.75}[day]
	var r float64
	switch {
	case h < 6.5:
		r = 0.01
	case h < 8:
		r = 0.01 + 0.3*(h-6.5)/1.5 // first commits
	case h < 10:
		r = 0.3 + 1.7*(h-8)/2 // the morning ramp
	case h < 12:
		r = 2
	case h < 13.5:
		r = 1 // lunch
	case h < 17:
		r = 1.8
	case h < 19:
		r = 1.8 - 1.6*(h-17)/2 // going home
	case h < 23:
		r = 0.2
	default:
		r = 0.01
	}
	return r * weekly
}

// Trace is a synthetic week of job arrivals of one pool from start (a
// Monday 00:00 UTC), sorted, drawn with seed: each minute a Poisson count
// of traceRate's mean, spread over the minute; on weekdays a nightly build
// of 12 jobs at 02:00 and 2 to 6 bursts of 8 to 24 jobs within 2 minutes
// (a pipeline's fan-out) between 08:00 and 18:00. The same seed gives the
// same week.
func Trace(seed uint64, start time.Time) []time.Time {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var out []time.Time
	for m := 0; m < 7*24*60; m++ {
		t := start.Add(time.Duration(m) * time.Minute)
		for range poisson(rng, traceRate(t)) {
			out = append(out, t.Add(time.Duration(rng.Int64N(int64(time.Minute)))))
		}
	}
	for d := 0; d < 5; d++ {
		day := start.Add(time.Duration(d) * 24 * time.Hour)
		nightly := day.Add(2 * time.Hour)
		for i := range 12 {
			out = append(out, nightly.Add(time.Duration(i)*5*time.Second))
		}
		for range 2 + rng.IntN(5) {
			at := day.Add(8*time.Hour + time.Duration(rng.Int64N(int64(10*time.Hour))))
			for range 8 + rng.IntN(17) {
				out = append(out, at.Add(time.Duration(rng.Int64N(int64(2*time.Minute)))))
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

// poisson draws a Poisson count of mean lambda (Knuth's product of
// uniforms: lambda stays small here).
func poisson(rng *rand.Rand, lambda float64) int {
	l := math.Exp(-lambda)
	k, p := 0, rng.Float64()
	for p > l {
		k++
		p *= rng.Float64()
	}
	return k
}
