package placement

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// safeBuf is a log buffer safe for concurrent writes.
type safeBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *safeBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func newBook(t *testing.T, backoff bool) (*Book, *clock, *safeBuf) {
	t.Helper()
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	buf := &safeBuf{}
	b := NewBook(BookOptions{Names: []string{"a", "b"}, Backoff: backoff, Now: c.now,
		Log: slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	return b, c, buf
}

func hostDown() error {
	return &vctypes.Fault{Kind: vctypes.FaultHostUnavailable, Err: errors.New("host not responding")}
}

func TestBookCordon(t *testing.T) {
	t.Parallel()
	b, _, buf := newBook(t, true)
	require.NoError(t, b.Cordon("a", "uid 1000"))
	ok, why := b.Eligible("a")
	assert.False(t, ok)
	assert.Equal(t, Why{WhyCordoned, "cordoned by uid 1000"}, why)
	assert.Equal(t, StateCordoned, b.State("a"))
	assert.True(t, b.Cordoned("a"))
	ok, _ = b.Eligible("b")
	assert.True(t, ok)
	require.NoError(t, b.Uncordon("a", "uid 1000"))
	ok, _ = b.Eligible("a")
	assert.True(t, ok)
	assert.Equal(t, StateActive, b.State("a"))
	err := b.Cordon("c", "uid 1")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "there are: a, b")
	assert.Error(t, b.Uncordon("c", "uid 1"))
	assert.Equal(t, 1, strings.Count(buf.String(), "placement cordoned"))
	assert.Equal(t, 1, strings.Count(buf.String(), "placement uncordoned"))
}

func TestBookBackoff(t *testing.T) {
	t.Parallel()
	b, c, buf := newBook(t, true)

	// A fault of the template does not point at the placement.
	assert.False(t, b.Failed("a", "job-1", &vctypes.Fault{Kind: vctypes.FaultNotFound, Err: errors.New("no template")}))
	assert.Equal(t, StateActive, b.State("a"))

	assert.True(t, b.Failed("a", "job-1", hostDown()))
	assert.Equal(t, StateBackingOff, b.State("a"))
	ok, why := b.Eligible("a")
	assert.False(t, ok)
	assert.Equal(t, WhyBackingOff, why.Code)
	assert.Contains(t, why.String(), "backing off until")
	// A clone sent earlier failing too changes nothing, logs nothing more.
	assert.True(t, b.Failed("a", "job-1", hostDown()))
	assert.Equal(t, 1, strings.Count(buf.String(), "level=ERROR"))
	st := b.Statuses()[0]
	assert.Equal(t, StateBackingOff, st.State)
	assert.Equal(t, c.now().Add(BackoffFirst), st.Until)
	assert.Equal(t, uint64(3), st.CloneFailures)

	// Back-off over: one probe.
	c.add(BackoffFirst)
	assert.Equal(t, StateProbing, b.State("a"))
	ok, _ = b.Eligible("a")
	require.True(t, ok)
	assert.True(t, b.Take("a", "job-1"))
	ok, why = b.Eligible("a")
	assert.False(t, ok, "one probe at a time")
	assert.Equal(t, Why{WhyProbing, "probe clone in flight"}, why)

	// The probe fails: twice as long.
	assert.True(t, b.Failed("a", "job-1", hostDown()))
	assert.Equal(t, StateBackingOff, b.State("a"))
	assert.Equal(t, c.now().Add(2*BackoffFirst), b.Statuses()[0].Until)
	for i := 0; i < 6; i++ {
		c.add(BackoffMax)
		b.Take("a", "job-1")
		b.Failed("a", "job-1", hostDown())
	}
	assert.Equal(t, c.now().Add(BackoffMax), b.Statuses()[0].Until, "at most BackoffMax")

	// The next probe succeeds: active again, one INFO line.
	c.add(BackoffMax)
	require.True(t, b.Take("a", "job-1"))
	b.Succeeded("a", "job-1")
	assert.Equal(t, StateActive, b.State("a"))
	assert.Equal(t, 1, strings.Count(buf.String(), "placement back in service"))
	assert.Equal(t, 1, strings.Count(buf.String(), "level=ERROR"), buf.String())
	assert.Equal(t, uint64(1), b.Statuses()[0].Clones)

	// The next back-off starts from BackoffFirst again.
	b.Failed("a", "job-1", hostDown())
	assert.Equal(t, c.now().Add(BackoffFirst), b.Statuses()[0].Until)
}

func TestBookProbeWithoutOutcome(t *testing.T) {
	t.Parallel()
	b, c, _ := newBook(t, true)
	b.Failed("a", "job-1", hostDown())
	c.add(BackoffFirst)
	b.Take("a", "job-1")
	b.Ended("a", "job-2")
	ok, _ := b.Eligible("a")
	assert.False(t, ok, "another clone's end is not the probe's")
	b.Failed("a", "job-0", hostDown())
	assert.Equal(t, StateProbing, b.State("a"), "a clone sent before the back-off failing is not the probe: no new back-off")
	b.Ended("a", "job-1")
	ok, _ = b.Eligible("a")
	assert.True(t, ok, "a probe that ended without an outcome lets the next go")
	b.Take("a", "job-1")
	c.add(ProbeTimeout)
	ok, _ = b.Eligible("a")
	assert.True(t, ok, "a probe never heard of lets the next go after ProbeTimeout")
}

func TestBookWithoutBackoff(t *testing.T) {
	t.Parallel()
	b, _, buf := newBook(t, false)
	assert.True(t, b.Failed("a", "job-1", hostDown()), "still says the fault points at the placement")
	assert.Equal(t, StateActive, b.State("a"))
	assert.NotContains(t, buf.String(), "backing off")
}

func TestBookStatuses(t *testing.T) {
	t.Parallel()
	b, _, _ := newBook(t, true)
	st := b.Statuses()
	require.Len(t, st, 2)
	assert.Equal(t, "a", st[0].Name)
	assert.Equal(t, Unknown, st[0].HeadroomCPUs)
	b.Observe([]Figures{{
		Placement: config.Placement{Name: "b", MaxCPUs: 16, DatastoreFloorGB: 10},
		VMs:       2, CPUs: 4, MemoryMB: 4096, TasksInFlight: 1, Pool: pool(8192), InFlightMemoryMB: 1024,
		Datastores: []Datastore{space("ds2", 50), {Name: "ds3"}},
	}})
	st = b.Statuses()
	assert.Equal(t, Status{Name: "b", State: StateActive, VMs: 2, CPUs: 4, MemoryMB: 4096, TasksInFlight: 1,
		HeadroomCPUs: 12, HeadroomMemoryMB: 7168,
		Datastores: []DatastoreStatus{
			{Name: "ds2", FreeBytes: 50 * gb, CapacityBytes: 1000 * gb, FloorBytes: 10 * gb, Accessible: true},
			{Name: "ds3", FloorBytes: 10 * gb},
		}}, st[1])
	require.NoError(t, b.Cordon("b", "uid 0"))
	assert.Equal(t, "cordoned by uid 0", b.Statuses()[1].Reason)
}
