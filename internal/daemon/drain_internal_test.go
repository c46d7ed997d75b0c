package daemon

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
)

// fakeDrainer drains when its test closes drained.
type fakeDrainer struct {
	drained chan struct{}
	asked   []string
}

func (f *fakeDrainer) Drain(who string) <-chan struct{} {
	f.asked = append(f.asked, who)
	return f.drained
}
func (f *fakeDrainer) InFlight() int { return 2 }

// TestDrainAtStop: a bound of 0 drains nothing; a drain that ends returns
// at once; one past its bound logs one WARN and lets the shutdown go on
// (the test's bound is 50 ms: without the bound the stop would wait for
// ever); the framework stopping meanwhile returns its error. Not
// parallel: TestStartWithUnreachableVCenter counts the package's
// goroutines, a paused parallel test's among them.
func TestDrainAtStop(t *testing.T) {
	logs := &testutil.SyncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))

	f := &fakeDrainer{drained: make(chan struct{})}
	err, returned := drainAtStop(f, 0, nil, log)
	assert.NoError(t, err)
	assert.False(t, returned)
	assert.Empty(t, f.asked, "no drain with drainTimeout 0")

	close(f.drained)
	err, returned = drainAtStop(f, time.Hour, nil, log)
	assert.NoError(t, err)
	assert.False(t, returned)
	assert.Equal(t, []string{"stop"}, f.asked)
	assert.Empty(t, logs.String())

	f = &fakeDrainer{drained: make(chan struct{})}
	start := time.Now()
	err, returned = drainAtStop(f, 50*time.Millisecond, nil, log)
	assert.NoError(t, err)
	assert.False(t, returned)
	assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)
	assert.Equal(t, 1, strings.Count(logs.String(), `level=WARN msg="drain timed out, stopping with spawns in flight" drain_timeout=50ms in_flight=2`), logs.String())

	fwErr := make(chan error, 1)
	fwErr <- errors.New("too many consecutive heartbeat failures")
	err, returned = drainAtStop(f, time.Hour, fwErr, log)
	assert.EqualError(t, err, "too many consecutive heartbeat failures")
	assert.True(t, returned)
}
