package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
)

// serve runs a server on a socket in a temporary directory until the
// test ends, and returns its path and log.
func serve(t *testing.T, o Options) (string, *testutil.SyncBuffer) {
	t.Helper()
	logs := &testutil.SyncBuffer{}
	o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	// A short directory: a unix socket path is limited to 108 bytes.
	dir, err := os.MkdirTemp("", "ctl")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "ctl.sock")
	s, err := Listen(path, o)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.Serve(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return path, logs
}

func commands(lifted *[]string) map[string]Command {
	return map[string]Command{
		"status": {Run: func(context.Context, Peer, []string) (Result, error) {
			return Result{Text: "all good\n", Data: map[string]int{"workers": 3}}, nil
		}},
		"lift": {Action: true, Run: func(_ context.Context, _ Peer, args []string) (Result, error) {
			if len(args) != 1 {
				return Result{}, fmt.Errorf("%w: lift TEMPLATE", ErrUsage)
			}
			*lifted = append(*lifted, args[0])
			return Result{Text: "lifted " + args[0]}, nil
		}},
		// An action whose "list" is a read.
		"pool": {Action: true, Reads: func(args []string) bool { return len(args) == 1 && args[0] == "list" },
			Run: func(_ context.Context, _ Peer, args []string) (Result, error) {
				return Result{Text: strings.Join(args, " ") + " done\n"}, nil
			}},
	}
}

// TestServerAnswersOverTheSocket: a read and an action round-trip, the
// action logged once with the peer's uid; an unknown command and bad
// arguments answer an error; the socket file is 0600 and gone after
// Serve. Without the chmod the file would have the process umask's mode.
func TestServerAnswersOverTheSocket(t *testing.T) {
	t.Parallel()
	var lifted []string
	path, logs := serve(t, Options{Commands: commands(&lifted)})
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "socket mode")
	assert.NotZero(t, st.Mode()&os.ModeSocket)

	ctx := context.Background()
	r, err := Do(ctx, path, Request{Command: "status"})
	require.NoError(t, err)
	require.True(t, r.OK, r.Error)
	assert.Equal(t, "all good\n", r.Text)
	var data map[string]int
	require.NoError(t, json.Unmarshal(r.Data, &data))
	assert.Equal(t, 3, data["workers"])

	r, err = Do(ctx, path, Request{Command: "lift", Args: []string{"debian12"}})
	require.NoError(t, err)
	assert.True(t, r.OK, r.Error)
	assert.Equal(t, []string{"debian12"}, lifted)
	uid := os.Getuid()
	assert.Equal(t, 1, strings.Count(logs.String(), `level=INFO msg="ctl command" command="lift debian12" peer_uid=`+itoa(uid)), logs.String())

	r, err = Do(ctx, path, Request{Command: "lift"})
	require.NoError(t, err)
	assert.False(t, r.OK)
	assert.Equal(t, "usage: lift TEMPLATE", r.Error)
	assert.True(t, r.Usage, "a command's ErrUsage is a wrong request")
	assert.Contains(t, logs.String(), `level=INFO msg="ctl command refused" command=lift peer_uid=`)

	r, err = Do(ctx, path, Request{Command: "nope"})
	require.NoError(t, err)
	assert.False(t, r.OK)
	assert.Contains(t, r.Error, `unknown command "nope" (commands: lift, pool, status)`)
	assert.True(t, r.Usage, "an unknown command is a wrong request")

	// An action's read is logged at DEBUG, its action at INFO.
	for _, args := range [][]string{{"list"}, {"cordon", "a"}} {
		r, err = Do(ctx, path, Request{Command: "pool", Args: args})
		require.NoError(t, err)
		require.True(t, r.OK, r.Error)
	}
	assert.Equal(t, 1, strings.Count(logs.String(), `level=DEBUG msg="ctl command" command="pool list" peer_uid=`+itoa(uid)), logs.String())
	assert.Equal(t, 1, strings.Count(logs.String(), `level=INFO msg="ctl command" command="pool cordon a" peer_uid=`+itoa(uid)), logs.String())
	assert.NotContains(t, logs.String(), "level=WARN")
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestServerRefusesAnotherUID: a peer whose uid is not allowed is refused
// before its request runs, and the refusal is logged with its uid. The
// tests run as one user, so the peer's uid is injected (Options.PeerOf);
// the kernel's answer for the real connection is checked apart
// (TestPeerOfIsTheKernels).
func TestServerRefusesAnotherUID(t *testing.T) {
	t.Parallel()
	var lifted []string
	other := os.Getuid() + 4242
	path, logs := serve(t, Options{
		Commands: commands(&lifted),
		PeerOf:   func(*net.UnixConn) (Peer, error) { return Peer{UID: other, PID: 7}, nil },
	})
	r, err := Do(context.Background(), path, Request{Command: "lift", Args: []string{"debian12"}})
	require.NoError(t, err)
	assert.False(t, r.OK)
	assert.Equal(t, "permission denied: uid "+itoa(other)+" may not use this socket", r.Error)
	assert.Empty(t, lifted, "the refused peer's command did not run")
	assert.Contains(t, logs.String(), `level=WARN msg="ctl connection refused" peer_uid=`+itoa(other))
}

// TestPeerOfIsTheKernels: the uid and pid read from a real connection are
// this process's (SO_PEERCRED), and the default rule allows them, and
// root, and nobody else.
func TestPeerOfIsTheKernels(t *testing.T) {
	t.Parallel()
	var got Peer
	var lifted []string
	path, _ := serve(t, Options{
		Commands: commands(&lifted),
		PeerOf: func(c *net.UnixConn) (Peer, error) {
			p, err := peerOf(c)
			got = p
			return p, err
		},
	})
	r, err := Do(context.Background(), path, Request{Command: "status"})
	require.NoError(t, err)
	require.True(t, r.OK, r.Error)
	assert.Equal(t, Peer{UID: os.Getuid(), PID: os.Getpid()}, got)
}

// TestListenReplacesOnlyAStaleSocket: a socket file nothing answers on is
// replaced; a live one or a plain file is refused.
func TestListenReplacesOnlyAStaleSocket(t *testing.T) {
	t.Parallel()
	var lifted []string
	path, _ := serve(t, Options{Commands: commands(&lifted)})
	_, err := Listen(path, Options{Commands: commands(&lifted)})
	assert.ErrorContains(t, err, "another process answers on it")

	dir := t.TempDir()
	plain := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(plain, nil, 0o600))
	_, err = Listen(plain, Options{Commands: commands(&lifted)})
	assert.ErrorContains(t, err, "is not a socket")

	stale, err := os.MkdirTemp("", "ctl")
	require.NoError(t, err)
	defer os.RemoveAll(stale)
	sp := filepath.Join(stale, "ctl.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sp, Net: "unix"})
	require.NoError(t, err)
	ln.SetUnlinkOnClose(false)
	ln.Close() // the file stays, nobody answers: a crashed daemon's
	s, err := Listen(sp, Options{Commands: commands(&lifted)})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Serve(ctx) }()
	r, err := Do(context.Background(), sp, Request{Command: "status"})
	require.NoError(t, err)
	assert.True(t, r.OK)
	cancel()
	<-done
	_, err = os.Stat(sp)
	assert.ErrorIs(t, err, os.ErrNotExist, "the socket file is removed at the end")
}
