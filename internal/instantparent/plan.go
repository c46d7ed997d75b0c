package instantparent

import (
	"sort"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// Parent is a parent VM as the inventory shows it: a VM of this hatchery
// whose record says instant_parent, named as the record names it.
type Parent struct {
	// Name is the VM's name.
	Name string
	// Ref is the VM's reference: what a child is forked from.
	Ref vctypes.Ref
	// Key is the parent's template, placement and flavor, from its record.
	Key Key
	// Version is its record's parent_template (TemplateVersion).
	Version string
	// Created is its record's creation time.
	Created time.Time
	// Power is its power state.
	Power vctypes.PowerState
	// GuestUp: the guest answers (it reports an address or guest
	// operations are ready).
	GuestUp bool
	// IP is its recorded address, "" for DHCP.
	IP string
	// CPUs and MemoryMB are its size: a child has its parent's.
	CPUs     int64
	MemoryMB int64
}

// Failure is why a parent can serve no child, "" when it can.
func (p Parent) Failure(now time.Time, guestGrace time.Duration) string {
	switch {
	case p.Power == vctypes.PoweredOff:
		return "powered off"
	case p.Power == vctypes.Suspended:
		return "suspended"
	case !p.GuestUp && now.Sub(p.Created) > guestGrace:
		return "guest gone: no address, no guest operations"
	}
	return ""
}

// Removal is a parent to destroy, and why.
type Removal struct {
	Parent Parent
	Reason string
	// Failed: the parent failed (powered off, guest gone, or marked
	// failed by a spawn): its key is quarantined.
	Failed bool
}

// Plan is one pass's decision.
type Plan struct {
	// Ready are the parents children may be forked from, by key.
	Ready map[Key]Parent
	// Starting are the parents kept while their guest comes up.
	Starting []Parent
	// Build are the parents to build, in key order.
	Build []Want
	// Remove are the parents to destroy.
	Remove []Removal
}

// Input is what Decide reads.
type Input struct {
	// Wants are the parents the configuration asks for (Wants).
	Wants []Want
	// Have are the parents the inventory shows.
	Have []Parent
	// Failed are the parents a spawn found failed since the last pass
	// (State.MarkFailed), by name.
	Failed map[string]string
	// Building are the keys whose parent is being built now.
	Building map[Key]bool
	// Quarantined tells whether a key may not be built yet (State.Quarantined).
	Quarantined func(Key) bool
	// Now and GuestGrace: a parent whose guest does not answer GuestGrace
	// after its creation is failed.
	Now        time.Time
	GuestGrace time.Duration
}

// Decide is one pass's decision (docs/instant-clones.md): every parent
// the configuration no longer asks for is destroyed (no instant model
// uses it); a parent of a template that changed is destroyed (replaced);
// of two parents of one key the older is kept, the younger destroyed
// whatever its state; a failed parent (powered off, suspended, guest
// gone, or found failed by a spawn) is destroyed and its key quarantined;
// every wanted key without a parent, whose template is found, that is not
// being built nor in quarantine, is built.
// A parent whose guest is still coming up is kept but not ready.
func Decide(in Input) Plan {
	plan := Plan{Ready: map[Key]Parent{}}
	wants := map[Key]Want{}
	for _, w := range in.Wants {
		wants[w.Key] = w
	}
	have := append([]Parent(nil), in.Have...)
	sort.Slice(have, func(i, j int) bool {
		if !have[i].Created.Equal(have[j].Created) {
			return have[i].Created.Before(have[j].Created)
		}
		return have[i].Name < have[j].Name
	})
	served := map[Key]bool{}
	for _, p := range have {
		w, wanted := wants[p.Key]
		var reason string
		failed := false
		switch {
		case !wanted:
			reason = "no instant model uses it"
		case w.Version != "" && p.Version != w.Version:
			reason = "its template changed: replaced"
		case served[p.Key]:
			// Before the failures: a second parent is destroyed whatever
			// its state, and its state is no failure of the key (another
			// instance of this hatchery destroying its own duplicate
			// powers it off first).
			reason = "a second parent of " + p.Key.String()
		case in.Failed[p.Name] != "":
			reason, failed = "failed: "+in.Failed[p.Name], true
		case p.Failure(in.Now, in.GuestGrace) != "":
			reason, failed = "failed: "+p.Failure(in.Now, in.GuestGrace), true
		}
		if reason != "" {
			plan.Remove = append(plan.Remove, Removal{Parent: p, Reason: reason, Failed: failed})
			continue
		}
		served[p.Key] = true
		if p.GuestUp {
			plan.Ready[p.Key] = p
		} else {
			plan.Starting = append(plan.Starting, p)
		}
	}
	for _, w := range in.Wants {
		k := w.Key
		if served[k] || w.Version == "" || in.Building[k] || (in.Quarantined != nil && in.Quarantined(k)) {
			continue
		}
		plan.Build = append(plan.Build, w)
	}
	return plan
}
