package lifecycle

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// want is the transitions table written out independently of phase.go:
// a change to one without the other fails TestTransitions.
var want = map[Phase][]Phase{
	Gone:         {Cloning, Provisioning, Claimed, Running, Started, Marked, Deleting},
	Cloning:      {Gone, Marked},
	Provisioning: {Idle, Gone, Marked},
	Idle:         {Claimed, Gone, Marked, Deleting},
	Claimed:      {Preparing, Gone, Marked},
	Preparing:    {Running, Marked},
	Running:      {Started, Gone, Marked, Deleting, Held},
	Started:      {Marked, Deleting},
	Marked:       {Deleting, Gone},
	Deleting:     {Destroyed, Marked, Gone, Started},
	Destroyed:    {Gone, Deleting},
	Held:         {Marked, Deleting, Gone},
}

// put brings name into phase p through allowed moves only.
func put(t *testing.T, tb *Table, name string, p Phase) {
	t.Helper()
	path := map[Phase][]Phase{
		Gone:         nil,
		Cloning:      {Cloning},
		Provisioning: {Provisioning},
		Idle:         {Provisioning, Idle},
		Claimed:      {Claimed},
		Preparing:    {Claimed, Preparing},
		Running:      {Running},
		Started:      {Started},
		Marked:       {Marked},
		Deleting:     {Deleting},
		Destroyed:    {Deleting, Destroyed},
		Held:         {Running, Held},
	}[p]
	for _, step := range path {
		_, err := tb.MoveAny(name, step)
		require.NoError(t, err)
	}
	require.Equal(t, p, tb.Phase(name))
}

func TestTransitions(t *testing.T) {
	clock := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	for _, from := range Phases() {
		allowed := map[Phase]bool{}
		for _, p := range want[from] {
			allowed[p] = true
		}
		for _, to := range Phases() {
			t.Run(from.String()+"->"+to.String(), func(t *testing.T) {
				tb := New(func() time.Time { return clock })
				put(t, tb, "vm", from)
				assert.Equal(t, allowed[to], Allowed(from, to))
				err := tb.Move("vm", from, to)
				if allowed[to] {
					require.NoError(t, err)
					assert.Equal(t, to, tb.Phase("vm"))
					_, ok := tb.Get("vm")
					assert.Equal(t, to != Gone, ok, "an entry exists unless gone")
					return
				}
				require.ErrorIs(t, err, ErrNotAllowed)
				assert.Equal(t, from, tb.Phase("vm"), "a refused move changes nothing")
			})
		}
		// From every phase, a move that names another starting phase is
		// refused whatever its target.
		for _, other := range Phases() {
			if other == from {
				continue
			}
			tb := New(func() time.Time { return clock })
			put(t, tb, "vm", from)
			for _, to := range want[other] {
				err := tb.Move("vm", other, to)
				require.ErrorIs(t, err, ErrWrongPhase, "%s: move %s->%s", from, other, to)
				require.Equal(t, from, tb.Phase("vm"))
			}
		}
	}
}

func TestMoveSetsFactsAndTimes(t *testing.T) {
	now := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	tb := New(func() time.Time { return now })
	pool := Pool{Model: "debian12", Flavor: "large"}
	require.NoError(t, tb.Move("provision-v2-a", Gone, Provisioning, WithPool(pool)))
	now = now.Add(time.Minute)
	require.NoError(t, tb.Move("provision-v2-a", Provisioning, Idle, WithDeadline(now.Add(time.Minute))))
	e, ok := tb.Get("provision-v2-a")
	require.True(t, ok)
	assert.Equal(t, Idle, e.Phase)
	assert.Equal(t, pool, e.Pool, "facts of earlier phases stay")
	assert.Equal(t, now, e.Since)
	assert.Equal(t, now.Add(-time.Minute), e.Created)
	assert.Equal(t, now.Add(time.Minute), e.Deadline)

	require.NoError(t, tb.Move("provision-v2-a", Idle, Claimed, WithRef("vm-7"), WithJob("42")))
	e, _ = tb.Get("provision-v2-a")
	assert.True(t, e.Deadline.IsZero(), "a deadline belongs to its phase")
	assert.Equal(t, "42", e.Job)
	assert.True(t, tb.RefIn("vm-7", Claimed))
	assert.False(t, tb.RefIn("vm-7", Idle))
	assert.False(t, tb.RefIn("", Claimed))
}

func TestSetKeepsPhase(t *testing.T) {
	now := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	tb := New(func() time.Time { return now })
	assert.False(t, tb.Set("w", Running, WithLaunched(now)), "no entry")
	require.NoError(t, tb.Move("w", Gone, Running, WithDeadline(now.Add(time.Minute))))
	assert.False(t, tb.Set("w", Started, WithLaunched(now)), "not in that phase")
	now = now.Add(time.Second)
	assert.True(t, tb.Set("w", Running, WithLaunched(now)))
	e, _ := tb.Get("w")
	assert.Equal(t, Running, e.Phase)
	assert.Equal(t, now, e.Launched)
	assert.Equal(t, now.Add(-time.Second), e.Since, "facts only: the phase's time stays")
	assert.Equal(t, now.Add(59*time.Second), e.Deadline)
}

func TestMoveFromReportsPhase(t *testing.T) {
	tb := New(nil)
	prev, err := tb.MoveFrom("w", []Phase{Gone, Idle}, Claimed)
	require.NoError(t, err)
	assert.Equal(t, Gone, prev)
	prev, err = tb.MoveFrom("w", []Phase{Gone, Idle}, Claimed)
	require.ErrorIs(t, err, ErrWrongPhase)
	assert.Equal(t, Claimed, prev)
	assert.Contains(t, err.Error(), `"w"`)
}

func TestExpire(t *testing.T) {
	now := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	tb := New(func() time.Time { return now })
	require.NoError(t, tb.Move("a", Gone, Running, WithDeadline(now.Add(time.Minute))))
	require.NoError(t, tb.Move("b", Gone, Running, WithDeadline(now.Add(2*time.Minute))))
	require.NoError(t, tb.Move("c", Gone, Running)) // no deadline: never expires
	require.NoError(t, tb.Move("d", Gone, Provisioning))
	require.NoError(t, tb.Move("d", Provisioning, Idle, WithDeadline(now)))

	early, err := tb.Expire(Running, now.Add(59*time.Second))
	require.NoError(t, err)
	assert.Empty(t, early)
	gone, err := tb.Expire(Running, now.Add(time.Minute))
	require.NoError(t, err)
	require.Len(t, gone, 1)
	assert.Equal(t, "a", gone[0].Name)
	assert.Equal(t, Gone, tb.Phase("a"))
	assert.Equal(t, Running, tb.Phase("b"))
	assert.Equal(t, Running, tb.Phase("c"))
	assert.Equal(t, Idle, tb.Phase("d"), "another phase's entries stay")
}

func TestAbsent(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	tb := New(func() time.Time { return t0 })
	assert.Zero(t, tb.Absent(VM{Name: "x"}, false, t0), "not marked: no absence")
	require.NoError(t, tb.Move("x", Gone, Marked))
	assert.Zero(t, tb.Absent(VM{Name: "x"}, false, t0))
	assert.Equal(t, 5*time.Minute, tb.Absent(VM{Name: "x"}, false, t0.Add(5*time.Minute)))
	assert.Zero(t, tb.Absent(VM{Name: "x"}, true, t0.Add(6*time.Minute)), "listed again: absence cleared")
	assert.Zero(t, tb.Absent(VM{Name: "x"}, false, t0.Add(7*time.Minute)))
	assert.Equal(t, time.Minute, tb.Absent(VM{Name: "x"}, false, t0.Add(8*time.Minute)))
	require.NoError(t, tb.Move("x", Marked, Deleting))
	require.NoError(t, tb.Move("x", Deleting, Marked))
	e, _ := tb.Get("x")
	assert.True(t, e.AbsentSince.IsZero(), "a new mark starts a new absence")
}

func TestReads(t *testing.T) {
	tb := New(nil)
	p1, p2 := Pool{Model: "a"}, Pool{V1: true, Model: "g/m", Flavor: "small"}
	require.NoError(t, tb.Move("p1", Gone, Provisioning, WithPool(p1)))
	require.NoError(t, tb.Move("p2", Gone, Provisioning, WithPool(p1)))
	require.NoError(t, tb.Move("p3", Gone, Provisioning, WithPool(p2)))
	require.NoError(t, tb.Move("p3", Provisioning, Idle))
	require.NoError(t, tb.Move("w", Gone, Running))

	assert.Equal(t, map[Phase]int{Provisioning: 2, Idle: 1, Running: 1}, tb.Counts())
	names := func(es []Entry) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.Name)
		}
		return out
	}
	assert.Equal(t, []string{"p1", "p2"}, names(tb.List(Provisioning)))
	assert.Equal(t, []string{"p1", "p2", "p3", "w"}, names(tb.Snapshot()))
	assert.True(t, tb.In("w", Idle, Running))
	assert.False(t, tb.In("w", Idle))
	assert.True(t, tb.In("nobody", Gone))
}

// TestConcurrentClaims: many goroutines claim the same idle VMs at once;
// each VM is claimed exactly once.
func TestConcurrentClaims(t *testing.T) {
	tb := New(nil)
	const vms, claimers = 20, 16
	for i := range vms {
		name := fmt.Sprintf("provision-v2-%02d", i)
		if i%2 == 0 { // half made by this run, half only in the inventory
			require.NoError(t, tb.Move(name, Gone, Provisioning))
			require.NoError(t, tb.Move(name, Provisioning, Idle))
		}
	}
	var claims [vms]atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range vms {
				name := fmt.Sprintf("provision-v2-%02d", i)
				_, err := tb.MoveFrom(name, []Phase{Gone, Idle}, Claimed)
				switch {
				case err == nil:
					claims[i].Add(1)
				case !errors.Is(err, ErrWrongPhase):
					t.Errorf("claim %s: %v", name, err)
				}
			}
		}()
	}
	// A surplus removal races the claims on the same VMs: a VM it marks
	// is not claimed, a claimed VM is not marked.
	var marked [vms]atomic.Int32
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-start
		for i := vms - 1; i >= 0; i-- {
			name := fmt.Sprintf("provision-v2-%02d", i)
			if _, err := tb.MoveFrom(name, []Phase{Gone, Idle}, Marked); err == nil {
				marked[i].Add(1)
			}
		}
	}()
	close(start)
	wg.Wait()
	for i := range vms {
		assert.Equal(t, int32(1), claims[i].Load()+marked[i].Load(), "vm %d taken exactly once", i)
		name := fmt.Sprintf("provision-v2-%02d", i)
		if claims[i].Load() == 1 {
			assert.Equal(t, Claimed, tb.Phase(name))
		} else {
			assert.Equal(t, Marked, tb.Phase(name))
		}
	}
}
