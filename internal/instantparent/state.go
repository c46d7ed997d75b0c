package instantparent

import (
	"sync"
	"time"
)

// Quarantine back-off of a parent key: the first failure is rebuilt at
// once (the next pass), each further one in a row waits twice as long,
// from BackoffMin up to BackoffMax. A parent that serves again (ready)
// ends the run of failures.
const (
	BackoffMin = 30 * time.Second
	BackoffMax = 10 * time.Minute
)

// DemandTTL is how long a flavor a job asked for keeps its parent wanted
// after the last such job (State.Demand).
const DemandTTL = 30 * time.Minute

// State is what a run remembers of its parents between passes: the
// parents ready to fork from (the last plan's), the keys in quarantine,
// the parents a spawn found failed, the builds in flight and the flavors
// in demand. Safe for concurrent use: the spawns read it while the loop
// writes it. Lost on restart: the next pass rebuilds it from the records.
type State struct {
	mu       sync.Mutex
	ready    map[Key]Parent
	failed   map[string]string
	building map[Key]bool
	pending  map[Key]pending
	quar     map[Key]quarantine
	demand   map[Key]time.Time
}

// pending is a parent this run built that the inventory did not show yet.
type pending struct {
	name string
	at   time.Time
}

// PendingTTL bounds how long a parent built by this run counts as built
// while the inventory does not show it (a lagging snapshot): past it, the
// key is built again.
const PendingTTL = 5 * time.Minute

type quarantine struct {
	failures int
	until    time.Time
	reason   string
}

// NewState returns an empty State.
func NewState() *State {
	return &State{ready: map[Key]Parent{}, failed: map[string]string{}, building: map[Key]bool{},
		pending: map[Key]pending{}, quar: map[Key]quarantine{}, demand: map[Key]time.Time{}}
}

// Ready returns the parent children of k may be forked from now: ready
// at the last pass and not found failed since.
func (s *State) Ready(k Key) (Parent, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.ready[k]
	if !ok || s.failed[p.Name] != "" {
		return Parent{}, false
	}
	return p, true
}

// Why tells why k has no ready parent, for the spawn's fallback line.
func (s *State) Why(k Key, now time.Time) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q, ok := s.quar[k]; ok && now.Before(q.until) {
		return "parent in quarantine: " + q.reason
	}
	if p, ok := s.ready[k]; ok && s.failed[p.Name] != "" {
		return "parent failed: " + s.failed[p.Name]
	}
	if s.building[k] {
		return "parent being built"
	}
	if k.Flavor != "" {
		return "no parent of flavor " + k.Flavor + " yet (one is built for it)"
	}
	return "no parent ready"
}

// MarkFailed records that the parent named name failed (a fork from it
// failed, reason says how): it serves no child from now on, and the
// next pass destroys it and quarantines its key.
func (s *State) MarkFailed(name, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed[name] == "" {
		s.failed[name] = reason
	}
}

// Failed returns the parents marked failed, by name (a copy).
func (s *State) Failed() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.failed))
	for k, v := range s.failed {
		out[k] = v
	}
	return out
}

// Building returns the keys being built, and those whose parent this run
// built and the inventory does not show yet (a copy): none is built again.
func (s *State) Building() map[Key]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[Key]bool, len(s.building)+len(s.pending))
	for k := range s.building {
		out[k] = true
	}
	for k := range s.pending {
		out[k] = true
	}
	return out
}

// Built records that the parent name of k was built: k counts as being
// built until the inventory shows it (Seen) or PendingTTL passes.
func (s *State) Built(k Key, name string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending[k] = pending{name: name, at: now}
}

// Seen drops the built parents that have shows, and those built more than
// PendingTTL ago.
func (s *State) Seen(have []Parent, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	shown := map[string]bool{}
	for _, p := range have {
		shown[p.Name] = true
	}
	for k, p := range s.pending {
		if shown[p.name] || now.Sub(p.at) > PendingTTL {
			delete(s.pending, k)
		}
	}
}

// BeginBuild records that k's parent is being built; false when it is
// already.
func (s *State) BeginBuild(k Key) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.building[k] {
		return false
	}
	s.building[k] = true
	return true
}

// EndBuild ends k's build; a failed build (reason non-empty) counts as a
// failure of the key (Quarantine).
func (s *State) EndBuild(k Key, now time.Time, reason string) {
	s.mu.Lock()
	delete(s.building, k)
	s.mu.Unlock()
	if reason != "" {
		s.Quarantine(k, now, reason)
	}
}

// Quarantine counts a failure of k's parent: no child is forked from k
// and no parent of k is built before the back-off ends (none after the
// first failure in a row, then BackoffMin doubling to BackoffMax).
func (s *State) Quarantine(k Key, now time.Time, reason string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.quar[k]
	wait := time.Duration(0)
	if q.failures > 0 {
		wait = BackoffMin << (q.failures - 1)
		if wait > BackoffMax || wait <= 0 {
			wait = BackoffMax
		}
	}
	q.failures++
	q.until, q.reason = now.Add(wait), reason
	s.quar[k] = q
	delete(s.ready, k)
	return q.until
}

// Quarantined tells whether k may not be built yet.
func (s *State) Quarantined(k Key, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.quar[k]
	return ok && now.Before(q.until)
}

// Apply installs a pass's plan: its ready parents are the ones spawns
// fork from; a ready parent ends its key's run of failures; the failure
// marks of parents the plan removes or no longer sees are dropped.
func (s *State) Apply(p Plan) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ready = make(map[Key]Parent, len(p.Ready))
	seen := map[string]bool{}
	for k, v := range p.Ready {
		s.ready[k] = v
		seen[v.Name] = true
		delete(s.quar, k)
	}
	for _, v := range p.Starting {
		seen[v.Name] = true
	}
	for name := range s.failed {
		if !seen[name] {
			delete(s.failed, name)
		}
	}
}

// Want records that a job of an instant model asked for k (its flavor):
// k's parent is wanted until DemandTTL after the last such job.
func (s *State) Want(k Key, now time.Time) {
	if k.Flavor == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.demand[k] = now
}

// Demand returns the flavored keys asked for within DemandTTL, and
// forgets the older ones.
func (s *State) Demand(now time.Time) []Key {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Key
	for k, at := range s.demand {
		if now.Sub(at) > DemandTTL {
			delete(s.demand, k)
			continue
		}
		out = append(out, k)
	}
	return out
}

// ReadyCount is the number of ready parents (status, tests).
func (s *State) ReadyCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ready)
}
