// Package quarantine keeps the health of the templates (or V1 models) a
// hatchery clones workers from, so that one template that stopped booting
// does not burn a clone per queued job (docs/design.md#quarantine).
//
// A Book counts, per key, the consecutive spawn failures whose cause points
// at the template. At Policy.Threshold of them the key is quarantined for a
// back-off period that doubles at each failed probe, up to
// Policy.BackoffMax. Once the period is over, one spawn at a time (the
// probe) may use the key again: its success lifts the quarantine, its
// failure renews it for the next, longer, period. A failure whose cause is
// elsewhere (no room, no free IP, vCenter down, the job gone) neither counts
// nor resets the count.
//
// The package is pure: no vCenter, no configuration, a clock passed in.
// A Book is safe for concurrent use.
package quarantine

import (
	"sort"
	"sync"
	"time"
)

// Cause is what a spawn failure points at.
type Cause int

const (
	// CauseOther: not the template (capacity, IP exhaustion, vCenter
	// unreachable or session lost, the job gone, shutdown). It neither
	// counts nor resets the count.
	CauseOther Cause = iota
	// CauseTemplate: the template itself (guest never ready, worker launch
	// failed, clone fault on the template). It counts.
	CauseTemplate
)

// Policy is the quarantine's tuning.
type Policy struct {
	// Threshold is the number of consecutive template failures that
	// quarantines a key (at least 1).
	Threshold int
	// BackoffBase is the first quarantine period.
	BackoffBase time.Duration
	// BackoffMax caps the period, which doubles at each failed probe.
	BackoffMax time.Duration
}

// Backoff is the length of the n-th consecutive quarantine period of a key
// (n >= 1): BackoffBase doubled n-1 times, capped at BackoffMax.
func (p Policy) Backoff(n int) time.Duration {
	d := p.BackoffBase
	for i := 1; i < n && d < p.BackoffMax; i++ {
		d *= 2
	}
	if p.BackoffMax > 0 && d > p.BackoffMax {
		d = p.BackoffMax
	}
	return d
}

// State is where a key stands.
type State int

const (
	// Healthy: spawns use the key freely.
	Healthy State = iota
	// Quarantined: no spawn uses the key until Entry.Until; after that one
	// probe may.
	Quarantined
	// Probing: the one probe spawn is in flight; no other spawn uses the key.
	Probing
)

// String names the state for logs and status lines.
func (s State) String() string {
	switch s {
	case Quarantined:
		return "quarantined"
	case Probing:
		return "probing"
	}
	return "healthy"
}

// Entry is the state of one key.
type Entry struct {
	Key   string
	State State
	// Failures is the count of consecutive template failures.
	Failures int
	// Periods is the number of consecutive quarantine periods (0 when
	// healthy); the current one lasts Policy.Backoff(Periods).
	Periods int
	// Until is the end of the current quarantine period.
	Until time.Time
	// Reason is the last template failure, for humans.
	Reason string
}

// Verdict answers whether a spawn may use a key now.
type Verdict struct {
	// Allowed: the spawn may use the key.
	Allowed bool
	// Probe: the spawn would be (Check) or is (Begin) the probe.
	Probe bool
	// Entry is the key's state when refused (or probed).
	Entry Entry
}

// Transition is what an attempt's end changed.
type Transition int

const (
	// Unchanged: the key's state did not change (its count may have).
	Unchanged Transition = iota
	// Entered: the key was healthy and is now quarantined.
	Entered
	// Renewed: the probe failed; a longer period starts.
	Renewed
	// Lifted: a spawn succeeded; the key is healthy again.
	Lifted
)

// Book holds every key's state.
type Book struct {
	p   Policy
	now func() time.Time

	mu sync.Mutex
	m  map[string]*Entry // healthy keys with no failure are absent
}

// New returns an empty Book applying p, reading time from now.
func New(p Policy, now func() time.Time) *Book {
	if p.Threshold < 1 {
		p.Threshold = 1
	}
	return &Book{p: p, now: now, m: map[string]*Entry{}}
}

// Policy returns the policy the Book applies.
func (b *Book) Policy() Policy {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.p
}

// SetPolicy makes p the policy (a reload): the failures already counted
// stay; the next failure is judged against p's threshold, and the next
// back-off period is p's. A quarantine already running keeps its end.
func (b *Book) SetPolicy(p Policy) {
	if p.Threshold < 1 {
		p.Threshold = 1
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.p = p
}

// verdict decides for e at now; the caller holds b.mu.
func (b *Book) verdict(e *Entry, now time.Time) Verdict {
	switch {
	case e == nil || e.State == Healthy:
		return Verdict{Allowed: true}
	case e.State == Quarantined && !now.Before(e.Until):
		return Verdict{Allowed: true, Probe: true, Entry: *e}
	}
	return Verdict{Entry: *e}
}

// Check tells whether a spawn may use key now, without taking anything:
// the cheap test made before a job is booked. A spawn that passes it must
// still Begin, which may refuse (another probe started meanwhile).
func (b *Book) Check(key string) Verdict {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.verdict(b.m[key], b.now())
}

// Begin starts a spawn on key. When allowed it returns the Attempt the
// spawn must End exactly once; a probe holds the key's one probe slot
// until then.
func (b *Book) Begin(key string) (*Attempt, Verdict) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.m[key]
	v := b.verdict(e, b.now())
	if !v.Allowed {
		return nil, v
	}
	if v.Probe {
		e.State = Probing
		v.Entry = *e
	}
	return &Attempt{b: b, key: key, probe: v.Probe}, v
}

// Attempt is one spawn on a key, from Begin to End.
type Attempt struct {
	b     *Book
	key   string
	probe bool
	once  sync.Once
}

// Probe tells whether the attempt is the key's probe.
func (a *Attempt) Probe() bool { return a.probe }

// Key is the attempt's key.
func (a *Attempt) Key() string { return a.key }

// End records the attempt's outcome: ok, else the failure's cause and a
// reason for humans. It returns what changed and the key's state after.
// Calls after the first change nothing.
func (a *Attempt) End(ok bool, cause Cause, reason string) (Transition, Entry) {
	t, e := Unchanged, Entry{Key: a.key}
	a.once.Do(func() { t, e = a.b.end(a, ok, cause, reason) })
	return t, e
}

func (b *Book) end(a *Attempt, ok bool, cause Cause, reason string) (Transition, Entry) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.m[a.key]
	if ok {
		// Any success proves the template works.
		delete(b.m, a.key)
		if e != nil && e.State != Healthy {
			return Lifted, Entry{Key: a.key}
		}
		return Unchanged, Entry{Key: a.key}
	}
	if cause != CauseTemplate {
		// Says nothing of the template: give the probe slot back only.
		if e == nil {
			return Unchanged, Entry{Key: a.key}
		}
		if a.probe && e.State == Probing {
			e.State = Quarantined
		}
		return Unchanged, *e
	}
	if e == nil {
		e = &Entry{Key: a.key}
		b.m[a.key] = e
	}
	e.Failures++
	e.Reason = reason
	now := b.now()
	switch {
	case a.probe && e.State == Probing:
		e.State, e.Periods = Quarantined, e.Periods+1
		e.Until = now.Add(b.p.Backoff(e.Periods))
		return Renewed, *e
	case e.State == Healthy && e.Failures >= b.p.Threshold:
		e.State, e.Periods = Quarantined, 1
		e.Until = now.Add(b.p.Backoff(1))
		return Entered, *e
	}
	// Healthy below the threshold, or a spawn begun before the key was
	// quarantined: the period in force stands.
	return Unchanged, *e
}

// Quarantined returns the keys quarantined or probing, sorted by key.
func (b *Book) Quarantined() []Entry {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Entry
	for _, e := range b.m {
		if e.State != Healthy {
			out = append(out, *e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Lift ends key's quarantine at once (an operator fixed the template:
// `ctl quarantine lift`): the key is healthy again, its failure count
// cleared. A probe in flight ends on the healthy key (a failure counts
// from one again). It returns the entry lifted, and false when key was not
// quarantined.
func (b *Book) Lift(key string) (Entry, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.m[key]
	if e == nil || e.State == Healthy {
		return Entry{}, false
	}
	delete(b.m, key)
	return *e, true
}
