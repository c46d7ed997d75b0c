package daemon

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/sdnotify"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
)

// notifySocket is a fake $NOTIFY_SOCKET: a unixgram socket in a temp dir.
func notifySocket(t *testing.T) (*sdnotify.Notifier, *net.UnixConn) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return sdnotify.New(path), conn
}

// drain returns the datagrams already in conn, without waiting
// (MSG_DONTWAIT: what was sent before the call, nothing after).
func drain(t *testing.T, conn *net.UnixConn) []string {
	t.Helper()
	rc, err := conn.SyscallConn()
	require.NoError(t, err)
	var out []string
	buf := make([]byte, 4096)
	for {
		var n int
		var rerr error
		require.NoError(t, rc.Read(func(fd uintptr) bool {
			n, _, rerr = syscall.Recvfrom(int(fd), buf, syscall.MSG_DONTWAIT)
			return true
		}))
		if errors.Is(rerr, syscall.EAGAIN) {
			return out
		}
		require.NoError(t, rerr)
		out = append(out, string(buf[:n]))
	}
}

// TestWatchdogCheck: the watchdog is fed while every started loop moved
// within its limit, not while one (the spawn loop here) stays still past
// it, and again once it moves; a loop not started is not checked. One log
// line and one STATUS per change, none while the state lasts.
//
// Not parallel: TestStartWithUnreachableVCenter counts the goroutines
// running this module's code, a paused internal test's included.
func TestWatchdogCheck(t *testing.T) {
	n, conn := notifySocket(t)
	logs := &testutil.SyncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	t0 := time.Unix(1_000_000, 0)
	var spawnAt time.Time
	w := &watchdog{log: log, notify: &notifier{n: n, log: log}, loops: []liveLoop{
		{name: "spawn", limit: time.Minute, last: func(time.Time) time.Time { return spawnAt }},
		{name: "cleanup", limit: time.Minute, last: func(time.Time) time.Time { return time.Time{} }}, // not started
	}}

	spawnAt = t0
	assert.True(t, w.check(t0.Add(59*time.Second)), "within its limit")
	assert.False(t, w.check(t0.Add(61*time.Second)), "stuck past its limit")
	assert.False(t, w.check(t0.Add(10*time.Minute)), "still stuck")
	assert.Equal(t, []string{"STATUS=stuck: spawn made no progress since " + t0.UTC().Format(time.RFC3339)}, drain(t, conn))
	assert.Equal(t, 1, strings.Count(logs.String(), "watchdog not fed"), logs.String())

	spawnAt = t0.Add(10 * time.Minute)
	assert.True(t, w.check(t0.Add(10*time.Minute)), "moving again")
	assert.Equal(t, []string{"STATUS=running"}, drain(t, conn))
	assert.Equal(t, 1, strings.Count(logs.String(), "watchdog fed again"), logs.String())
}

// TestWatchdogRunStopsFeedingWhileStuck: the running watchdog sends
// WATCHDOG=1 at each tick while the loops move, none at the ticks while
// the spawn loop is stuck, and sends again once it moves. Each tick reads
// the clock once: the test counts ticks by the clock's calls, so "none"
// is over three whole ticks, not a sleep. Without the check the stuck
// ticks would feed the watchdog too.
// Not parallel (TestWatchdogCheck).
func TestWatchdogRunStopsFeedingWhileStuck(t *testing.T) {
	n, conn := notifySocket(t)
	log := slog.New(slog.DiscardHandler)
	var stuck atomic.Bool
	ticks := make(chan struct{}, 100)
	var mu sync.Mutex
	clock := time.Unix(1_000_000, 0)
	now := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		clock = clock.Add(time.Second)
		ticks <- struct{}{}
		return clock
	}
	w := &watchdog{log: log, notify: &notifier{n: n, log: log}, loops: []liveLoop{
		{name: "spawn", limit: 30 * time.Second, last: func(now time.Time) time.Time {
			if stuck.Load() {
				return now.Add(-time.Hour)
			}
			return now
		}},
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.run(ctx, 20*time.Millisecond, now) }()
	defer func() { cancel(); <-done }()

	waitTicks := func(k int) {
		for range k {
			select {
			case <-ticks:
			case <-time.After(10 * time.Second):
				t.Fatal("watchdog does not tick")
			}
		}
	}
	waitTicks(3) // two ticks' sends are in the socket once the third reads the clock
	assert.Contains(t, drain(t, conn), sdnotify.Watchdog)

	stuck.Store(true)
	waitTicks(2) // the tick that may have read the clock before the change, then a stuck one
	drain(t, conn)
	waitTicks(3)
	got := drain(t, conn)
	assert.NotContains(t, got, sdnotify.Watchdog, "not fed while the spawn loop is stuck")

	stuck.Store(false)
	waitTicks(3)
	assert.Contains(t, drain(t, conn), sdnotify.Watchdog, "fed again once it moves")
}
