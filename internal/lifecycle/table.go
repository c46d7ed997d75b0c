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

// ErrNameTaken means a move would give a VM a name another VM's entry
// bears; the error is an ErrWrongPhase too (the name is in that entry's
// phase, not the one the move starts from).
var ErrNameTaken = errors.New("name borne by another vm")

// VM names a VM to the table's readers: its managed object id ("vm-42"),
// "" when unknown, and its name. The entry of a VM is the one holding its
// reference; a VM whose reference the table does not hold is found by its
// name, if an entry without a reference bears it (a clone or a
// provisioning that has not reported its VM yet).
type VM struct {
	Ref  string
	Name string
}

// Pool names a warm pool: the model (V2 template name, V1 model path), V1
// or V2, and the flavor ("" for neutral).
type Pool struct {
	V1     bool
	Model  string
	Flavor string
}

// Entry is what the table knows of one VM.
type Entry struct {
	// Name is the name the VM was last moved under. A rename (a claim)
	// keeps the entry: the names it bore before still find it, until
	// another VM's entry takes one or the entry leaves.
	Name string
	// Ref is the VM's managed object id ("vm-42") once known, else "":
	// the table's key for the VM. Without it the entry is found by name.
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

	// forget lists names the move drops from the entry (Forget).
	forget []string
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

// Forget drops name from the names that find the entry: a name the VM was
// to take and never took.
func Forget(name string) Option { return func(e *Entry) { e.forget = append(e.forget, name) } }

// Table is the in-memory lifecycle of the VMs this process works on, under
// one mutex. The zero value is not usable: build it with New.
type Table struct {
	mu  sync.Mutex
	now func() time.Time
	// entries holds every entry; byRef finds one by its VM's reference,
	// byName by any name it bore that no other entry took since.
	entries map[*Entry]struct{}
	byRef   map[string]*Entry
	byName  map[string]*Entry
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
	return &Table{now: now, entries: map[*Entry]struct{}{}, byRef: map[string]*Entry{}, byName: map[string]*Entry{},
		spawns: map[string]struct{}{}}
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

// Drop moves the VM name (its reference, when WithRef gives it) from phase
// from to Gone; a VM already Gone (no entry: another loop dropped it
// first) is not an error. A VM in another phase is refused with
// ErrWrongPhase and keeps it.
func (t *Table) Drop(name string, from Phase, opts ...Option) error {
	cur, err := t.MoveFrom(name, []Phase{from, Gone}, Gone, opts...)
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
//
// The VM is the one whose reference WithRef gives, if the table holds it;
// else the entry without a reference bearing name (which takes the
// reference); else none (Gone). A move of a known VM under another name
// renames its entry (a claim); the name must not be another entry's
// (ErrNameTaken). A move without a reference never finds a Destroyed
// entry that has one: its name is free for a new VM.
func (t *Table) Move(name string, from, to Phase, opts ...Option) error {
	_, err := t.MoveFrom(name, []Phase{from}, to, opts...)
	return err
}

// MoveFrom is Move from any of the phases from; it returns the phase the
// VM was in (also on failure).
func (t *Table) MoveFrom(name string, from []Phase, to Phase, opts ...Option) (Phase, error) {
	var probe Entry
	for _, o := range opts {
		o(&probe)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.findMove(probe.Ref, name)
	cur := Gone
	if e != nil {
		cur = e.Phase
	}
	if !containsPhase(from, cur) {
		return cur, fmt.Errorf("move vm %q to %s: it is %s: %w", name, to, cur, ErrWrongPhase)
	}
	if !Allowed(cur, to) {
		return cur, fmt.Errorf("move vm %q from %s to %s: %w", name, cur, to, ErrNotAllowed)
	}
	if e != nil && to != Gone && name != e.Name {
		if other := t.byName[name]; other != nil && other != e {
			// From the name's side, the move finds it in another phase.
			return cur, fmt.Errorf("move vm %q (was %q) from %s to %s: it is %s: %w: %w", name, e.Name, cur, to, other.Phase, ErrNameTaken, ErrWrongPhase)
		}
	}
	t.apply(name, probe.Ref, e, to, opts)
	return cur, nil
}

// MoveAny moves the VM name to phase to from whatever phase it is in, if
// the transitions table allows it; it returns the phase it was in.
func (t *Table) MoveAny(name string, to Phase, opts ...Option) (Phase, error) {
	return t.MoveFrom(name, Phases(), to, opts...)
}

// find returns the entry of vm (nil: Gone); t.mu is held.
func (t *Table) find(vm VM) *Entry {
	if vm.Ref != "" {
		if e := t.byRef[vm.Ref]; e != nil {
			return e
		}
		if e := t.byName[vm.Name]; e != nil && e.Ref == "" {
			return e
		}
		return nil
	}
	return t.byName[vm.Name]
}

// findMove is find for a move: a move naming no reference never finds a
// Destroyed entry that holds one (that VM is gone; the name is free), nor
// an entry by a name it bore before its last rename (a claimed pool VM's
// slot name: the VM has another name now, and the slot's name is free for
// the refill's new VM, whose move takes it).
func (t *Table) findMove(ref, name string) *Entry {
	e := t.find(VM{Ref: ref, Name: name})
	if e != nil && ref == "" && e.Ref != "" && (e.Phase == Destroyed || e.Name != name) {
		return nil
	}
	return e
}

// apply performs an allowed move; t.mu is held.
func (t *Table) apply(name, ref string, e *Entry, to Phase, opts []Option) {
	if to == Gone {
		if e != nil {
			t.remove(e)
		}
		return
	}
	now := t.now()
	if e == nil {
		e = &Entry{Name: name, Created: now}
		t.entries[e] = struct{}{}
	}
	t.name(e, name)
	e.Phase, e.Since = to, now
	// Deadlines and absence belong to the phase they were set in.
	e.Deadline, e.AbsentSince = time.Time{}, time.Time{}
	for _, o := range opts {
		o(e)
	}
	if ref != "" && t.byRef[ref] == nil {
		t.byRef[ref] = e
	}
	for _, n := range e.forget {
		if n != e.Name && t.byName[n] == e {
			delete(t.byName, n)
		}
	}
	e.forget = nil
}

// name makes name find e (taking it from an entry that bore it before,
// which its reference still finds); t.mu is held.
func (t *Table) name(e *Entry, name string) {
	e.Name = name
	t.byName[name] = e
}

// remove deletes e and every way to find it; t.mu is held.
func (t *Table) remove(e *Entry) {
	delete(t.entries, e)
	if e.Ref != "" && t.byRef[e.Ref] == e {
		delete(t.byRef, e.Ref)
	}
	for n, x := range t.byName {
		if x == e {
			delete(t.byName, n)
		}
	}
}

// Set sets facts on the entry of the VM name if it is in phase in, without
// moving it, and reports whether it did.
func (t *Table) Set(name string, in Phase, opts ...Option) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.byName[name]
	if e == nil || e.Phase != in {
		return false
	}
	phase, since, created, ref, ename := e.Phase, e.Since, e.Created, e.Ref, e.Name
	for _, o := range opts {
		o(e)
	}
	e.Name, e.Phase, e.Since, e.Created, e.forget = ename, phase, since, created, nil
	if e.Ref != ref {
		switch {
		case ref == "" && t.byRef[e.Ref] == nil:
			t.byRef[e.Ref] = e // learnt its reference
		default:
			e.Ref = ref // a reference is never changed
		}
	}
	return true
}

// Phase returns the phase of the entry the name finds (Gone when none
// does). A reader holding the VM's reference asks PhaseOf.
func (t *Table) Phase(name string) Phase { return t.PhaseOf(VM{Name: name}) }

// Get returns a copy of the entry the name finds.
func (t *Table) Get(name string) (Entry, bool) { return t.GetVM(VM{Name: name}) }

// In reports whether the entry the name finds is in one of phases.
func (t *Table) In(name string, phases ...Phase) bool { return t.InVM(VM{Name: name}, phases...) }

// PhaseOf returns the phase of vm: the entry holding its reference, else
// the entry without a reference bearing its name (Gone when none). A
// renamed VM keeps its phase under every name a snapshot shows it by.
func (t *Table) PhaseOf(vm VM) Phase {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.find(vm); e != nil {
		return e.Phase
	}
	return Gone
}

// GetVM returns a copy of the entry of vm (found as PhaseOf finds it).
func (t *Table) GetVM(vm VM) (Entry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.find(vm); e != nil {
		return *e, true
	}
	return Entry{}, false
}

// InVM reports whether vm is in one of phases.
func (t *Table) InVM(vm VM, phases ...Phase) bool { return containsPhase(phases, t.PhaseOf(vm)) }

// RefIn reports whether an entry with managed object id ref is in one of
// phases (whatever its name: a renamed VM keeps its reference).
func (t *Table) RefIn(ref string, phases ...Phase) bool {
	if ref == "" {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.byRef[ref]
	return e != nil && containsPhase(phases, e.Phase)
}

// List returns copies of the entries in one of phases (every entry when
// none is given), sorted by name.
func (t *Table) List(phases ...Phase) []Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Entry
	for e := range t.entries {
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
	for e := range t.entries {
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
	for e := range t.entries {
		if e.Phase == p && !e.Deadline.IsZero() && !now.Before(e.Deadline) {
			out = append(out, *e)
			t.remove(e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Absent records, for a Marked VM, whether the inventory listed it now:
// listed clears the absence; otherwise the first call starts it. It returns
// how long the VM has been missing (0 when listed, just starting, or not
// Marked).
func (t *Table) Absent(vm VM, listed bool, now time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.find(vm)
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
