package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A warm-pool entry follows demand when it sets max (docs/warm-pools.md):
// its size is decided each pass between min and max, or the bounds of
// the schedule in force, by internal/poolsize. An entry with number
// keeps that many VMs, as before.

// PoolSchedule is a period of the week with its own bounds for a
// demand-driven pool (workerProvisioning[].schedules[]).
type PoolSchedule struct {
	// Days are the days the period starts on ("mon".."sun"); empty:
	// every day.
	Days []string `mapstructure:"days" toml:"days" json:"days"`
	// From and To are "HH:MM" in the entry's timeZone; To ≤ From runs
	// past midnight.
	From string `mapstructure:"from" toml:"from" json:"from"`
	To   string `mapstructure:"to" toml:"to" json:"to"`
	// Min and Max bound the pool during the period (Max 0: the entry's).
	Min int `mapstructure:"min" toml:"min" json:"min"`
	Max int `mapstructure:"max" toml:"max" json:"max"`
}

// MaxPoolMinutes bounds idleMinutes and aheadMinutes: a day.
const MaxPoolMinutes = 24 * 60

// weekdayNames are the day names of PoolSchedule.Days.
var weekdayNames = map[string]time.Weekday{
	"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday,
	"thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday,
}

// Scales tells whether the entry follows demand (it sets max, min, a
// warm share or schedules) rather than keeping Number.
func (w WorkerProvisioning) Scales() bool {
	return w.Max > 0 || w.Min > 0 || w.WarmShare != 0 || len(w.Schedules) > 0
}

// PoolWarmShare is warmShare, DefaultPoolWarmShare when unset.
func (w WorkerProvisioning) PoolWarmShare() float64 {
	if w.WarmShare == 0 {
		return DefaultPoolWarmShare
	}
	return w.WarmShare
}

// PoolIdle is idleMinutes, DefaultPoolIdleMinutes when unset.
func (w WorkerProvisioning) PoolIdle() time.Duration {
	return boundedDuration(w.IdleMinutes, time.Minute, DefaultPoolIdleMinutes, MaxPoolMinutes)
}

// PoolAhead is aheadMinutes; 0 when unset (the policy looks one refill
// ahead: internal/poolsize).
func (w WorkerProvisioning) PoolAhead() time.Duration {
	return boundedDuration(w.AheadMinutes, time.Minute, 0, MaxPoolMinutes)
}

// PoolLocation is the time zone of the entry's week (schedules and the
// learnt demand), DefaultPoolTimeZone when unset or unknown (Validate
// refuses an unknown one).
func (w WorkerProvisioning) PoolLocation() *time.Location {
	name := w.TimeZone
	if name == "" {
		name = DefaultPoolTimeZone
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return time.UTC
	}
	return loc
}

// Weekdays are the schedule's days, nil for every day (Validate refuses
// an unknown name; it is left out here).
func (s PoolSchedule) Weekdays() []time.Weekday {
	var out []time.Weekday
	for _, d := range s.Days {
		if wd, ok := weekdayNames[strings.ToLower(strings.TrimSpace(d))]; ok {
			out = append(out, wd)
		}
	}
	return out
}

// Span is the schedule's From and To as offsets from midnight (0 for a
// value Validate refuses).
func (s PoolSchedule) Span() (from, to time.Duration) {
	from, _ = parseClock(s.From)
	to, _ = parseClock(s.To)
	return from, to
}

// parseClock reads "HH:MM" (00:00 to 24:00).
func parseClock(v string) (time.Duration, bool) {
	h, m, ok := strings.Cut(strings.TrimSpace(v), ":")
	if !ok || len(h) != 2 || len(m) != 2 {
		return 0, false
	}
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if err1 != nil || err2 != nil || hh < 0 || mm < 0 || mm > 59 || hh > 24 || (hh == 24 && mm != 0) {
		return 0, false
	}
	return time.Duration(hh)*time.Hour + time.Duration(mm)*time.Minute, true
}

// validateScaling checks the demand keys of the entry at key.
func (w WorkerProvisioning) validateScaling(es *Errors, key string) {
	if !w.Scales() {
		return
	}
	if w.Number > 0 {
		es.add(key+".number", "%d: an entry keeps number VMs or follows demand between min and max, not both (remove number, or min, max, warmShare and schedules)", w.Number)
	}
	if w.Min < 0 {
		es.add(key+".min", "%d: must be >= 0 (VMs kept at the least)", w.Min)
	}
	switch {
	case w.Max <= 0:
		es.add(key+".max", "%d: required, > 0, when the pool follows demand (the most VMs it may hold)", w.Max)
	case w.Min > w.Max:
		es.add(key+".min", "%d: greater than max %d", w.Min, w.Max)
	}
	if w.WarmShare != 0 && (w.WarmShare < 0.5 || w.WarmShare > 0.999) {
		es.add(key+".warmShare", "%g: must be from 0.5 to 0.999 (the share of the pool's jobs that should find a ready VM; 0: %g)", w.WarmShare, DefaultPoolWarmShare)
	}
	if w.IdleMinutes < 0 || w.IdleMinutes > MaxPoolMinutes {
		es.add(key+".idleMinutes", "%d: must be from 0 (default %d) to %d minutes", w.IdleMinutes, DefaultPoolIdleMinutes, MaxPoolMinutes)
	}
	if w.AheadMinutes < 0 || w.AheadMinutes > MaxPoolMinutes {
		es.add(key+".aheadMinutes", "%d: must be from 0 (one refill) to %d minutes", w.AheadMinutes, MaxPoolMinutes)
	}
	if w.TimeZone != "" {
		if _, err := time.LoadLocation(w.TimeZone); err != nil {
			es.add(key+".timeZone", "%q: not a time zone this system knows (an IANA name such as \"Europe/Paris\"; empty: %s)", w.TimeZone, DefaultPoolTimeZone)
		}
	}
	for j, s := range w.Schedules {
		sk := fmt.Sprintf("%s.schedules[%d]", key, j)
		for k, d := range s.Days {
			if _, ok := weekdayNames[strings.ToLower(strings.TrimSpace(d))]; !ok {
				es.add(fmt.Sprintf("%s.days[%d]", sk, k), "%q: must be one of mon, tue, wed, thu, fri, sat, sun", d)
			}
		}
		from, okFrom := parseClock(s.From)
		to, okTo := parseClock(s.To)
		if !okFrom {
			es.add(sk+".from", "%q: must be \"HH:MM\" (00:00 to 24:00)", s.From)
		}
		if !okTo {
			es.add(sk+".to", "%q: must be \"HH:MM\" (00:00 to 24:00)", s.To)
		}
		if okFrom && okTo && from == to {
			es.add(sk+".to", "%q: equals from: the period is empty", s.To)
		}
		if s.Min < 0 {
			es.add(sk+".min", "%d: must be >= 0", s.Min)
		}
		if s.Max < 0 {
			es.add(sk+".max", "%d: must be >= 0 (0: the entry's max)", s.Max)
		}
		hi := s.Max
		if hi == 0 {
			hi = w.Max
		}
		if s.Min > hi && hi > 0 {
			es.add(sk+".min", "%d: greater than the period's max %d", s.Min, hi)
		}
	}
}
