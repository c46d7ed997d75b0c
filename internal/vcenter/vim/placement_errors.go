package vim

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// The placement lookups' errors: a setting vCenter resolves to no object
// or to several (internal/vcenter's lookups make them, its placement cache
// keeps them with a back-off, /mon/status lists them).

// MaxCandidates bounds the objects a PlacementError lists: a datacenter
// may hold hundreds of pools or port groups, and the first ones show what
// the setting should look like.
const MaxCandidates = 20

// PlacementError is a placement setting that vCenter resolves to no object
// or to several: a problem of the configuration, not of the connection.
// Candidates are the inventory paths the setting could name (the matches
// when several matched, else the objects of that kind that exist), at most
// MaxCandidates of them; More counts those left out.
type PlacementError struct {
	// What is the kind of object ("resource pool", "folder", "datastore",
	// "network").
	What string
	// Setting is the configuration key ("resourcePoolString").
	Setting string
	// Value is the setting's value ("" for the datacenter's default).
	Value string
	// Ambiguous is true when several objects matched, false when none did.
	Ambiguous bool
	// Candidates are inventory paths; More counts those not listed.
	Candidates []string
	More       int
	// Err is the finder's error (ErrAmbiguous wraps it when Ambiguous).
	Err error
}

// Error names the setting, what vCenter answered and the candidates.
func (e *PlacementError) Error() string {
	var b strings.Builder
	if e.Value == "" {
		fmt.Fprintf(&b, "find default %s (%s empty): ", e.What, e.Setting)
	} else {
		fmt.Fprintf(&b, "find %s %q (%s): ", e.What, e.Value, e.Setting)
	}
	b.WriteString(e.Err.Error())
	switch {
	case e.Ambiguous && len(e.Candidates) > 0:
		fmt.Fprintf(&b, "; set %s to one of: %s", e.Setting, e.candidates())
	case e.Ambiguous:
		fmt.Fprintf(&b, "; set %s to one inventory path", e.Setting)
	case len(e.Candidates) > 0:
		fmt.Fprintf(&b, "; existing: %s", e.candidates())
	default:
		fmt.Fprintf(&b, "; no %s is visible to this user", e.What)
	}
	return b.String()
}

func (e *PlacementError) candidates() string {
	s := strings.Join(e.Candidates, ", ")
	if e.More > 0 {
		s += fmt.Sprintf(" (and %d more)", e.More)
	}
	return s
}

// Unwrap returns the finder's error and vctypes.ErrPlacementUnresolved.
func (e *PlacementError) Unwrap() []error { return []error{e.Err, vctypes.ErrPlacementUnresolved} }

// PlacementProblem is a placement setting whose lookup fails now (cached
// with a back-off), for /mon/status.
type PlacementProblem struct {
	// Setting is the configuration key ("resourcePoolString").
	Setting string
	// Err is the lookup's error (a *PlacementError).
	Err error
	// Since is the first failure; Retry is the next lookup.
	Since, Retry time.Time
}

// PlacementErrorOf returns err's *PlacementError, nil when it has none.
func PlacementErrorOf(err error) *PlacementError {
	var pe *PlacementError
	if errors.As(err, &pe) {
		return pe
	}
	return nil
}

// Bounded returns at most MaxCandidates of names and how many were left
// out.
func Bounded(names []string) ([]string, int) {
	if len(names) <= MaxCandidates {
		return names, 0
	}
	return names[:MaxCandidates], len(names) - MaxCandidates
}
