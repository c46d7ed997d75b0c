package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
)

// engineFile is an operator's CDS engine file: the [hatchery.vsphere] that
// upstream's `engine config new hatchery:vsphere` writes
// (internal/config/testdata, its header says where it comes from), filled
// with a vCenter, a name, a CDS URL and a region, beside the [api] and
// [cdn] sections an engine file also holds (and [log], [telemetry], which
// the generated file has).
func engineFile(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "internal", "config", "upstream", "testdata", "upstream-engine-vsphere.toml"))
	require.NoError(t, err)
	doc := string(b)
	for _, r := range [][2]string{
		{`endpoint = ""`, `endpoint = "vcenter.example.com"`},
		{`user = ""`, `user = "cds@vsphere.local"`},
		{`datacenterString = ""`, `datacenterString = "DC0"`},
		{`name = "cds-hatchery-vsphere-generated"`, `name = "hv-upstream"`},
		{`region = ""`, `region = "R"`},
	} {
		require.Contains(t, doc, r[0])
		doc = strings.Replace(doc, r[0], r[1], 1)
	}
	api := "[api]\nname = \"cds-api\"\n[api.url]\napi = \"http://localhost:8081\"\n[api.database]\nhost = \"db\"\npassword = \"db-secret\"\n\n"
	cdn := "[cdn]\nname = \"cds-cdn\"\n[cdn.storageUnits.buffers.redis]\nbufferType = \"log\"\n\n"
	return api + cdn + doc
}

// `config check` of an engine file with [api], [cdn], [log], [telemetry]
// and [hatchery.vsphere] exits 0, names the sections it ignores once, and
// says per upstream key what it does with it.
func TestConfigCheckEngineFile(t *testing.T) {
	t.Parallel()
	r := runCmd(t, secretsEnv(), nil, "config", "check", "--config", writeFile(t, engineFile(t)))
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "configuration OK\n")
	assert.Contains(t, r.stdout, "  [api], [cdn], [log], [telemetry]: ignored: sections of other CDS services")
	assert.Equal(t, 1, strings.Count(r.stdout, "[api]"), "named once")
	assert.Contains(t, r.stdout, "  hatchery.vsphere.guestCredentials[0]: ignored: upstream's placeholder entry")
	assert.Contains(t, r.stdout, "  hatchery.vsphere.workerRegistrationTTL: 0 is upstream's \"the default\": this hatchery's default, 10")
	assert.Contains(t, r.stdout, "  hatchery.vsphere.commonConfiguration.logOptions.spawnOptions.thresholdWarning: mapped to hatchery.vsphere.slowStartThreshold")
	assert.Contains(t, r.stdout, "  hatchery.vsphere.commonConfiguration.http.port: kept\n")
	assert.Contains(t, r.stdout, "  hatchery.vsphere.commonConfiguration.logOptions.spawnOptions.thresholdCritical: accepted, unused: ")
	assert.NotContains(t, r.stdout+r.stderr, "db-secret")
	assert.NotContains(t, r.stdout+r.stderr, plantedPassword)
}

// A native file says nothing about upstream.
func TestConfigCheckNativeFileSaysNothingOfUpstream(t *testing.T) {
	t.Parallel()
	r := runCmd(t, secretsEnv(), nil, "config", "check", "--config", writeFile(t, string(config.ReferenceConfig())))
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.NotContains(t, r.stdout, "upstream")
}

// `start hatchery:vsphere --config FILE`, the command line of upstream's
// units, starts with an engine file and logs at INFO what it ignores;
// the service name after the flags works too; another service is refused.
func TestStartUpstreamCommandLine(t *testing.T) {
	t.Parallel()
	path := writeFile(t, engineFile(t))
	for _, args := range [][]string{
		{"start", "hatchery:vsphere", "--config", path},
		{"start", "--config", path, "hatchery:vsphere"},
	} {
		var got *config.Config
		a := &app{start: func(_ context.Context, cfg *config.Config, _ *slog.Logger, _ func() (*config.Config, error), _ func(string)) error {
			got = cfg
			return context.Canceled
		}}
		r := runCmd(t, secretsEnv(), a, args...)
		require.Equal(t, exitOK, r.code, "%v: %s", args, r.stderr)
		require.NotNil(t, got)
		assert.Equal(t, "R", got.CommonConfiguration.Provision.Region)
		assert.Contains(t, r.stderr, `level=INFO msg="upstream configuration" key="[api], [cdn], [log], [telemetry]"`)
		assert.Equal(t, 1, strings.Count(r.stderr, "[telemetry]"), "named once")
		assert.NotContains(t, r.stderr, "level=WARN")
	}
	for _, args := range [][]string{
		{"start", "api", "--config", path},
		{"start", "hatchery:swarm", "--config", path},
		{"start", "--config", path, "extra"},
	} {
		r := runCmd(t, secretsEnv(), nil, args...)
		assert.Equal(t, exitUsage, r.code, "%v", args)
	}
	r := runCmd(t, secretsEnv(), nil, "start", "hatchery:swarm", "--config", path)
	assert.Contains(t, r.stderr, `runs only hatchery:vsphere`)
}
