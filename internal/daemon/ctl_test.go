package daemon_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/cdssim"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/ctl"
	"github.com/cds-contrib/hatchery-vsphere/internal/daemon"
)

// TestCtlSocketOfTheDaemon: the daemon listens on Options.CtlSocket, says
// so in Running, answers status there even while vCenter is unreachable,
// and removes the socket when it stops; a path it cannot take (a plain
// file) stops the start with an error naming it, before anything runs.
func TestCtlSocketOfTheDaemon(t *testing.T) {
	log, logs := testLogger(t)
	api, err := cdssim.New(cdssim.Options{HatcheryName: "hatchery-daemon-test"})
	require.NoError(t, err)
	t.Cleanup(api.Close)
	cfg := testConfig(t, freeAddr(t), api)
	dir, err := os.MkdirTemp("", "ctl") // short: a socket path holds 108 bytes
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })

	plain := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(plain, nil, 0o600))
	o := fastOptions(cfg, log)
	o.CtlSocket = plain
	err = daemon.Run(context.Background(), o)
	require.ErrorContains(t, err, "listen ctl socket "+plain+": the file exists and is not a socket")

	sock := filepath.Join(dir, "ctl.sock")
	o = fastOptions(cfg, log)
	o.CtlSocket = sock
	// The file read again by a reload: maxWorker raised.
	o.LoadConfig = func() (*config.Config, error) {
		next := *cfg
		next.CommonConfiguration.Provision.MaxWorker = cfg.CommonConfiguration.Provision.MaxWorker + 3
		next.LogLevel = "debug"
		return &next, nil
	}
	levels := make(chan string, 1)
	o.SetLogLevel = func(l string) { levels <- l }
	ready := make(chan daemon.Running, 1)
	o.OnReady = func(r daemon.Running) { ready <- r }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- daemon.Run(ctx, o) }()
	var running daemon.Running
	select {
	case running = <-ready:
		assert.Equal(t, sock, running.CtlSocket)
	case err := <-runErr:
		t.Fatalf("daemon stopped at start: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("daemon not ready after 10s")
	}
	resp, err := ctl.Do(ctx, sock, ctl.Request{Command: "status"})
	require.NoError(t, err)
	require.True(t, resp.OK, resp.Error)
	assert.Contains(t, resp.Text, "vCenter")
	assert.Contains(t, logs.String(), `msg="hatchery running"`)
	assert.Contains(t, logs.String(), "ctl="+sock)

	// `ctl reload` is the daemon's reload (SIGHUP's): the new maxWorker is
	// the running one. With ctl wired to a stub, it answered an error.
	resp, err = ctl.Do(ctx, sock, ctl.Request{Command: "reload"})
	require.NoError(t, err)
	require.True(t, resp.OK, resp.Error)
	assert.Contains(t, resp.Text, "maxWorker")
	assert.Contains(t, resp.Text, "logLevel")
	select {
	case l := <-levels:
		assert.Equal(t, "debug", l, "the reloaded logLevel is applied")
	default:
		t.Error("the reload did not set the log level")
	}
	assert.Equal(t, cfg.CommonConfiguration.Provision.MaxWorker+3, running.Hatchery.Config().CommonConfiguration.Provision.MaxWorker)

	cancel()
	select {
	case err := <-runErr:
		require.NoError(t, err)
	case <-time.After(15 * time.Second):
		t.Fatal("daemon did not stop")
	}
	_, err = os.Stat(sock)
	assert.ErrorIs(t, err, os.ErrNotExist, "socket removed at stop")
}
