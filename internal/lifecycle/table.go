package lifecycle

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// ErrNotAllowed means the transitions table has no such move.
var ErrNotAllowed = errors.New("transition not allowed")

// ErrWrongPhase means the VM is not in the phase the move starts from.
var ErrWrongPhase = errors.New("not in the expected phase")

// Pool names a warm pool: the model (V2 template name, V1 model path), V1
// or V2, and the flavor ("" for neutral).
type Pool struct {
	V1     bool
	Model  string
	Flavor string
}

// Entry is what the table knows of one VM.
type Entry struct {
	// Name is the VM's name, the table's key.
	Name string
	// Ref is the VM's managed object id ("vm-42") once known, else "".
	Ref string
	// Phase is where the VM stands; Since is when it entered it, Created
	// when the table first recorded the VM.
	Phase   Phase
	Since   time.Time
	Created time.Time
	// Job is the job the VM is for, when known.
	Job string
	// Pool is the warm pool of a Provisioning, Idle or Claimed VM.
	Pool Pool
	// Deadline, when set, is when an Idle or Running entry expires.
	Deadline time.Time
	// Launched is when the worker was launched (Started).
	Launched time.Time
	// AbsentSince, when set, is since when a Marked VM has been missing
	// from the inventory.
	AbsentSince time.Time
}

// Option sets a fact on the entry a move leads to.
type Option func(*Entry)

// WithRef records the VM's managed object id.
func WithRef(ref string) Option { return func(e *Entry) { e.Ref = ref } }

// WithJob records the job the VM is for.
func WithJob(job string) Option { return func(e *Entry) { e.Job = job } }

// WithPool records the VM's warm pool.
func WithPool(p Pool) Option { return func(e *Entry) { e.Pool = p } }

// WithDeadline records when the entry expires.
func WithDeadline(t time.Time) Option { return func(e *Entry) { e.Deadline = t } }

// WithLaunched records when the VM's worker was launched.
func WithLaunched(t time.Time) Option { return func(e *Entry) { e.Launched = t } }

// Table is the in-memory lifecycle of the VMs this process works on, under
// one mutex. The zero value is not usable: build it with New.
type Table struct {
	mu      sync.Mutex
	now     func() time.Time
	entries map[string]*Entry
	// spawns holds the job keys of the spawns in flight (BeginSpawn).
	spawns map[string]struct{}
	// bugs holds the moves Must saw refused; onBug is told of each.
	bugs  []error
	onBug func(error)
}

// New returns an empty table reading the time from now (time.Now if nil).
func New(now func() time.Time) *Table {
	if now == nil {
		now = time.Now
	}
	return &Table{now: now, entries: map[string]*Entry{}, spawns: map[string]struct{}{}}
}

// OnBug sets the function told of every move Must saw refused (the
// hatchery logs it at ERROR); nil tells nobody. Call it before the table
// is shared.
func (t *Table) OnBug(f func(error)) { t.onBug = f }

// Must is Move for a move whose refusal would be a bug: the caller owns
// the VM in phase from and nothing else may move it meanwhile. A refusal
// changes nothing, is recorded (Bugs) and told to the OnBug function;
// tests fail on it.
func (t *Table) Must(name string, from, to Phase, opts ...Option) {
	err := t.Move(name, from, to, opts...)
	if err == nil {
		return
	}
	err = fmt.Errorf("lifecycle bug: %w", err)
	t.mu.Lock()
	t.bugs = append(t.bugs, err)
	f := t.onBug
	t.mu.Unlock()
	if f != nil {
		f(err)
	}
}

// Bugs returns the moves Must saw refused, oldest first.
func (t *Table) Bugs() []error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]error(nil), t.bugs...)
}

// Drop moves the VM name from phase from to Gone; a VM already Gone (no
// entry: another loop dropped it first) is not an error. A VM in another
// phase is refused with ErrWrongPhase and keeps it.
func (t *Table) Drop(name string, from Phase) error {
	cur, err := t.MoveFrom(name, []Phase{from, Gone}, Gone)
	if cur == Gone && errors.Is(err, ErrNotAllowed) {
		return nil // Gone -> Gone: nothing to drop
	}
	return err
}

// Move moves the VM name from phase from to phase to, setting the facts
// opts give, in one step: it fails with ErrWrongPhase when the VM is not in
// from (Gone: no entry) and with ErrNotAllowed when the transitions table
// has no from → to. A move to Gone removes the entry. Moving to the phase
// the VM is already in is refused like any move not listed.
func (t *Table) Move(name string, from, to Phase, opts ...Option) error {
	_, err := t.MoveFrom(name, []Phase{from}, to, opts...)
	return err
}

// MoveFrom is Move from any of the phases from; it returns the phase the
// VM was in (also on failure).
func (t *Table) MoveFrom(name string, from []Phase, to Phase, opts ...Option) (Phase, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur := Gone
	e := t.entries[name]
	if e != nil {
		cur = e.Phase
	}
	in := false
	for _, f := range from {
		if f == cur {
			in = true
			break
		}
	}
	if !in {
		return cur, fmt.Errorf("move vm %q to %s: it is %s: %w", name, to, cur, ErrWrongPhase)
	}
	if !Allowed(cur, to) {
		return cur, fmt.Errorf("move vm %q from %s to %s: %w", name, cur, to, ErrNotAllowed)
	}
	t.apply(name, e, to, opts)
	return cur, nil
}

// MoveAny moves the VM name to phase to from whatever phase it is in, if
// the transitions table allows it; it returns the phase it was in.
func (t *Table) MoveAny(name string, to Phase, opts ...Option) (Phase, error) {
	return t.MoveFrom(name, Phases(), to, opts...)
}

// apply performs an allowed move; t.mu is held.
func (t *Table) apply(name string, e *Entry, to Phase, opts []Option) {
	if to == Gone {
		delete(t.entries, name)
		return
	}
	now := t.now()
	if e == nil {
		e = &Entry{Name: name, Created: now}
		t.entries[name] = e
	}
	e.Phase, e.Since = to, now
	// Deadlines and absence belong to the phase they were set in.
	e.Deadline, e.AbsentSince = time.Time{}, time.Time{}
	for _, o := range opts {
		o(e)
	}
}

// Set sets facts on the entry of the VM name if it is in phase in, without
// moving it, and reports whether it did.
func (t *Table) Set(name string, in Phase, opts ...Option) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entries[name]
	if e == nil || e.Phase != in {
		return false
	}
	phase, since, created := e.Phase, e.Since, e.Created
	for _, o := range opts {
		o(e)
	}
	e.Name, e.Phase, e.Since, e.Created = name, phase, since, created
	return true
}

// Phase returns the phase of the VM name (Gone when the table has no entry).
func (t *Table) Phase(name string) Phase {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.entries[name]; e != nil {
		return e.Phase
	}
	return Gone
}

// Get returns a copy of the entry of the VM name.
func (t *Table) Get(name string) (Entry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.entries[name]; e != nil {
		return *e, true
	}
	return Entry{}, false
}

// In reports whether the VM name is in one of phases.
func (t *Table) In(name string, phases ...Phase) bool {
	p := t.Phase(name)
	for _, q := range phases {
		if p == q {
			return true
		}
	}
	return false
}

// RefIn reports whether an entry with managed object id ref is in one of
// phases (whatever its name: a renamed VM keeps its reference).
func (t *Table) RefIn(ref string, phases ...Phase) bool {
	if ref == "" {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.entries {
		if e.Ref != ref {
			continue
		}
		for _, p := range phases {
			if e.Phase == p {
				return true
			}
		}
	}
	return false
}

// List returns copies of the entries in one of phases (every entry when
// none is given), sorted by name.
func (t *Table) List(phases ...Phase) []Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Entry
	for _, e := range t.entries {
		if len(phases) == 0 || containsPhase(phases, e.Phase) {
			out = append(out, *e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Snapshot returns copies of every entry, sorted by name.
func (t *Table) Snapshot() []Entry { return t.List() }

// Counts returns how many entries each phase holds (Gone excluded).
func (t *Table) Counts() map[Phase]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[Phase]int{}
	for _, e := range t.entries {
		out[e.Phase]++
	}
	return out
}

// Expire removes the entries in phase p whose deadline is set and not after
// now, and returns them. Like any move it is checked: a phase the
// transitions table does not let move to Gone is refused with
// ErrNotAllowed and nothing expires.
func (t *Table) Expire(p Phase, now time.Time) ([]Entry, error) {
	if !Allowed(p, Gone) {
		return nil, fmt.Errorf("expire vms %s: move from %s to %s: %w", p, p, Gone, ErrNotAllowed)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Entry
	for name, e := range t.entries {
		if e.Phase == p && !e.Deadline.IsZero() && !now.Before(e.Deadline) {
			out = append(out, *e)
			delete(t.entries, name)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Absent records, for a Marked VM, whether the inventory listed it now:
// listed clears the absence; otherwise the first call starts it. It returns
// how long the VM has been missing (0 when listed, just starting, or not
// Marked).
func (t *Table) Absent(name string, listed bool, now time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entries[name]
	if e == nil || e.Phase != Marked {
		return 0
	}
	switch {
	case listed:
		e.AbsentSince = time.Time{}
		return 0
	case e.AbsentSince.IsZero():
		e.AbsentSince = now
		return 0
	}
	return now.Sub(e.AbsentSince)
}

// BeginSpawn records that a spawn for the job key (a job id, or the
// registration key of a V1 model) is in flight, and reports whether none
// was: false means another spawn of the job is in flight and this one must
// not start. This is the one record of "a spawn is in flight for job J";
// CanSpawn, SpawnWorker and the cleanup all ask it (SpawnInFlight).
func (t *Table) BeginSpawn(job string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.spawns[job]; ok {
		return false
	}
	t.spawns[job] = struct{}{}
	return true
}

// EndSpawn records that the spawn for the job key returned.
func (t *Table) EndSpawn(job string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.spawns, job)
}

// SpawnInFlight reports whether a spawn for the job key is in flight.
func (t *Table) SpawnInFlight(job string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.spawns[job]
	return ok
}

func containsPhase(ps []Phase, p Phase) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}
