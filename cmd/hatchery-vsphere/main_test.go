package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	plantedPassword = "vc-Pa55word-cmd-planted"
	plantedToken    = "tok-cmd-planted-0123456789"
)

var rsaKey = sync.OnceValue(func() string {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))
})

// syncBuffer is the shared concurrency-safe output sink.
type syncBuffer = testutil.SyncBuffer

// result is one command run.
type result struct {
	code           int
	stdout, stderr string
}

// runCmd runs the command line with the environment env and the hooks of
// a (nil: hooks that fail the test if called).
func runCmd(t *testing.T, env map[string]string, a *app, args ...string) result {
	t.Helper()
	if a == nil {
		a = &app{}
	}
	if a.start == nil {
		a.start = func(context.Context, *config.Config, *slog.Logger, func() (*config.Config, error), func(string)) error {
			t.Error("start hook called")
			return nil
		}
	}
	if a.demo == nil {
		a.demo = func(context.Context, io.Writer, *slog.Logger, DemoFlags) error {
			t.Error("demo hook called")
			return nil
		}
	}
	return runCmdCtx(context.Background(), env, a, args...)
}

// runCmdCtx runs the command line under ctx with a's hooks (both must be
// set, or the command must not call them).
func runCmdCtx(ctx context.Context, env map[string]string, a *app, args ...string) result {
	var out, errb syncBuffer
	a.stdout, a.stderr = &out, &errb
	a.lookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	code := a.run(ctx, args)
	return result{code, out.String(), errb.String()}
}

func secretsEnv() map[string]string {
	return map[string]string{
		config.EnvPassword:      plantedPassword,
		config.EnvAPITokenV2:    plantedToken,
		config.EnvRSAPrivateKey: rsaKey(),
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hatchery.toml")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func TestConfigNewPrintsReference(t *testing.T) {
	t.Parallel()
	r := runCmd(t, nil, nil, "config", "new")
	require.Equal(t, exitOK, r.code, r.stderr)
	onDisk, err := os.ReadFile(filepath.Join("..", "..", "configs", "hatchery.toml"))
	require.NoError(t, err)
	assert.Equal(t, string(onDisk), r.stdout)
}

func TestConfigNewThenCheckRoundTrips(t *testing.T) {
	t.Parallel()
	printed := runCmd(t, nil, nil, "config", "new").stdout
	path := writeFile(t, printed)

	r := runCmd(t, secretsEnv(), nil, "config", "check", "--config", path)
	assert.Equal(t, exitOK, r.code, r.stderr)
	assert.Equal(t, "configuration OK\n", r.stdout)

	// Secrets filled into the file instead of the environment work too.
	filled := strings.Replace(printed, `password = ""`, `password = "`+plantedPassword+`"`, 1)
	filled = strings.Replace(filled, `tokenV2 = ""`, `tokenV2 = "`+plantedToken+`"`, 1)
	filled = strings.Replace(filled, `rsaPrivateKey = ""`, `rsaPrivateKey = """`+rsaKey()+`"""`, 1)
	r = runCmd(t, nil, nil, "config", "check", "--config", writeFile(t, filled))
	assert.Equal(t, exitOK, r.code, r.stderr)
}

func TestConfigCheckListsEveryProblem(t *testing.T) {
	t.Parallel()
	path := writeFile(t, `
[hatchery.vsphere]
  password = "`+plantedPassword+`"
  maxCpu = 4
  iprange = "10.0.0.1"
  defaultFlavor = "huge"
  [hatchery.vsphere.commonConfiguration.provision]
    maxWorker = 2
  [[hatchery.vsphere.networks]]
    iprange = "10.0.0.0/24"
  [[hatchery.vsphere.networks]]
    iprange = "nope"
`)
	r := runCmd(t, nil, nil, "config", "check", "--config", path)
	require.Equal(t, exitFail, r.code)
	assert.Empty(t, r.stdout)
	for _, want := range []string{
		"hatchery.vsphere.maxCpu: unknown key (did you mean maxCpus?)",
		"hatchery.vsphere.iprange: ",
		"hatchery.vsphere.networks[1].iprange: ",
		"hatchery.vsphere.defaultFlavor: \"huge\" is not a defined flavor",
		"hatchery.vsphere.commonConfiguration.provision.maxConcurrentProvisioning: 10 is greater than provision.maxWorker 2",
		"hatchery.vsphere.commonConfiguration.name: required",
		"hatchery.vsphere.commonConfiguration.api.token: required",
		"hatchery.vsphere.endpoint: required",
	} {
		assert.Contains(t, r.stderr, want)
	}
	assert.NotContains(t, r.stderr, plantedPassword)
}

func TestConfigCheckNeverPrintsSecrets(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		doc  string
		env  map[string]string
	}{
		{"valid file with a password", "", secretsEnv()},
		{"syntax error on the password line", "[hatchery.vsphere]\npassword = " + plantedPassword + "\n", nil},
		{"password in the file, other problems", "[hatchery.vsphere]\npassword = \"" + plantedPassword + "\"\nendpoint = \"" + plantedPassword + "@vc\"\n", nil},
		{"secrets from env, file invalid", "[hatchery.vsphere]\nuser = \"" + plantedToken + "x\"\n", secretsEnv()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			doc := tt.doc
			if doc == "" {
				doc = string(config.ReferenceConfig())
			}
			r := runCmd(t, tt.env, nil, "config", "check", "--config", writeFile(t, doc))
			for _, s := range []string{plantedPassword, plantedToken, "PRIVATE KEY-----\nMI"} {
				assert.NotContains(t, r.stdout+r.stderr, s)
			}
		})
	}
}

func TestConfigCheckUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no file flag", []string{"config", "check"}, exitUsage, "--config FILE is required"},
		{"missing file", []string{"config", "check", "--config", "/nonexistent/h.toml"}, exitFail, "open config"},
		{"no subcommand", []string{"config"}, exitUsage, "usage"},
		{"bad subcommand", []string{"config", "old"}, exitUsage, "unknown subcommand"},
		{"bad subcommand is not help", []string{"config", "--helpme"}, exitUsage, "unknown subcommand"},
		{"no command", nil, exitUsage, "usage"},
		{"bad command", []string{"stop"}, exitUsage, `unknown command "stop"`},
		{"bad flag", []string{"version", "--x"}, exitUsage, "flag provided but not defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := runCmd(t, nil, nil, tt.args...)
			assert.Equal(t, tt.code, r.code)
			assert.Contains(t, r.stderr, tt.want)
		})
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	r := runCmd(t, nil, nil, "version")
	require.Equal(t, exitOK, r.code)
	assert.True(t, strings.HasPrefix(r.stdout, "hatchery-vsphere dev (commit "), r.stdout)
	// The govmomi the binary links is the one go.mod requires.
	gomod, err := os.ReadFile("../../go.mod")
	require.NoError(t, err)
	want := ""
	for _, l := range strings.Split(string(gomod), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == govmomiModule {
			want = f[1]
		}
	}
	require.NotEmpty(t, want, "go.mod requires no govmomi")
	assert.True(t, strings.HasSuffix(r.stdout, ", "+runtime.Version()+", govmomi "+want+")\n"), r.stdout)
}

func TestModuleVersion(t *testing.T) {
	t.Parallel()
	bi := &debug.BuildInfo{Deps: []*debug.Module{
		{Path: "github.com/other/mod", Version: "v1.0.0"},
		{Path: govmomiModule, Version: "v0.56.0"},
	}}
	assert.Equal(t, "v0.56.0", moduleVersion(bi, govmomiModule))
	bi.Deps[1].Replace = &debug.Module{Path: "../govmomi-fork", Version: "v0.56.1-fork"}
	assert.Equal(t, "v0.56.1-fork", moduleVersion(bi, govmomiModule), "a replacement's version is what is linked")
	assert.Equal(t, "unknown", moduleVersion(bi, "github.com/absent/mod"))
	assert.Equal(t, "unknown", moduleVersion(nil, govmomiModule))
}

func TestStartCallsHookWithValidatedConfig(t *testing.T) {
	t.Parallel()
	path := writeFile(t, string(config.ReferenceConfig()))
	var got *config.Config
	a := &app{start: func(ctx context.Context, cfg *config.Config, _ *slog.Logger, _ func() (*config.Config, error), _ func(string)) error {
		require.NotNil(t, ctx)
		got = cfg
		return context.Canceled // a signal-stopped run is a clean exit
	}}
	r := runCmd(t, secretsEnv(), a, "start", "--config", path, "--log-level", "debug")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.NotNil(t, got)
	assert.Equal(t, plantedPassword, got.Password, "env secrets reach the hook")
	assert.Contains(t, r.stderr, "configuration loaded")
	assert.NotContains(t, r.stderr, plantedPassword, "the debug dump is redacted")
	assert.NotContains(t, r.stderr, plantedToken)
}

func TestStartRefusesInvalidConfig(t *testing.T) {
	t.Parallel()
	r := runCmd(t, nil, nil, "start", "--config", writeFile(t, "[hatchery.vsphere]\n"))
	assert.Equal(t, exitFail, r.code)
	assert.Contains(t, r.stderr, "hatchery.vsphere.endpoint: required")
}

func TestStartHookError(t *testing.T) {
	t.Parallel()
	a := &app{start: func(context.Context, *config.Config, *slog.Logger, func() (*config.Config, error), func(string)) error {
		return io.ErrUnexpectedEOF
	}}
	r := runCmd(t, secretsEnv(), a, "start", "--config", writeFile(t, string(config.ReferenceConfig())))
	assert.Equal(t, exitFail, r.code)
	assert.Contains(t, r.stderr, "hatchery stopped")
}

func TestDemoFlags(t *testing.T) {
	t.Parallel()
	var got DemoFlags
	a := &app{demo: func(_ context.Context, _ io.Writer, _ *slog.Logger, f DemoFlags) error { got = f; return nil }}
	r := runCmd(t, nil, a, "demo", "--jobs", "6", "--once", "--listen", "127.0.0.1:9999")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Equal(t, DemoFlags{Jobs: 6, Once: true, Listen: "127.0.0.1:9999", Instances: 1}, got)

	r = runCmd(t, nil, a, "demo", "--instances", "2", "--jobs", "20", "--once")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Equal(t, DemoFlags{Jobs: 20, Once: true, Instances: 2}, got)

	r = runCmd(t, nil, nil, "demo", "--once")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "--once needs --jobs N")

	for _, n := range []string{"0", "3", "-1"} {
		r = runCmd(t, nil, a, "demo", "--instances", n, "--jobs", "2", "--once")
		assert.Equal(t, exitUsage, r.code, n)
		assert.Contains(t, r.stderr, "demo: --instances "+n+": 1 or 2 instances are supported", n)
	}
}

// TestStartLogLevelFollowsTheConfiguration: logLevel set in the file wins
// over --log-level, and the setLogLevel start hands the daemon (a reload)
// changes the running logger's level: "" goes back to the flag's. Without
// it the level was the flag's for the life of the process.
func TestStartLogLevelFollowsTheConfiguration(t *testing.T) {
	t.Parallel()
	doc := strings.Replace(string(config.ReferenceConfig()), `logLevel = ""`, `logLevel = "warn"`, 1)
	require.Contains(t, doc, `logLevel = "warn"`)
	path := writeFile(t, doc)
	a := &app{start: func(_ context.Context, _ *config.Config, log *slog.Logger, _ func() (*config.Config, error), set func(string)) error {
		log.Info("info-at-warn")
		set("debug")
		log.Debug("debug-after-reload")
		set("")
		log.Debug("debug-at-the-flags-info")
		log.Info("info-at-the-flags-info")
		return nil
	}}
	r := runCmd(t, secretsEnv(), a, "start", "--config", path, "--log-level", "info")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.NotContains(t, r.stderr, "info-at-warn")
	assert.Contains(t, r.stderr, "debug-after-reload")
	assert.NotContains(t, r.stderr, "debug-at-the-flags-info")
	assert.Contains(t, r.stderr, "info-at-the-flags-info")
}

// TestStartReloadReadsTheFileAgain: the reload `start` hands the daemon
// (SIGHUP) reads the same file again, with the checks of `config check`
// and the secrets of the same environment: an edit is seen, a broken file
// is an error naming its problem. Without it the daemon could not reload.
func TestStartReloadReadsTheFileAgain(t *testing.T) {
	t.Parallel()
	doc := string(config.ReferenceConfig())
	path := writeFile(t, doc)
	var reload func() (*config.Config, error)
	a := &app{start: func(_ context.Context, _ *config.Config, _ *slog.Logger, rl func() (*config.Config, error), _ func(string)) error {
		reload = rl
		return nil
	}}
	r := runCmd(t, secretsEnv(), a, "start", "--config", path)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.NotNil(t, reload)

	edited := strings.Replace(doc, "#maxCpus = 64", "maxCpus = 48", 1)
	require.True(t, edited != doc, "the reference configuration holds the example #maxCpus = 64")
	require.NoError(t, os.WriteFile(path, []byte(edited), 0o600))
	cfg, err := reload()
	require.NoError(t, err)
	assert.Equal(t, 48, cfg.MaxCPUs)
	assert.Equal(t, plantedPassword, cfg.Password, "env secrets again")

	require.NoError(t, os.WriteFile(path, []byte("[hatchery.vsphere]\n"), 0o600))
	_, err = reload()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "hatchery.vsphere.endpoint: required")
}
