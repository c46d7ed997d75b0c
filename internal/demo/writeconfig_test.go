package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/daemon"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcheck"
)

// TestWriteConfigIsTheSimulatorsConfiguration: the file `demo
// --write-config` writes loads and validates as the hatchery's own
// configuration does (no environment), points at the running
// simulators, is readable by its owner only, and `vcenter check` with it
// (the production dialer, daemon.VCenterConfig) passes every line.
func TestWriteConfigIsTheSimulatorsConfiguration(t *testing.T) {
	t.Parallel()
	sims, err := StartSims("", nil, SimsOptions{})
	require.NoError(t, err)
	t.Cleanup(sims.Close)
	path := filepath.Join(t.TempDir(), "demo.toml")
	require.NoError(t, WriteConfig(path, sims.Config))
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	noEnv := func(string) (string, bool) { return "", false }
	cfg, err := config.LoadAndValidate(path, config.LoadOptions{LookupEnv: noEnv})
	require.NoError(t, err)
	assert.Equal(t, sims.Config.Endpoint, cfg.Endpoint)
	assert.Equal(t, sims.Config.Password, cfg.Password)
	assert.Equal(t, sims.Config.CommonConfiguration.API.HTTP.URL, cfg.CommonConfiguration.API.HTTP.URL)
	assert.Equal(t, sims.Config.Placements, cfg.Placements)
	assert.Equal(t, sims.Config.GuestCredentials, cfg.GuestCredentials)
	want, err := json.Marshal(sims.Config)
	require.NoError(t, err)
	got, err := json.Marshal(cfg)
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(got), "every key the configuration shows reads back as written")

	dial := func(ctx context.Context) (*vcenter.Client, error) {
		return vcenter.Dial(ctx, daemon.VCenterConfig(cfg))
	}
	rep := vcheck.Run(context.Background(), cfg, dial, vcheck.Options{RunID: "written", GuestReadyTimeout: time.Minute})
	var out bytes.Buffer
	rep.WriteText(&out)
	t.Logf("report:\n%s", out.String())
	for _, r := range rep.Results {
		assert.Equal(t, vcheck.Pass, r.Status, "%s %s: %s", r.Capability, r.Object, r.Detail)
	}
	assert.False(t, rep.Failed())
	assert.NotContains(t, out.String(), cfg.Password)
	for _, vm := range sims.Env.VMs() {
		assert.NotContains(t, vm.Name, vcheck.FolderPrefix, "left behind")
	}
}
