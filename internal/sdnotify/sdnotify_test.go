package sdnotify_test

import (
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/sdnotify"
)

// env is an injectable environment.
func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// TestSend: a message reaches a unixgram socket as systemd reads it, one
// datagram with one NAME=value per line; without $NOTIFY_SOCKET nothing is
// sent and nothing fails.
func TestSend(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	require.NoError(t, err)
	defer conn.Close()

	n := sdnotify.FromEnv(env(map[string]string{"NOTIFY_SOCKET": path}))
	require.NotNil(t, n)
	require.NoError(t, n.Send(sdnotify.Ready, sdnotify.Status("ready:\nserving")))
	buf := make([]byte, 4096)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	k, err := conn.Read(buf)
	require.NoError(t, err)
	assert.Equal(t, "READY=1\nSTATUS=ready: serving", string(buf[:k]))

	none := sdnotify.FromEnv(env(nil))
	assert.Nil(t, none)
	assert.NoError(t, none.Send(sdnotify.Ready))
}

// TestWatchdogInterval: $WATCHDOG_USEC is the period, for this process
// only ($WATCHDOG_PID); none is 0; garbage is an error.
func TestWatchdogInterval(t *testing.T) {
	t.Parallel()
	d, err := sdnotify.WatchdogInterval(env(map[string]string{"WATCHDOG_USEC": "30000000"}), 42)
	require.NoError(t, err)
	assert.Equal(t, 30*time.Second, d)
	d, err = sdnotify.WatchdogInterval(env(map[string]string{"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "42"}), 42)
	require.NoError(t, err)
	assert.Equal(t, 30*time.Second, d)
	d, err = sdnotify.WatchdogInterval(env(map[string]string{"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "7"}), 42)
	require.NoError(t, err)
	assert.Zero(t, d, "another process's watchdog")
	d, err = sdnotify.WatchdogInterval(env(nil), 42)
	require.NoError(t, err)
	assert.Zero(t, d)
	_, err = sdnotify.WatchdogInterval(env(map[string]string{"WATCHDOG_USEC": "soon"}), 42)
	assert.Error(t, err)
}
