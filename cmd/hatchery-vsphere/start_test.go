package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/cdssim"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// freePort returns a 127.0.0.1 port nobody listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	return port
}

// TestStartUnreachableVCenterServesStatus runs the real `start` command
// (runStart, the daemon) against a vCenter endpoint where nothing listens:
// it keeps running, /mon/status answers 503 with the vCenter line in alert,
// and SIGTERM (ctx cancel) ends it cleanly within a bound. Recovery when
// vCenter comes up is internal/daemon's TestStartWithUnreachableVCenter.
func TestStartUnreachableVCenterServesStatus(t *testing.T) {
	t.Parallel()
	api := cdssim.Start(t, cdssim.Options{HatcheryName: "hatchery-cmd-test"})
	vcPort, monPort := freePort(t), freePort(t)
	cfg := fmt.Sprintf(`[hatchery.vsphere]
  endpoint = "127.0.0.1:%d"
  user = "u"
  insecure = true
  datacenterString = "DC0"
  [hatchery.vsphere.commonConfiguration]
    name = "hatchery-cmd-test"
    [hatchery.vsphere.commonConfiguration.http]
      addr = "127.0.0.1"
      port = %d
    [hatchery.vsphere.commonConfiguration.api.http]
      url = %q
`, vcPort, monPort, api.URL())
	env := secretsEnv()
	env[config.EnvAPITokenV2] = api.TokenV2()
	path := writeFile(t, cfg)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan result, 1)
	go func() { done <- runCmdCtx(ctx, env, &app{start: runStart}, "start", "--config", path) }()

	hc := &http.Client{Timeout: 2 * time.Second}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d/mon/status", monPort))
		if !assert.NoError(c, err) {
			return
		}
		defer resp.Body.Close()
		assert.Equal(c, http.StatusServiceUnavailable, resp.StatusCode)
		var st sdk.MonitoringStatus
		if !assert.NoError(c, json.NewDecoder(resp.Body).Decode(&st)) {
			return
		}
		found := false
		for _, l := range st.Lines {
			if l.Component == "vCenter" {
				found = true
				assert.Equal(c, sdk.MonitoringStatusAlert, l.Status)
				assert.Contains(c, l.Value, "not connected")
			}
		}
		assert.True(c, found, "vCenter line in %+v", st.Lines)
	}, 15*time.Second, 50*time.Millisecond)

	select {
	case r := <-done:
		t.Fatalf("start returned while vCenter is unreachable: %d %s", r.code, r.stderr)
	default:
	}
	cancel()
	select {
	case r := <-done:
		assert.Equal(t, exitOK, r.code, r.stderr)
		assert.Contains(t, r.stderr, "vcenter not reachable, retrying")
		assert.True(t, strings.Contains(r.stderr, "hatchery stopped"), r.stderr)
		assert.NotContains(t, r.stderr, plantedToken)
	case <-time.After(20 * time.Second):
		t.Fatal("start did not stop within 20s of SIGTERM")
	}
}
