package hatchery

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient"
)

// connection is one scripted call of a websocket subscription: whether
// the API accepted it, and how long it stayed up (or the dial took).
type connection struct {
	accepted bool
	lived    time.Duration
}

// runEvents drives eventsLoop through the scripted connections on a test
// clock: each subscription advances the clock by its lifetime, each wait
// between them by its delay, and records the delay. It returns the delays
// waited after each connection.
func runEvents(t *testing.T, script []connection) []time.Duration {
	t.Helper()
	clock := testutil.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var delays []time.Duration
	f := &Framework{
		log: slog.New(slog.NewTextHandler(&testutil.SyncBuffer{}, nil)),
		now: clock.Now,
		iv:  Intervals{BackoffMin: time.Second, BackoffMax: 30 * time.Second},
		sleep: func(_ context.Context, d time.Duration) bool {
			delays = append(delays, d)
			clock.Advance(d)
			return true
		},
		inflight: map[string]struct{}{},
	}
	next := 0
	subscribe := func(ctx context.Context, _ chan<- int64) error {
		if next == len(script) {
			cancel() // the script is over
			<-ctx.Done()
			return ctx.Err()
		}
		c := script[next]
		next++
		if c.accepted {
			cdsclient.Connected(ctx)
		}
		clock.Advance(c.lived)
		if c.accepted {
			return errors.New("connection reset")
		}
		return errors.New("dial: connection refused")
	}
	eventsLoop(ctx, f, "v1", make(chan struct{}, 1), subscribe, func(id int64) candidate { return candidate{v1ID: id} })
	return delays
}

// TestEventsBackoffRestartsAfterAnAcceptedConnection: the scenario of a
// second API outage 25 s after the first. The first outage's failed dials
// double the delay (1, 2, 4, 8, 16 s); once the API accepted a connection
// that stayed up 25 s, the next drop is a new outage, retried after
// BackoffMin again (the rule before waited 30 s: it reset only after a
// connection that outlived BackoffMax).
func TestEventsBackoffRestartsAfterAnAcceptedConnection(t *testing.T) {
	t.Parallel()
	refused := connection{lived: 100 * time.Millisecond}
	delays := runEvents(t, []connection{
		refused, refused, refused, refused, refused,
		{accepted: true, lived: 25 * time.Second},
		refused, refused,
	})
	s := time.Second
	assert.Equal(t, []time.Duration{1 * s, 2 * s, 4 * s, 8 * s, 16 * s, 1 * s, 2 * s, 4 * s}, delays)
}

// TestEventsBackoffKeepsDoublingOnAcceptedThenDropped: an API that accepts
// each connection and drops it at once (within BackoffMin) is not taken
// for an API back up: the delay keeps doubling to BackoffMax.
func TestEventsBackoffKeepsDoublingOnAcceptedThenDropped(t *testing.T) {
	t.Parallel()
	flap := connection{accepted: true, lived: 200 * time.Millisecond}
	delays := runEvents(t, []connection{flap, flap, flap, flap, flap, flap, flap})
	s := time.Second
	assert.Equal(t, []time.Duration{1 * s, 2 * s, 4 * s, 8 * s, 16 * s, 30 * s, 30 * s}, delays)
}
