package demo

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/daemon"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcheck"
)

// TestVCenterCheckPassesOnTheDemoSimulators: `vcenter check` with the
// demo's configuration (its templates: guest operations, cloud-init,
// Windows, instant clones; its two placements; its warm pools and static
// IPs) against the demo's simulators passes every line and leaves
// nothing behind.
func TestVCenterCheckPassesOnTheDemoSimulators(t *testing.T) {
	t.Parallel()
	sims, err := StartSims("", nil, SimsOptions{})
	require.NoError(t, err)
	t.Cleanup(sims.Close)
	dial := func(ctx context.Context) (*vcenter.Client, error) {
		cc := daemon.VCenterConfig(sims.Config)
		DaemonOptions(sims.Config, nil).VCenterConfig(&cc)
		return vcenter.Dial(ctx, cc)
	}
	rep := vcheck.Run(context.Background(), sims.Config, dial, vcheck.Options{RunID: "demo", GuestReadyTimeout: time.Minute})
	var out bytes.Buffer
	rep.WriteText(&out)
	t.Logf("report:\n%s", out.String())
	for _, r := range rep.Results {
		assert.Equal(t, vcheck.Pass, r.Status, "%s %s: %s", r.Capability, r.Object, r.Detail)
	}
	assert.False(t, rep.Failed())
	assert.NotContains(t, out.String(), sims.Config.Password)
	for _, vm := range sims.Env.VMs() {
		assert.NotContains(t, vm.Name, vcheck.FolderPrefix, "left behind")
	}
}

// TestVCenterCheckBesideTheRunningDemo: the way docs/vcenter-check.md
// shows it, `vcenter check` run with the file `demo --write-config`
// wrote while the demo runs its jobs passes every line, and the demo's
// log has no WARN: the check's cloud-init VMs boot userdata without a
// worker config on purpose, which the demo tells at INFO (checkBoot).
func TestVCenterCheckBesideTheRunningDemo(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs testutil.SyncBuffer
	path := filepath.Join(t.TempDir(), "demo.toml")
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, Options{WriteConfig: path, Stdout: io.Discard,
			Logger:      slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			OnReady:     func(Info) { close(ready) },
			SerialTasks: true})
		done <- err
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("the demo ended before it was ready: %v", err)
	}

	noEnv := func(string) (string, bool) { return "", false }
	cfg, err := config.LoadAndValidate(path, config.LoadOptions{LookupEnv: noEnv})
	require.NoError(t, err)
	dial := func(ctx context.Context) (*vcenter.Client, error) {
		return vcenter.Dial(ctx, daemon.VCenterConfig(cfg))
	}
	rep := vcheck.Run(ctx, cfg, dial, vcheck.Options{RunID: "beside", GuestReadyTimeout: time.Minute})
	var out bytes.Buffer
	rep.WriteText(&out)
	cancel()
	require.NoError(t, <-done)
	t.Logf("report:\n%s", out.String())
	assert.False(t, rep.Failed())
	assert.NotEmpty(t, logs.Lines("a vcenter check VM booted"), "the check's cloud-init VMs booted beside the demo")
	assert.Empty(t, logs.Lines("level=WARN"), "the demo warned while the check ran beside it")
}
