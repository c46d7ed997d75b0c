package daemon_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/cdssim"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/daemon"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// runDaemon starts the daemon with a wrong or right datacenter and returns
// its /mon address; the daemon stops at the end of the test.
func runDaemon(t *testing.T, datacenter string) (string, *syncBuffer) {
	t.Helper()
	log, logs := testLogger(t)
	api, err := cdssim.New(cdssim.Options{HatcheryName: "hatchery-daemon-test"})
	require.NoError(t, err)
	t.Cleanup(api.Close)
	vcAddr := freeAddr(t)
	startVCSim(t, vcAddr)
	cfg := testConfig(t, vcAddr, api)
	cfg.DatacenterString = datacenter
	return startDaemon(t, cfg, log).MonAddr, logs
}

// startDaemon runs the daemon on cfg, logging to log, until the test ends
// (it must then stop within 15 s, without error), and returns what it
// handed OnReady; the test fails if the daemon stops at start or is not
// ready within 10 s.
func startDaemon(t *testing.T, cfg *config.Config, log *slog.Logger) daemon.Running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan daemon.Running, 1)
	o := fastOptions(cfg, log)
	o.OnReady = func(r daemon.Running) { ready <- r }
	runErr := make(chan error, 1)
	go func() { runErr <- daemon.Run(ctx, o) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-runErr:
			assert.NoError(t, err)
		case <-time.After(15 * time.Second):
			t.Error("daemon did not stop within 15s")
		}
	})
	select {
	case r := <-ready:
		return r
	case err := <-runErr:
		t.Fatalf("daemon stopped at start: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("daemon not ready after 10s")
	}
	return daemon.Running{}
}

// TestWrongDatacenterIsReportedAsSuch: a datacenterString that does not
// exist once read "vcenter not reachable". The log and /mon/status say the
// login worked, name the missing datacenter and list the existing ones.
func TestWrongDatacenterIsReportedAsSuch(t *testing.T) {
	addr, logs := runDaemon(t, "DC-typo")
	hc := &http.Client{Timeout: 5 * time.Second}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, st := monStatus(t, hc, addr)
		l, ok := line(st, "vCenter")
		if assert.True(c, ok) {
			assert.Equal(c, sdk.MonitoringStatusAlert, l.Status)
			assert.Contains(c, l.Value, `find datacenter "DC-typo" (datacenterString): logged in to vcenter `)
			assert.Contains(c, l.Value, `, but no such datacenter; datacenters: DC0`)
		}
	}, 10*time.Second, 50*time.Millisecond)
	out := logs.String()
	assert.Contains(t, out, `level=ERROR msg="vcenter datacenter not found, retrying"`)
	assert.Contains(t, out, `datacenter=DC-typo existing=DC0`)
	assert.NotContains(t, out, "vcenter not reachable")
	assert.NotContains(t, out, vcPassword)
}

// TestStatusLinesNameTheirService: every /mon/status line, the capacity
// ones included, carries the type, service and host name.
func TestStatusLinesNameTheirService(t *testing.T) {
	addr, _ := runDaemon(t, "DC0")
	hc := &http.Client{Timeout: 5 * time.Second}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, st := monStatus(t, hc, addr)
		assert.Equal(c, http.StatusOK, code, "%+v", st.Lines)
		capacity := 0
		for _, l := range st.Lines {
			if strings.HasPrefix(l.Component, "vsphere/capacity") {
				capacity++
			}
			assert.Equal(c, "hatchery", l.Type, l.Component)
			assert.Equal(c, "hatchery-daemon-test", l.Service, l.Component)
			assert.NotEmpty(c, l.Hostname, l.Component)
		}
		assert.GreaterOrEqual(c, capacity, 4, "the capacity lines are there")
	}, 15*time.Second, 50*time.Millisecond)
}
