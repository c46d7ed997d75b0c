package placement

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// The back-off of a placement whose clones fail with faults that point at
// it (vctypes.PointsAtPlacement): the first lasts BackoffFirst, each
// failed probe doubles it, up to BackoffMax. Like the template
// quarantine, it stops sending clones where they fail for minutes, and
// looks again soon enough for a host back from maintenance.
const (
	BackoffFirst = time.Minute
	BackoffMax   = 10 * time.Minute
)

// ProbeTimeout bounds how long a probe clone is waited for: a probe
// whose outcome never comes (the job was given to another hatchery after
// the decision) lets another probe go after it.
const ProbeTimeout = 10 * time.Minute

// Book keeps the placements' states: cordoned by an operator, backing off
// after faults that point at them, probing once the back-off ended; their
// clone counters and the figures last read for them. It implements Set.
// Safe for concurrent use; its mutex guards memory only.
type Book struct {
	log     *slog.Logger
	now     func() time.Time
	backoff bool

	mu      sync.Mutex
	order   []string
	entries map[string]*entry
}

// entry is one placement's state.
type entry struct {
	cordoned   bool
	cordonedBy string
	// backingOff: faults point at it; until is when the back-off ends,
	// delay its length (doubled by a failed probe), fault the kind.
	backingOff bool
	until      time.Time
	delay      time.Duration
	fault      string
	// probeSince is when the probe clone was sent (zero: none in flight),
	// probeKey the key of its reservation (a job, a warm-pool slot).
	probeSince time.Time
	probeKey   string

	clones, failures uint64
	figures          Figures
	read             bool
}

// BookOptions configure a Book.
type BookOptions struct {
	// Names are the placements, in configuration order.
	Names []string
	// Backoff enables the back-off: with one placement and no
	// [[placements]] the hatchery keeps its behaviour of before placements
	// (the template quarantine alone), so it is off.
	Backoff bool
	// Log receives the back-off's lines and the cordons.
	Log *slog.Logger
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// NewBook returns a Book of the placements named, all active.
func NewBook(o BookOptions) *Book {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := &Book{log: log, now: now, backoff: o.Backoff, entries: map[string]*entry{}}
	for _, n := range o.Names {
		if _, dup := b.entries[n]; dup {
			continue
		}
		b.order = append(b.order, n)
		b.entries[n] = &entry{}
	}
	return b
}

// Names are the placements, in configuration order.
func (b *Book) Names() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.order...)
}

// unknownLocked is the error of a name not in the book.
func (b *Book) unknownLocked(name string) error {
	return fmt.Errorf("placement %q: no such placement (there are: %s)", name, strings.Join(b.order, ", "))
}

// Cordon implements Set: no new clone goes to the placement (its idle
// warm-pool VMs are still claimed) until Uncordon.
func (b *Book) Cordon(name, by string) error { return b.setCordon(name, by, true) }

// Uncordon implements Set: the placement takes clones again (unless it
// is backing off).
func (b *Book) Uncordon(name, by string) error { return b.setCordon(name, by, false) }

// setCordon cordons (on) or uncordons the placement named, logging one
// line when its state changes.
func (b *Book) setCordon(name, by string, on bool) error {
	b.mu.Lock()
	e, ok := b.entries[name]
	if !ok {
		err := b.unknownLocked(name)
		b.mu.Unlock()
		return err
	}
	changed := e.cordoned != on
	e.cordoned, e.cordonedBy = on, ""
	if on {
		e.cordonedBy = by
	}
	b.mu.Unlock()
	if !changed {
		return nil
	}
	msg := "placement uncordoned"
	if on {
		msg = "placement cordoned"
	}
	b.log.Info(msg, logkey.Placement, name, "by", by)
	return nil
}

// Cordoned tells whether the placement is cordoned.
func (b *Book) Cordoned(name string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[name]
	return ok && e.cordoned
}

// Eligible tells whether the placement may take a clone now, and why not:
// not cordoned, not backing off; once its back-off ended, one probe at a
// time. It changes nothing: Take records the probe of the placement a
// decision takes.
func (b *Book) Eligible(name string) (bool, Why) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[name]
	if !ok {
		return false, Why{WhyUnknown, "unknown placement"}
	}
	return b.eligibleLocked(e, b.now())
}

// eligibleLocked is Eligible's rule.
func (b *Book) eligibleLocked(e *entry, now time.Time) (bool, Why) {
	switch {
	case e.cordoned:
		return false, Why{WhyCordoned, "cordoned by " + e.cordonedBy}
	case !e.backingOff:
		return true, Why{}
	case now.Before(e.until):
		return false, Why{WhyBackingOff, fmt.Sprintf("backing off until %s after %s", e.until.UTC().Format(time.RFC3339), e.fault)}
	case !e.probeSince.IsZero() && now.Sub(e.probeSince) < ProbeTimeout:
		return false, Why{WhyProbing, "probe clone in flight"}
	}
	return true, Why{}
}

// Take records that a decision sent the clone of key (its reservation's:
// a job, a warm-pool slot) to the placement: after its back-off that clone
// is the probe, and no other is sent until it ends (Succeeded, Failed,
// Ended with its key) or ProbeTimeout passes. It tells whether the clone
// is a probe.
func (b *Book) Take(name, key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[name]
	if !ok || !e.backingOff {
		return false
	}
	e.probeSince, e.probeKey = b.now(), key
	return true
}

// isProbeLocked tells whether key's clone is e's probe in flight.
func (e *entry) isProbeLocked(key string) bool {
	return !e.probeSince.IsZero() && e.probeKey == key
}

// Succeeded records that key's clone succeeded in the placement: the
// probe's success ends the back-off (one INFO line).
func (b *Book) Succeeded(name, key string) {
	b.mu.Lock()
	e, ok := b.entries[name]
	if !ok {
		b.mu.Unlock()
		return
	}
	e.clones++
	ended := e.backingOff && e.isProbeLocked(key)
	var lasted time.Duration
	if ended {
		lasted = b.now().Sub(e.until.Add(-e.delay))
		e.backingOff, e.probeSince, e.probeKey, e.delay, e.fault = false, time.Time{}, "", 0, ""
	}
	b.mu.Unlock()
	if ended {
		b.log.Info("placement back in service", logkey.Placement, name, logkey.Detail, "probe clone succeeded", "backed_off_for", lasted.Round(time.Second).String())
	}
}

// Failed records that key's clone failed in the placement with err and tells
// whether err points at the placement (vctypes.PointsAtPlacement): then,
// when the back-off is enabled, an active placement backs off for
// BackoffFirst (one ERROR line) and a failed probe doubles its back-off
// (BackoffMax at most). A fault that points elsewhere (the template, the
// guest) changes no state.
func (b *Book) Failed(name, key string, err error) bool {
	points := vctypes.PointsAtPlacement(err)
	b.mu.Lock()
	e, ok := b.entries[name]
	if !ok {
		b.mu.Unlock()
		return points
	}
	e.failures++
	if !points || !b.backoff {
		b.mu.Unlock()
		return points
	}
	now := b.now()
	kind := vctypes.KindOf(err).Error()
	started, probeFailed := false, false
	switch {
	case !e.backingOff:
		e.backingOff, e.delay, started = true, BackoffFirst, true
	case e.isProbeLocked(key):
		e.delay = min(2*e.delay, BackoffMax)
		probeFailed = true
	default:
		// A clone sent before the back-off began, or beside the probe:
		// the back-off stands.
		b.mu.Unlock()
		return true
	}
	e.until, e.fault, e.probeSince, e.probeKey = now.Add(e.delay), kind, time.Time{}, ""
	until, delay := e.until, e.delay
	b.mu.Unlock()
	switch {
	case started:
		b.log.Error("placement backing off", logkey.Placement, name, logkey.Reason, kind, logkey.Err, err,
			"until", until.UTC().Format(time.RFC3339), "backoff", delay.String())
	case probeFailed:
		b.log.Info("placement probe failed, backing off longer", logkey.Placement, name, logkey.Reason, kind,
			logkey.Err, err, "until", until.UTC().Format(time.RFC3339), "backoff", delay.String())
	}
	return true
}

// Ended records that key's clone, sent to the placement, ended without an
// outcome about it (the spawn stopped before cloning, claimed a warm-pool
// VM instead, or the decision's reservation was given back): when it was
// the probe, the next one may go.
func (b *Book) Ended(name, key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.entries[name]; ok && e.isProbeLocked(key) {
		e.probeSince, e.probeKey = time.Time{}, ""
	}
}

// Observe keeps figs, a decision's figures, for Statuses.
func (b *Book) Observe(figs []Figures) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, f := range figs {
		if e, ok := b.entries[f.Placement.Name]; ok {
			e.figures, e.read = f, true
			e.figures.Datastores = append([]Datastore(nil), f.Datastores...)
		}
	}
}

// State is the placement's state now.
func (b *Book) State(name string) State {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[name]
	if !ok {
		return ""
	}
	s, _ := b.stateLocked(e, b.now())
	return s
}

// stateLocked is an entry's state and why it is not active.
func (b *Book) stateLocked(e *entry, now time.Time) (State, string) {
	switch {
	case e.cordoned:
		return StateCordoned, "cordoned by " + e.cordonedBy
	case e.backingOff && now.Before(e.until):
		return StateBackingOff, e.fault
	case e.backingOff:
		return StateProbing, e.fault
	}
	return StateActive, ""
}

// Statuses implements Set: every placement in configuration order, with
// the figures the last decision read.
func (b *Book) Statuses() []Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	out := make([]Status, 0, len(b.order))
	for _, n := range b.order {
		e := b.entries[n]
		s := Status{Name: n, Clones: e.clones, CloneFailures: e.failures,
			HeadroomCPUs: Unknown, HeadroomMemoryMB: Unknown}
		s.State, s.Reason = b.stateLocked(e, now)
		if s.State == StateBackingOff {
			s.Until = e.until
		}
		if e.read {
			f := e.figures
			s.VMs, s.CPUs, s.MemoryMB, s.TasksInFlight = f.VMs, f.CPUs, f.MemoryMB, f.TasksInFlight
			s.HeadroomCPUs, s.HeadroomMemoryMB = HeadroomOf(f)
			for _, d := range f.Datastores {
				ds := DatastoreStatus{Name: d.Name, FloorBytes: f.FloorBytes()}
				if d.Space != nil {
					ds.FreeBytes, ds.CapacityBytes, ds.Accessible = d.Space.FreeBytes, d.Space.CapacityBytes, d.Space.Accessible
				}
				s.Datastores = append(s.Datastores, ds)
			}
		}
		out = append(out, s)
	}
	return out
}

var _ Set = (*Book)(nil)
