package vcenter

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// TestCachedLookupCoalescesConcurrentMisses: a burst of lookups of a key
// not cached yet resolves it once; the others wait for that resolution.
func TestCachedLookupCoalescesConcurrentMisses(t *testing.T) {
	t.Parallel()
	p := newPlacementCache(nil)
	release := make(chan struct{})
	var calls atomic.Int32
	resolve := func() (string, error) {
		calls.Add(1)
		<-release
		return "pool-1", nil
	}
	const n = 20
	var wg sync.WaitGroup
	got := make([]string, n)
	started := make(chan struct{}, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			started <- struct{}{}
			v, err := cachedLookup(context.Background(), p, "pool", "p", resolve)
			assert.NoError(t, err)
			got[i] = v
		}(i)
	}
	for i := 0; i < n; i++ {
		<-started
	}
	// Every goroutine is past its start; the leader is blocked in resolve.
	require.Eventually(t, func() bool { return p.inflight.Len() == 1 }, 5*time.Second, time.Millisecond)
	close(release)
	wg.Wait()
	assert.Equal(t, int32(1), calls.Load(), "resolved once for the burst")
	for _, v := range got {
		assert.Equal(t, "pool-1", v)
	}
}

// TestCachedLookupLeaderFailure: when the resolution in flight fails, a
// waiter resolves on its own; errors are not cached.
func TestCachedLookupLeaderFailure(t *testing.T) {
	t.Parallel()
	p := newPlacementCache(nil)
	wait, done := p.inflight.Lead(placementKey{"pool", "p"})
	require.Nil(t, wait)
	res := make(chan error, 1)
	go func() {
		v, err := cachedLookup(context.Background(), p, "pool", "p", func() (string, error) { return "pool-2", nil })
		if err == nil && v != "pool-2" {
			err = errors.New("wrong value " + v)
		}
		res <- err
	}()
	require.Eventually(t, func() bool { return p.inflight.Len() == 1 }, 5*time.Second, time.Millisecond)
	done() // the leader failed: nothing stored
	require.NoError(t, <-res)

	ctx, cancel := context.WithCancel(context.Background())
	_, done = p.inflight.Lead(placementKey{"pool", "q"})
	defer done()
	cancel()
	_, err := cachedLookup(ctx, p, "pool", "q", func() (string, error) { return "never", nil })
	require.ErrorIs(t, err, context.Canceled, "a waiter gives up with its context")
}

// TestCachedLookupFailureBackoffAndRecovery: a lookup failing with a
// *PlacementError is answered from the cache until its retry (the
// resolution is not called), the retries back off, a transport error is
// never cached, and the first success ends the failure with one INFO line
// and empties problems. Without the cache of failures resolve ran at every
// call.
func TestCachedLookupFailureBackoffAndRecovery(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	p := newPlacementCache(slog.New(slog.NewTextHandler(&logs, nil)))
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	p.now = func() time.Time { return now }
	var calls int
	var answer error = &PlacementError{What: "resource pool", Setting: "resourcePoolString", Ambiguous: true, Err: ErrAmbiguous}
	resolve := func() (string, error) {
		calls++
		if answer != nil {
			return "", answer
		}
		return "pool-1", nil
	}
	lookup := func() error {
		_, err := cachedLookup(context.Background(), p, "pool", "", resolve)
		return err
	}
	require.ErrorIs(t, lookup(), vctypes.ErrPlacementUnresolved)
	require.ErrorIs(t, lookup(), ErrAmbiguous)
	assert.Equal(t, 1, calls, "answered from the cache")
	require.Len(t, p.problems(), 1)

	now = now.Add(placementRetryMin)
	require.Error(t, lookup())
	assert.Equal(t, 2, calls, "retried after the back-off")
	now = now.Add(placementRetryMin)
	require.Error(t, lookup())
	assert.Equal(t, 2, calls, "the back-off doubled")
	now = now.Add(placementRetryMin)

	answer = errors.New("connection reset")
	require.Error(t, lookup())
	require.Error(t, lookup())
	assert.Equal(t, 4, calls, "a transport error is not cached")

	answer = nil
	_, err := cachedLookup(context.Background(), p, "pool", "", resolve)
	require.NoError(t, err)
	assert.Empty(t, p.problems())
	assert.Equal(t, 1, strings.Count(logs.String(), "level=ERROR"), logs.String())
	assert.Equal(t, 1, strings.Count(logs.String(), `level=INFO msg="vcenter placement resolved" setting=resourcePoolString`), logs.String())
}
