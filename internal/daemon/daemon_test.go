package daemon_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/cdssim"
	"github.com/cds-contrib/hatchery-vsphere/internal/daemon"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
)

const (
	vcUser     = "daemon@vsphere.local"
	vcPassword = "d@emon:pa/ss%"
)

// syncBuffer is the shared concurrency-safe output sink.
type syncBuffer = testutil.SyncBuffer

// testLogger logs to a buffer printed when the test fails.
func testLogger(t *testing.T) (*slog.Logger, *syncBuffer) {
	t.Helper()
	buf := &syncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", buf.String())
		}
	})
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

func rsaKeyPEM(t *testing.T) string {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))
}

// freeAddr is a loopback address nothing listens on yet.
func freeAddr(t *testing.T) string { return vcsimtest.FreeAddr(t) }

// startVCSim serves a vCenter simulator on addr (the default VPX model,
// no VMs) and returns a function stopping it.
func startVCSim(t *testing.T, addr string) func() {
	return vcsimtest.ServeVPX(t, addr, vcUser, vcPassword)
}

// testConfig is a valid configuration reaching vCenter at vcAddr and the
// CDS simulator api.
func testConfig(t *testing.T, vcAddr string, api *cdssim.Server) *config.Config {
	t.Helper()
	cfg, err := config.LoadFrom(bytes.NewReader(config.DemoConfig()), config.LoadOptions{LookupEnv: func(string) (string, bool) { return "", false }})
	require.NoError(t, err)
	cfg.Endpoint = vcAddr
	cfg.User, cfg.Password, cfg.Insecure = vcUser, vcPassword, true
	cfg.DatacenterString = "DC0"
	cfg.ResourcePoolString = "/DC0/host/DC0_C0/Resources"
	// The default VPX model has none of the demo's placement clusters
	// (demo.toml's [[placements]]): one pool, the top-level one.
	cfg.Placements = nil
	cfg.FolderString = "/DC0/vm"
	cfg.WorkerProvisioning = nil // the simulator here has no template
	// Nor the instant-clone model's template, which the demo's simulator
	// adds (internal/demo/instant.go): its entry goes.
	creds := cfg.GuestCredentials[:0]
	for _, g := range cfg.GuestCredentials {
		if g.CloneMode != config.CloneModeInstant {
			creds = append(creds, g)
		}
	}
	cfg.GuestCredentials = creds
	cfg.InventoryRefreshInterval = 1
	cc := &cfg.CommonConfiguration
	cc.Name = "hatchery-daemon-test"
	cc.RSAPrivateKey = rsaKeyPEM(t)
	cc.HTTP.Addr, cc.HTTP.Port = "127.0.0.1", 0
	cc.API.HTTP.URL = api.URL()
	cc.API.Token, cc.API.TokenV2 = "", api.TokenV2()
	require.NoError(t, cfg.Validate())
	return cfg
}

// fastOptions are daemon options with short timings for tests.
func fastOptions(cfg *config.Config, log *slog.Logger) daemon.Options {
	return daemon.Options{
		Config:         cfg,
		Logger:         log,
		Version:        "test",
		DialBackoffMin: 50 * time.Millisecond,
		DialBackoffMax: 200 * time.Millisecond,
		Intervals: hatchery.Intervals{
			Heartbeat: 200 * time.Millisecond, QueuePolling: 500 * time.Millisecond, WorkerPool: 200 * time.Millisecond,
			BackoffMin: 50 * time.Millisecond, BackoffMax: 200 * time.Millisecond, Shutdown: 5 * time.Second,
		},
		MetricsInterval: 200 * time.Millisecond,
		ShutdownTimeout: 10 * time.Second,
	}
}

// monStatus fetches /mon/status.
func monStatus(t *testing.T, hc *http.Client, addr string) (int, sdk.MonitoringStatus) {
	t.Helper()
	resp, err := hc.Get("http://" + addr + "/mon/status")
	require.NoError(t, err)
	defer resp.Body.Close()
	var st sdk.MonitoringStatus
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	return resp.StatusCode, st
}

func line(st sdk.MonitoringStatus, component string) (sdk.MonitoringStatusLine, bool) {
	for _, l := range st.Lines {
		if l.Component == component {
			return l, true
		}
	}
	return sdk.MonitoringStatusLine{}, false
}

// get fetches url and returns its status and body.
func get(t *testing.T, hc *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := hc.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// ourGoroutines lists the stacks of goroutines running this module's code,
// except the caller's and the test's own.
func ourGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		// The caller, the tests: this package's external tests, its
		// internal ones and the parallel tests waiting for their turn
		// (each runs under testing.tRunner).
		if strings.Contains(g, "[running]") || strings.Contains(g, "_test.Test") || strings.Contains(g, "testing.tRunner(") {
			continue
		}
		if strings.Contains(g, "github.com/cds-contrib/hatchery-vsphere/") {
			out = append(out, g)
		}
	}
	return out
}

// TestStartWithUnreachableVCenter: the daemon started while
// vCenter does not answer keeps running, answers /mon/status 503 with the
// vCenter line in alert, recovers when vCenter comes up on the same
// address, and stops on ctx cancel with every goroutine joined.
// Not parallel: it counts the process's goroutines.
func TestStartWithUnreachableVCenter(t *testing.T) {
	log, _ := testLogger(t)
	api, err := cdssim.New(cdssim.Options{HatcheryName: "hatchery-daemon-test"})
	require.NoError(t, err)
	t.Cleanup(api.Close)
	vcAddr := freeAddr(t) // closed: nothing answers there yet
	cfg := testConfig(t, vcAddr, api)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

	before := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan daemon.Running, 1)
	o := fastOptions(cfg, log)
	o.OnReady = func(r daemon.Running) { ready <- r }
	runErr := make(chan error, 1)
	go func() { runErr <- daemon.Run(ctx, o) }()

	var run daemon.Running
	select {
	case run = <-ready:
	case err := <-runErr:
		t.Fatalf("daemon stopped at start: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("daemon not ready after 10s")
	}

	// vCenter unreachable: the daemon runs, /mon answers 503, vCenter AL.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, st := monStatus(t, hc, run.MonAddr)
		assert.Equal(c, http.StatusServiceUnavailable, code)
		l, ok := line(st, "vCenter")
		if assert.True(c, ok, "vCenter line") {
			assert.Equal(c, sdk.MonitoringStatusAlert, l.Status)
			assert.Contains(c, l.Value, "not connected to "+vcAddr)
			assert.NotContains(c, l.Value, vcPassword)
		}
		api, _ := line(st, "API")
		assert.Equal(c, sdk.MonitoringStatusOK, api.Status, "the CDS side works meanwhile")
	}, 10*time.Second, 50*time.Millisecond)
	select {
	case err := <-runErr:
		t.Fatalf("daemon stopped while vCenter is unreachable: %v", err)
	default:
	}
	assert.False(t, run.VCenter.Connected())

	// vCenter comes up on the very address of the configuration.
	stopVC := startVCSim(t, vcAddr)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, st := monStatus(t, hc, run.MonAddr)
		assert.Equal(c, http.StatusOK, code, "status %+v", st.Lines)
		l, _ := line(st, "vCenter")
		assert.Equal(c, sdk.MonitoringStatusOK, l.Status, l.Value)
		inv, _ := line(st, "vCenter inventory")
		assert.Equal(c, sdk.MonitoringStatusOK, inv.Status, inv.Value)
	}, 15*time.Second, 50*time.Millisecond)

	// The next metrics pass sees the (empty) datacenter.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, body := get(t, hc, "http://"+run.MonAddr+"/mon/metrics")
		assert.Equal(c, http.StatusOK, code)
		assert.Contains(c, body, "cds_hatchery_vsphere_vm_count")
	}, 5*time.Second, 50*time.Millisecond)

	// SIGTERM: Run returns within its bound, every goroutine joined.
	cancel()
	select {
	case err := <-runErr:
		require.NoError(t, err)
	case <-time.After(15 * time.Second):
		t.Fatal("daemon did not stop within 15s")
	}
	stopVC()
	api.Close()
	hc.CloseIdleConnections()
	if !assert.Eventually(t, func() bool { return len(ourGoroutines()) == 0 }, 5*time.Second, 20*time.Millisecond) {
		// Read again here: the condition runs in assert's own goroutine.
		t.Fatalf("goroutines of ours left after shutdown:\n%s", strings.Join(ourGoroutines(), "\n\n"))
	}
	var after int
	assert.Eventually(t, func() bool { after = runtime.NumGoroutine(); return after <= before+2 }, 5*time.Second, 20*time.Millisecond)
	assert.LessOrEqual(t, after, before+2, "goroutines before and after")
}
