package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/demo"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
)

// ctlSocketLine is the banner line of the demo naming its ctl socket.
var ctlSocketLine = regexp.MustCompile(`(?m)^  ctl socket +(\S+)$`)

// TestCtlAgainstTheDemo runs the demo (jobs trickling in) and, while it
// runs, every ctl command over the socket path the demo printed, through
// the command line: status, vms (human and --json), quarantine lift and
// hold release of what is neither quarantined nor held, reload (refused: the
// demo has no configuration file to read again), placement list (the
// demo's two placements), cordon and uncordon of one, the cordon of a
// placement it does not have, drain, then status again showing the drain.
// Every action is logged once with the caller's uid; the socket is 0600.
// Without the demo's socket or the daemon's ctl server, the first ctl
// call fails to connect.
func TestCtlAgainstTheDemo(t *testing.T) {
	logs := &testutil.SyncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithCancel(context.Background())
	var stdout testutil.SyncBuffer
	ready := make(chan demo.Info, 1)
	done := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// One vCenter task at a time (maxConcurrentTasks = 1): two
		// concurrent clones race inside the pinned simulator (createVM
		// against the other clone's name lookup), and this test runs the
		// demo under the race detector. SerialTasks also queues the file
		// removals a destroy starts (see TestDemoServesBothPlacements).
		//
		// The inventory's staleness limit (four refresh intervals: the
		// demo's 2 s make 8 s) is a production judgement of a vCenter
		// too slow to decide on; beside CPU hogs at load 28 one refresh
		// of the in-process simulator ran 30 s, and the daemon said so
		// at WARN. Like the request bound (RequestTimeout), it is given
		// the test's liveness bound: a refresh every quarter of it (the
		// hatchery's own writes refresh sooner).
		patience := testutil.Patience(t)
		tune := func(c *config.Config) {
			c.MaxConcurrentTasks = 1
			c.InventoryRefreshInterval = max(c.InventoryRefreshInterval, int(patience/4/time.Second))
		}
		_, err := demo.Run(ctx, demo.Options{Stdout: &stdout, Logger: logger, Tune: tune,
			SerialTasks: true, RequestTimeout: patience, OnReady: func(i demo.Info) { ready <- i }})
		done <- err
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	var info demo.Info
	select {
	case info = <-ready:
	case err := <-done:
		t.Fatalf("demo stopped at start: %v", err)
	case <-time.After(testutil.Patience(t)):
		t.Fatal("demo not ready before the test's deadline")
	}
	m := ctlSocketLine.FindStringSubmatch(stdout.String())
	require.NotNil(t, m, "the demo prints its ctl socket:\n%s", stdout.String())
	sock := m[1]
	assert.Equal(t, info.CtlSockets[0], sock)
	st, err := os.Stat(sock)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "socket mode")

	ctl := func(args ...string) result {
		return runCmdCtx(ctx, nil, &app{}, append([]string{"ctl", "--socket", sock}, args...)...)
	}

	// It answers at once, vCenter connecting or not; once connected:
	r := ctl("status")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Eventually(t, func() bool {
		r = ctl("status")
		return r.code == exitOK && regexp.MustCompile(`(?m)^OK\s+vCenter inventory\s`).MatchString(r.stdout)
	}, testutil.Patience(t), 200*time.Millisecond, "vCenter connected in ctl status")
	for _, want := range []string{"hatchery hatchery-vsphere-demo", "API", "Queue V2", "vCenter", "Workers", "vsphere/capacity/vcpus", "warm pools:", "debug holds:\n  none"} {
		assert.Contains(t, r.stdout, want)
	}
	assert.NotContains(t, r.stdout, info.Password, "no secret in ctl output")

	var sd struct {
		Lines []struct{ Component, Status, Value string } `json:"lines"`
		Pools []struct {
			Model      string `json:"model"`
			Want, Have int
		} `json:"pools"`
		Draining, Drained bool
	}
	r = ctl("status", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &sd), r.stdout)
	assert.NotEmpty(t, sd.Lines)
	assert.Len(t, sd.Pools, len(info.Config.WorkerProvisioning))
	assert.False(t, sd.Draining)

	// The warm pool fills: its idle VMs are listed with their phase.
	require.Eventually(t, func() bool {
		r = ctl("vms")
		return r.code == exitOK && regexp.MustCompile(`(?m)^warmpool-\S+\s+idle\s`).MatchString(r.stdout)
	}, testutil.Patience(t), 200*time.Millisecond, "an idle pool VM in ctl vms")
	assert.Regexp(t, `(?m)^NAME\s+PHASE\s+JOB\s+MODEL\s+FLAVOR\s+POWER\s+IP\s+AGE$`, r.stdout)
	r = ctl("--json", "vms")
	require.Equal(t, exitOK, r.code, r.stderr)
	var vms []struct {
		Name, Phase string
		WarmPool    bool `json:"warm_pool"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &vms))
	require.NotEmpty(t, vms)
	for _, v := range vms {
		assert.NotEmpty(t, v.Name)
		assert.NotEmpty(t, v.Phase)
	}

	r = ctl("quarantine", "lift", "debian12")
	assert.Equal(t, exitFail, r.code)
	assert.Contains(t, r.stderr, `lift quarantine of "debian12": not quarantined`)
	r = ctl("quarantine", "debian12")
	assert.Equal(t, exitUsage, r.code, "a wrong command line")
	assert.Contains(t, r.stderr, "usage: quarantine lift TEMPLATE")
	r = ctl("hold", "release", "nope-vm")
	assert.Equal(t, exitFail, r.code)
	assert.Contains(t, r.stderr, `release hold of vm "nope-vm": not held`)
	r = ctl("reload")
	assert.Equal(t, exitFail, r.code)
	// The demo runs on its embedded configuration: there is no file
	// to read again, and the reload says so, changing nothing.
	assert.Contains(t, r.stderr, "the daemon was started without a configuration file to read again")
	// The demo's two placements (demo.toml): listed, active; one is
	// cordoned and uncordoned; a placement it does not have is refused.
	r = ctl("placement", "list")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Regexp(t, `^NAME\s+STATE\s`, r.stdout)
	placeStates := func() map[string]string {
		t.Helper()
		r := ctl("placement", "list", "--json")
		require.Equal(t, exitOK, r.code, r.stderr)
		var places []struct{ Name, State string }
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &places), r.stdout)
		out := map[string]string{}
		for _, p := range places {
			out[p.Name] = p.State
		}
		return out
	}
	assert.Equal(t, map[string]string{"cluster-a": "active", "cluster-b": "active"}, placeStates())
	r = ctl("placement", "cordon", "cluster-b")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Equal(t, map[string]string{"cluster-a": "active", "cluster-b": "cordoned"}, placeStates())
	r = ctl("placement", "uncordon", "cluster-b")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Equal(t, map[string]string{"cluster-a": "active", "cluster-b": "active"}, placeStates())
	r = ctl("placement", "cordon", "x")
	assert.Equal(t, exitFail, r.code)
	assert.Contains(t, r.stderr, "ctl placement: ")
	assert.Contains(t, r.stderr, `"x"`)
	r = ctl("placement", "cordon")
	assert.Equal(t, exitUsage, r.code, "a wrong command line")
	assert.Contains(t, r.stderr, "usage: placement list | placement cordon NAME | placement uncordon NAME")

	r = ctl("drain")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Regexp(t, `^(draining: no new job is taken|drained: nothing in flight)`, r.stdout)
	require.Eventually(t, func() bool {
		r = ctl("status", "--json")
		return r.code == exitOK && json.Unmarshal([]byte(r.stdout), &sd) == nil && sd.Drained
	}, testutil.Patience(t), 200*time.Millisecond, "drained")
	assert.True(t, sd.Draining)
	r = ctl("status")
	assert.Regexp(t, `(?m)^WARN\s+Drain\s+drained at `, r.stdout)

	uid := strconv.Itoa(os.Getuid())
	l := logs.String()
	assert.Equal(t, 1, strings.Count(l, `msg="ctl command" command=drain peer_uid=`+uid), l)
	assert.Equal(t, 1, strings.Count(l, `msg="drain started: no new job is taken, spawns in flight finish" by="ctl uid `+uid+`"`), l)
	assert.Equal(t, 1, strings.Count(l, `msg="ctl command refused" command="quarantine lift debian12" peer_uid=`+uid), l)
	assert.Equal(t, 1, strings.Count(l, `msg="ctl command refused" command=reload peer_uid=`+uid), l)
	assert.Equal(t, 1, strings.Count(l, `msg="ctl command refused" command="placement cordon x" peer_uid=`+uid), l)
	assert.NotContains(t, l, "level=WARN")

	cancel()
	wg.Wait()
	_, err = os.Stat(sock)
	assert.ErrorIs(t, err, os.ErrNotExist, "the socket is gone with the demo")
}

// TestCtlCommandLine: usage without a command (listing the placement
// commands), and a socket nobody serves.
func TestCtlCommandLine(t *testing.T) {
	t.Parallel()
	r := runCmd(t, nil, nil, "ctl")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "usage: hatchery-vsphere ctl")
	for _, c := range []string{"placement list ", "placement cordon NAME ", "placement uncordon NAME "} {
		assert.Contains(t, r.stderr, "\n  "+c, "the usage lists %s", c)
	}
	r = runCmd(t, nil, nil, "ctl", "--socket", t.TempDir()+"/none.sock", "status")
	assert.Equal(t, exitFail, r.code)
	assert.Contains(t, r.stderr, "connect to ctl socket")
}
