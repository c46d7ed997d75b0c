package daemon_test

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/cdssim"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/daemon"
	"github.com/cds-contrib/hatchery-vsphere/internal/sdnotify"
)

// TestSystemdNotify: through a fake $NOTIFY_SOCKET the daemon says
// STATUS=starting at once, READY=1 only once it is signed in to the CDS
// API and has read the first inventory (not while vCenter does not
// answer, though the API is signed in), RELOADING=1 then READY=1 with the
// reload's summary around a reload, STOPPING=1 at shutdown. Without the
// READY gate, READY=1 would come while vCenter is down.
func TestSystemdNotify(t *testing.T) {
	t.Parallel()
	log, _ := testLogger(t)
	api, err := cdssim.New(cdssim.Options{HatcheryName: "hatchery-daemon-test"})
	require.NoError(t, err)
	t.Cleanup(api.Close)
	vcAddr := freeAddr(t) // nothing answers there yet
	cfg := testConfig(t, vcAddr, api)

	path := filepath.Join(t.TempDir(), "notify")
	sock, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	require.NoError(t, err)
	defer sock.Close()
	msgs := make(chan string, 100)
	go func() { // ends when the socket is closed
		buf := make([]byte, 4096)
		for {
			n, err := sock.Read(buf)
			if err != nil {
				close(msgs)
				return
			}
			msgs <- string(buf[:n])
		}
	}()
	next := func(what string) string {
		t.Helper()
		select {
		case m := <-msgs:
			return m
		case <-time.After(20 * time.Second):
			t.Fatalf("no notification (%s) after 20s", what)
			return ""
		}
	}

	o := fastOptions(cfg, log)
	o.Notify = sdnotify.New(path)
	reloaded := *cfg
	reloaded.CommonConfiguration.Provision.MaxWorker = cfg.CommonConfiguration.Provision.MaxWorker + 1
	o.LoadConfig = func() (*config.Config, error) { c := reloaded; return &c, nil }
	ready := make(chan daemon.Running, 1)
	o.OnReady = func(r daemon.Running) { ready <- r }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- daemon.Run(ctx, o) }()
	run := <-ready

	assert.Equal(t, "STATUS=starting: connecting to vCenter and the CDS API", next("starting"))
	// Signed in to the API, vCenter still down: no READY yet.
	require.Eventually(t, func() bool { _, v2 := api.ServiceHTTPURL(cfg.CommonConfiguration.Name); return v2 != "" },
		10*time.Second, 20*time.Millisecond, "signed in")
	select {
	case m := <-msgs:
		t.Fatalf("notification before vCenter answers: %q", m)
	default:
	}

	stopVC := startVCSim(t, vcAddr)
	defer stopVC()
	assert.Equal(t, "READY=1\nSTATUS=running", next("ready"))
	require.NotNil(t, run.Inventory)
	assert.NotZero(t, run.Inventory.Stats().Generation, "the first inventory was read before READY")

	summary, err := run.Reload(ctx)
	require.NoError(t, err)
	assert.Equal(t, "RELOADING=1\nSTATUS=reloading the configuration", next("reloading"))
	assert.Equal(t, "READY=1\nSTATUS=running; last reload: "+summary, next("reloaded"))
	assert.Contains(t, summary, "maxWorker")

	cancel()
	assert.Equal(t, "STOPPING=1\nSTATUS=stopping", next("stopping"))
	select {
	case err := <-runErr:
		require.NoError(t, err)
	case <-time.After(15 * time.Second):
		t.Fatal("daemon did not stop within 15s")
	}
	assert.False(t, strings.Contains(summary, "refused"))
}
