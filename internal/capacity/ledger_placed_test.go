package capacity

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
)

// TestDecidePlaced: the placement is chosen under the ledger's lock from
// the reservations there are (so that a second decision counts the
// first's placement), the reservation carries it, a placement's refusal
// is the decision's and reserves nothing, an unknown footprint is
// reserved (zero) once placed, and a capacity refusal never asks the
// placement.
func TestDecidePlaced(t *testing.T) {
	t.Parallel()
	l := NewLedger()
	var seen [][]Placed
	place := func(pl string) Place {
		return func(res []Placed) (string, string, Decision) {
			seen = append(seen, res)
			if pl == "" {
				return "", "", Refuse(refusal.ReasonPlacement, "no placement fits")
			}
			return pl, "ds-" + pl, Decision{}
		}
	}
	decide := func(key string, in Input, p Place) Outcome {
		g := l.Begin()
		defer l.End(g, testT0, 0)
		return l.DecidePlaced(g, testT0, 0, Usage{}, in, Reservation{Key: key}, p)
	}
	known := Input{Next: testSmall, Known: true}

	o := decide("job-1", known, place("a"))
	require.True(t, o.Decision.Allowed)
	require.NotNil(t, o.Held)
	assert.Equal(t, "a", o.Held.Placement)
	assert.Equal(t, "ds-a", o.Held.Datastore)
	pl, ds, ok := l.PlacementOf("job-1")
	assert.True(t, ok)
	assert.Equal(t, []string{"a", "ds-a"}, []string{pl, ds})

	o = decide("job-2", known, place("b"))
	require.True(t, o.Decision.Allowed)
	assert.Equal(t, []Placed{{Placement: "a", Footprint: testSmall, Counted: true, Held: true}}, seen[1], "the first decision's placement is counted")

	o = decide("job-3", known, place(""))
	assert.False(t, o.Decision.Allowed)
	assert.Equal(t, refusal.ReasonPlacement, o.Decision.Reason)
	assert.Nil(t, o.Held)
	_, _, ok = l.PlacementOf("job-3")
	assert.False(t, ok)

	o = decide("job-4", Input{}, place("a"))
	require.True(t, o.Decision.Allowed)
	require.NotNil(t, o.Held, "an unknown footprint is reserved once placed")
	assert.Equal(t, Footprint{}, o.Held.Footprint)

	asked := len(seen)
	o = decide("job-5", Input{MaxCPUs: 1, Next: testSmall, Known: true}, place("a"))
	assert.Equal(t, refusal.ReasonCapacityCPU, o.Decision.Reason)
	assert.Len(t, seen, asked, "a capacity refusal does not ask the placement")

	// Released with no decision needing it: forgotten, no longer counted.
	require.True(t, l.Release("job-1", testT0, 0))
	decide("job-6", known, place("a"))
	assert.Equal(t, []Placed{
		{Placement: "b", Footprint: testSmall, Counted: true, Held: true},
		{Placement: "a", Counted: true, Held: true},
	}, seen[len(seen)-1])
	assert.Equal(t, 3, l.Len(), "job-2, job-4 and job-6 held; job-1 forgotten")
}
