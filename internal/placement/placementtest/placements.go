// Package placementtest holds a fake placement.Set for the tests of what
// operators see of the placements. It lives beside internal/placement, not
// in internal/testutil: the sdk tests import testutil, and placement
// imports internal/config, which imports the sdk (an import cycle).
package placementtest

import (
	"fmt"
	"strings"
	"sync"

	"github.com/cds-contrib/hatchery-vsphere/internal/placement"
)

// Placements is a placement.Set for the tests of what operators see of the
// placements (/mon/status, the metrics, ctl): it answers the statuses it
// holds and cordons and uncordons them by name, recording who did. It
// decides nothing (internal/placement does).
type Placements struct {
	mu  sync.Mutex
	sts []placement.Status
	// by are the callers of Cordon and Uncordon, in order.
	by []string
}

// NewPlacements returns a set holding sts, in that order.
func NewPlacements(sts ...placement.Status) *Placements {
	return &Placements{sts: append([]placement.Status(nil), sts...)}
}

// Set replaces the statuses.
func (p *Placements) Set(sts ...placement.Status) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sts = append([]placement.Status(nil), sts...)
}

// Statuses implements placement.Set.
func (p *Placements) Statuses() []placement.Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]placement.Status, len(p.sts))
	for i, s := range p.sts {
		s.Datastores = append([]placement.DatastoreStatus(nil), s.Datastores...)
		out[i] = s
	}
	return out
}

// Cordon implements placement.Set: the placement is cordoned, its reason
// "cordoned by BY".
func (p *Placements) Cordon(name, by string) error {
	return p.change(name, by, func(s *placement.Status) {
		s.State, s.Reason = placement.StateCordoned, "cordoned by "+by
	})
}

// Uncordon implements placement.Set: a cordoned placement is active
// again; any other is left as it is (idempotent, as internal/placement's
// Book).
func (p *Placements) Uncordon(name, by string) error {
	return p.change(name, by, func(s *placement.Status) {
		if s.State == placement.StateCordoned {
			s.State, s.Reason = placement.StateActive, ""
		}
	})
}

// By returns the callers of the cordons and uncordons of known placements.
func (p *Placements) By() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.by...)
}

func (p *Placements) change(name, by string, f func(*placement.Status)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var names []string
	for i := range p.sts {
		if p.sts[i].Name == name {
			f(&p.sts[i])
			p.by = append(p.by, by)
			return nil
		}
		names = append(names, p.sts[i].Name)
	}
	return fmt.Errorf("no placement %q (placements: %s)", name, strings.Join(names, ", "))
}
