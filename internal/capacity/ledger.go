package capacity

import (
	"sync"
	"time"
)

// ReservationTTL bounds how long the footprint of a spawn in flight is
// counted when its release never comes (the framework decided not to
// spawn after all, or a spawn goroutine was lost). It is longer than a
// clone plus the readiness waits of a spawn, so a slow spawn keeps its
// reservation until its VM is powered on and visible.
const ReservationTTL = 10 * time.Minute

// Reservation is the footprint a decision reserved for a spawn in flight
// (under Key: the job id, or ProvisionKey for a provisioning clone) until
// the spawn's VM is visible powered on, or it is released.
type Reservation struct {
	Key string
	// Model and Flavor name the worker, for logs.
	Model     string
	Flavor    string
	Footprint Footprint
	Created   time.Time
	// Placement and Datastore are where the decision sent the clone
	// (internal/placement; empty without [[placements]]).
	Placement string
	Datastore string
	// released is 0 while the spawn is in flight, else the generation of
	// its release; releasedAt is when. seen is the generation at which a
	// decision's snapshot first showed the key's VM powered on (0 never).
	released   uint64
	releasedAt time.Time
	seen       uint64
}

// Generation identifies when a decision began (Ledger.Begin).
type Generation uint64

// Ledger tracks the footprint of spawns in flight (docs/design.md#allocated).
// Its mutex guards in-memory state only and is never held across a vCenter
// call: decisions Begin, read the inventory and the pool, then Decide
// (which locks, decides and reserves), then End.
//
// A spawn is counted through its reservation until a decision's inventory
// snapshot shows its VM powered on, then through the VM. A released
// reservation (a "tombstone") can still be needed, because a snapshot may
// not show the VM the spawn just powered on:
//   - a decision that began (took the generation) before the release may
//     have read the inventory before the VM was there: it counts the
//     tombstone. Every release bumps the generation.
//   - a shared inventory shows a write only after its next refresh: a
//     tombstone is also counted for a grace after its release, unless the
//     snapshot shows the VM.
//
// A tombstone is forgotten once no running decision began before its
// release and either its grace is over or a snapshot showed its VM (later
// snapshots show it too, or show it stopped). The guarantees that follow
// are in the package comment.
type Ledger struct {
	mu     sync.Mutex
	gen    uint64
	active map[uint64]int // generation at begin → decisions running
	res    []*Reservation // in creation order
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger { return &Ledger{active: map[uint64]int{}} }

// Begin registers a decision about to read the inventory.
func (l *Ledger) Begin() Generation {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.gen
	l.active[g]++
	return Generation(g)
}

// End unregisters a decision begun at g and forgets the tombstones no
// running decision needs any more.
func (l *Ledger) End(g Generation, now time.Time, grace time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.active[uint64(g)]--; l.active[uint64(g)] <= 0 {
		delete(l.active, uint64(g))
	}
	l.gcLocked(now, grace)
}

// gcLocked forgets released reservations no running decision needs.
func (l *Ledger) gcLocked(now time.Time, grace time.Duration) {
	oldest, found := uint64(0), false
	for g := range l.active {
		if !found || g < oldest {
			oldest, found = g, true
		}
	}
	kept := l.res[:0]
	for _, r := range l.res {
		if r.released != 0 && (!found || r.released <= oldest) &&
			(!now.Before(r.releasedAt.Add(grace)) || (r.seen != 0 && (!found || r.seen <= oldest))) {
			continue
		}
		kept = append(kept, r)
	}
	clear(l.res[len(kept):])
	l.res = kept
}

// expireLocked drops the in-flight reservations older than ReservationTTL
// and returns them for logging.
func (l *Ledger) expireLocked(now time.Time) []Reservation {
	var expired []Reservation
	kept := l.res[:0]
	for _, r := range l.res {
		if r.released == 0 && !now.Before(r.Created.Add(ReservationTTL)) {
			expired = append(expired, *r)
			continue
		}
		kept = append(kept, r)
	}
	clear(l.res[len(kept):])
	l.res = kept
	return expired
}

// inFlightLocked sums the reservations a decision begun at generation g
// must count at now: the in-flight ones and the tombstones it may not see
// (released after g, or within grace of their release), in both cases
// unless its snapshot shows the key's VM powered on (visible); excluding
// key's own in-flight reservation (replaced if the decision allows).
func (l *Ledger) inFlightLocked(g uint64, now time.Time, grace time.Duration, key string, visible map[string]bool) (Footprint, int) {
	var sum Footprint
	n := 0
	for _, r := range l.res {
		if r.Key != "" && visible[r.Key] {
			if r.seen == 0 {
				l.gen++
				r.seen = l.gen
			}
			continue
		}
		if r.released != 0 && r.released <= g && !now.Before(r.releasedAt.Add(grace)) {
			continue
		}
		if r.released == 0 && key != "" && r.Key == key {
			continue
		}
		sum = sum.Add(r.Footprint)
		n++
	}
	return sum, n
}

// reserveLocked records r, replacing an in-flight reservation of the same
// key, and returns the record.
func (l *Ledger) reserveLocked(r Reservation) *Reservation {
	if r.Key != "" {
		for i, o := range l.res {
			if o.released == 0 && o.Key == r.Key {
				l.res[i] = &r
				return &r
			}
		}
	}
	l.res = append(l.res, &r)
	return &r
}

// heldLocked returns the number of reservations not yet released and
// their sum.
func (l *Ledger) heldLocked() (int, Footprint) {
	n, sum := 0, Footprint{}
	for _, r := range l.res {
		if r.released == 0 {
			n++
			sum = sum.Add(r.Footprint)
		}
	}
	return n, sum
}

// Outcome is what Decide did under the ledger's lock.
type Outcome struct {
	// Input is the decision's input completed with Used and InFlight.
	Input    Input
	Decision Decision
	// Counted is how many reservations were counted in flight.
	Counted int
	// Held is the reservation made (nil when none).
	Held *Reservation
	// Expired are the reservations dropped for their age, to be logged.
	Expired []Reservation
}

// Decide is the atomic part of a decision begun at g (before the inventory
// was read): it drops expired reservations, adds the spawns in flight the
// snapshot's usage does not show to it, decides on in and, when allowed
// with a known footprint, reserves in.Next under r.Key (r's Model and
// Flavor are for logs).
func (l *Ledger) Decide(g Generation, now time.Time, grace time.Duration, usage Usage, in Input, r Reservation) Outcome {
	return l.DecidePlaced(g, now, grace, usage, in, r, nil)
}

// Placed is one reservation as a placement decision counts it: where it
// went, its footprint, whether the decision counts it in flight (its VM
// not shown by the snapshot) and whether its spawn is still running.
type Placed struct {
	Placement string
	Footprint Footprint
	Counted   bool
	Held      bool
}

// Place chooses, under the ledger's lock, where an allowed clone goes,
// given the reservations there are (so that two concurrent decisions
// each count the other's): the placement and datastore, or a refusal
// (Reason set).
type Place func(res []Placed) (placement, datastore string, refused Decision)

// DecidePlaced is Decide whose allowing decision also chooses the clone's
// placement with place (nil: none), under the same lock: the reservation
// carries it, and a placement's refusal is the decision's. With a
// placement chosen, a reservation is made even for an unknown footprint
// (zero), so that its placement counts the clone in flight.
func (l *Ledger) DecidePlaced(g Generation, now time.Time, grace time.Duration, usage Usage, in Input, r Reservation, place Place) Outcome {
	l.mu.Lock()
	defer l.mu.Unlock()
	var o Outcome
	o.Expired = l.expireLocked(now)
	inflight, n := l.inFlightLocked(uint64(g), now, grace, r.Key, usage.Keys)
	in.Used = usage.Footprint.Add(inflight)
	in.InFlight = inflight
	o.Input, o.Decision, o.Counted = in, Decide(in), n
	if o.Decision.Allowed && place != nil {
		pl, ds, refused := place(l.placedLocked(uint64(g), now, grace, r.Key, usage.Keys))
		if refused.Reason != "" {
			o.Decision = refused
			return o
		}
		r.Placement, r.Datastore = pl, ds
	}
	if o.Decision.Allowed && (in.Known || r.Placement != "") {
		if in.Known {
			r.Footprint = in.Next
		}
		r.Created = now
		o.Held = l.reserveLocked(r)
	}
	return o
}

// placedLocked lists the reservations with a placement as a decision
// begun at g counts them (inFlightLocked's rule), key's own excluded.
func (l *Ledger) placedLocked(g uint64, now time.Time, grace time.Duration, key string, visible map[string]bool) []Placed {
	var out []Placed
	for _, r := range l.res {
		if r.Placement == "" || (r.released == 0 && key != "" && r.Key == key) {
			continue
		}
		counted := !(r.Key != "" && visible[r.Key]) &&
			!(r.released != 0 && r.released <= g && !now.Before(r.releasedAt.Add(grace)))
		out = append(out, Placed{Placement: r.Placement, Footprint: r.Footprint, Counted: counted, Held: r.released == 0})
	}
	return out
}

// PlacementOf returns the placement and datastore of key's in-flight
// reservation; false when it has none with a placement.
func (l *Ledger) PlacementOf(key string) (placement, datastore string, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.res {
		if r.released == 0 && r.Key == key && r.Placement != "" {
			return r.Placement, r.Datastore, true
		}
	}
	return "", "", false
}

// View is a report's reading of the ledger against one snapshot.
type View struct {
	// InFlight is what a decision would count in flight now.
	InFlight Footprint
	// Held and HeldFootprint are the reservations not yet released.
	Held          int
	HeldFootprint Footprint
	// Expired are the reservations dropped for their age, to be logged.
	Expired []Reservation
}

// View reads, for a report begun at g whose snapshot's usage is usage,
// what a decision would count in flight, and reserves nothing.
func (l *Ledger) View(g Generation, now time.Time, grace time.Duration, usage Usage) View {
	l.mu.Lock()
	defer l.mu.Unlock()
	var v View
	v.Expired = l.expireLocked(now)
	v.InFlight, _ = l.inFlightLocked(uint64(g), now, grace, "", usage.Keys)
	v.Held, v.HeldFootprint = l.heldLocked()
	return v
}

// Held returns the number of reservations not yet released and their sum.
func (l *Ledger) Held() (int, Footprint) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.heldLocked()
}

// Len is the number of reservations the ledger keeps (in flight and
// tombstones).
func (l *Ledger) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.res)
}

// GiveBack forgets r at once if it is still in flight: a reservation
// given back before any spawn used it. No VM was cloned under it, so no
// decision can miss one and no grace applies. It tells whether r was
// still held.
func (l *Ledger) GiveBack(r *Reservation) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, o := range l.res {
		if o == r && o.released == 0 {
			l.res = append(l.res[:i], l.res[i+1:]...)
			return true
		}
	}
	return false
}

// Drop forgets the in-flight reservation of key at once, without the
// grace: for a VM known to hold nothing any more (a provisioned VM powered
// off). A decision whose snapshot still shows it powered on counts it
// through the VM.
func (l *Ledger) Drop(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, r := range l.res {
		if r.released == 0 && r.Key == key {
			l.res = append(l.res[:i], l.res[i+1:]...)
			return true
		}
	}
	return false
}

// Release marks the oldest in-flight reservation of key released at now:
// its spawn ended. It tells whether there was one.
func (l *Ledger) Release(key string, now time.Time, grace time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.res {
		if r.released == 0 && r.Key == key {
			l.gen++
			r.released, r.releasedAt = l.gen, now
			l.gcLocked(now, grace)
			return true
		}
	}
	return false
}
