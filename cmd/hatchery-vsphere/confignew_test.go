package main

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
)

// TestConfigNewStartsWithDefaults: `config new | tee FILE` then `config
// check` and `start` with only the secrets in the environment; the daemon
// gets no proxy, no static IP plan, no warm pool and no CPU or memory limit.
func TestConfigNewStartsWithDefaults(t *testing.T) {
	t.Parallel()
	path := writeFile(t, runCmd(t, nil, nil, "config", "new").stdout)
	r := runCmd(t, secretsEnv(), nil, "config", "check", "--config", path)
	require.Equal(t, exitOK, r.code, r.stderr)

	var cfg *config.Config
	a := &app{start: func(_ context.Context, c *config.Config, _ *slog.Logger, _ func() (*config.Config, error), _ func(string)) error {
		cfg = c
		return nil
	}}
	r = runCmd(t, secretsEnv(), a, "start", "--config", path)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.NotNil(t, cfg)
	assert.Empty(t, cfg.CommonConfiguration.Provision.InjectEnvVars, "no proxy injected into workers")
	assert.Empty(t, cfg.StaticNetworks(), "no static IP plan")
	assert.Empty(t, cfg.WorkerProvisioning, "no warm pool")
	assert.Zero(t, cfg.MaxCPUs, "no vCPU limit")
	assert.Zero(t, cfg.MaxMemoryMB, "no memory limit")
	assert.Empty(t, cfg.Flavors)
	assert.Empty(t, cfg.DefaultFlavor)
}
