package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
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

// withoutRSAKey is secretsEnv without the RSA key: the key must come from
// what `config new` made.
func withoutRSAKey() map[string]string {
	env := secretsEnv()
	delete(env, config.EnvRSAPrivateKey)
	return env
}

// TestConfigNewGeneratesTheRSAKeyFile: `config new --rsa-key FILE` writes a
// new key, readable by its owner only, that `config check` accepts through
// CDS_HATCHERY_VSPHERE_RSA_PRIVATE_KEY_FILE; the printed configuration and
// stderr never hold it; a second run keeps the file as it is.
func TestConfigNewGeneratesTheRSAKeyFile(t *testing.T) {
	t.Parallel()
	keyPath := filepath.Join(t.TempDir(), "rsa-private-key")
	r := runCmd(t, nil, nil, "config", "new", "--rsa-key", keyPath)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Equal(t, string(config.ReferenceConfig()), r.stdout, "the key stays out of the printed file")
	assert.Contains(t, r.stderr, "wrote a new 2048-bit RSA key to "+keyPath)

	st, err := os.Stat(keyPath)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	keyPEM, err := os.ReadFile(keyPath)
	require.NoError(t, err)
	k, err := hatchery.ParseRSAPrivateKey(string(keyPEM))
	require.NoError(t, err)
	assert.Equal(t, 2048, k.N.BitLen())
	assert.NotContains(t, r.stderr, "PRIVATE KEY")

	env := withoutRSAKey()
	r2 := runCmd(t, env, nil, "config", "check", "--config", writeFile(t, r.stdout))
	assert.Equal(t, exitFail, r2.code, "without the key the check fails")
	assert.Contains(t, r2.stderr, "rsaPrivateKey: required")
	env[config.EnvRSAPrivateKey+config.EnvFileSuffix] = keyPath
	r2 = runCmd(t, env, nil, "config", "check", "--config", writeFile(t, r.stdout))
	assert.Equal(t, exitOK, r2.code, r2.stderr)

	r = runCmd(t, nil, nil, "config", "new", "--rsa-key", keyPath)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stderr, keyPath+" holds a 2048-bit RSA key, kept as is")
	again, err := os.ReadFile(keyPath)
	require.NoError(t, err)
	assert.Equal(t, keyPEM, again, "an existing key is never replaced")
}

// TestConfigNewRefusesABadKeyFile: a file that holds no RSA key is named
// and left alone; its content is not printed.
func TestConfigNewRefusesABadKeyFile(t *testing.T) {
	t.Parallel()
	keyPath := filepath.Join(t.TempDir(), "rsa-private-key")
	const junk = "not-a-key-but-a-secret-0123456789"
	require.NoError(t, os.WriteFile(keyPath, []byte(junk), 0o600))
	r := runCmd(t, nil, nil, "config", "new", "--rsa-key", keyPath)
	assert.Equal(t, exitFail, r.code)
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.stderr, "rsa key "+keyPath)
	assert.NotContains(t, r.stderr, junk)
	b, err := os.ReadFile(keyPath)
	require.NoError(t, err)
	assert.Equal(t, junk, string(b))
}

// TestConfigNewInlineKey: --rsa-key-inline writes a new key into the
// printed configuration, as upstream's `engine config new` does; `config
// check` accepts the file with no key in the environment; with --rsa-key
// the inlined key is the file's.
func TestConfigNewInlineKey(t *testing.T) {
	t.Parallel()
	r := runCmd(t, nil, nil, "config", "new", "--rsa-key-inline")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "rsaPrivateKey = '''\n-----BEGIN RSA PRIVATE KEY-----\n")
	assert.NotContains(t, r.stderr, "PRIVATE KEY")
	r2 := runCmd(t, withoutRSAKey(), nil, "config", "check", "--config", writeFile(t, r.stdout))
	assert.Equal(t, exitOK, r2.code, r2.stderr)

	keyPath := filepath.Join(t.TempDir(), "rsa-private-key")
	r = runCmd(t, nil, nil, "config", "new", "--rsa-key", keyPath, "--rsa-key-inline")
	require.Equal(t, exitOK, r.code, r.stderr)
	keyPEM, err := os.ReadFile(keyPath)
	require.NoError(t, err)
	assert.Contains(t, r.stdout, "rsaPrivateKey = '''\n"+string(keyPEM)+"'''\n")
}
