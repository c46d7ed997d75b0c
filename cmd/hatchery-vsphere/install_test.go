package main

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/cdssim"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
)

const unitPath = "../../configs/hatchery-vsphere.service"

// unitValues returns the values of key in the [Service] section of the
// shipped unit, in order.
func unitValues(t *testing.T, key string) []string {
	t.Helper()
	f, err := os.Open(unitPath)
	require.NoError(t, err)
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), key+"="); ok {
			out = append(out, v)
		}
	}
	require.NoError(t, sc.Err())
	return out
}

// installRoot lays out /etc/hatchery-vsphere as docs/install.md says, under
// a temporary root: the `config new` file, the credential files the unit's
// LoadCredential= lines name, and secrets.env. It returns the root and a
// function mapping a path of the guide to the temporary one.
func installRoot(t *testing.T, key string) (string, func(string) string) {
	t.Helper()
	root := t.TempDir()
	under := func(p string) string {
		if strings.HasPrefix(p, "/etc/hatchery-vsphere") {
			return filepath.Join(root, p)
		}
		return p
	}
	require.NoError(t, os.MkdirAll(under("/etc/hatchery-vsphere/credentials"), 0o700))
	printed := runCmd(t, nil, nil, "config", "new")
	require.Equal(t, exitOK, printed.code)
	require.NoError(t, os.WriteFile(under("/etc/hatchery-vsphere/hatchery.toml"), []byte(printed.stdout), 0o640))

	guide, err := os.ReadFile("../../docs/install.md")
	require.NoError(t, err)
	creds := unitValues(t, "LoadCredential")
	require.Len(t, creds, 2, "the unit loads the vCenter password and the RSA key as credentials")
	for _, c := range creds {
		id, src, ok := strings.Cut(c, ":")
		require.True(t, ok, "LoadCredential=%s", c)
		assert.Contains(t, string(guide), src, "docs/install.md creates %s", src)
		value := map[string]string{config.CredentialPassword: plantedPassword + "\n", config.CredentialRSAPrivateKey: key}[id]
		require.NotEmpty(t, value, "unexpected credential %s", id)
		require.NoError(t, os.WriteFile(under(src), []byte(value), 0o600))
	}
	envFile := unitValues(t, "EnvironmentFile")
	require.Len(t, envFile, 1)
	require.NoError(t, os.WriteFile(under(envFile[0]), []byte(config.EnvAPITokenV2+"="+plantedToken+"\n"), 0o600))
	return root, under
}

// envFileVars reads an EnvironmentFile as `env $(cat FILE | xargs)` does
// for one-line values.
func envFileVars(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	env := map[string]string{}
	for _, w := range strings.Fields(string(b)) {
		k, v, ok := strings.Cut(w, "=")
		require.True(t, ok, "%q", w)
		env[k] = v
	}
	return env
}

// loadCredentials does what systemd does for the unit's LoadCredential=
// lines: copies each source file to a fresh directory under its ID, and
// returns the directory (the service's $CREDENTIALS_DIRECTORY).
func loadCredentials(t *testing.T, under func(string) string) string {
	t.Helper()
	dir := t.TempDir()
	for _, c := range unitValues(t, "LoadCredential") {
		id, src, _ := strings.Cut(c, ":")
		b, err := os.ReadFile(under(src))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, id), b, 0o400))
	}
	return dir
}

// runUnitCommand runs an Exec line of the unit (binary dropped, paths
// mapped) and returns the configuration start received, if it ran.
func runUnitCommand(t *testing.T, line string, under func(string) string, env map[string]string) (result, *config.Config) {
	t.Helper()
	f := strings.Fields(line)
	require.Equal(t, "/usr/local/bin/hatchery-vsphere", f[0])
	args := f[1:]
	for i := range args {
		args[i] = under(args[i])
	}
	var got *config.Config
	a := &app{start: func(_ context.Context, cfg *config.Config, _ *slog.Logger, _ func() (*config.Config, error), _ func(string)) error {
		got = cfg
		return nil
	}}
	return runCmd(t, env, a, args...), got
}

// TestInstallGuideLiterally follows docs/install.md and the shipped unit:
// the pre-start check and start pass with the vCenter password and the PEM
// key given as systemd credentials (CREDENTIALS_DIRECTORY set as systemd
// does) and the token from secrets.env; the PEM key given through a file
// variable works too; and the guide's own check command passes.
func TestInstallGuideLiterally(t *testing.T) {
	t.Parallel()
	key := rsaKey()
	_, under := installRoot(t, key)

	env := envFileVars(t, under(unitValues(t, "EnvironmentFile")[0]))
	env[config.EnvCredentialsDirectory] = loadCredentials(t, under)

	pre := unitValues(t, "ExecStartPre")
	require.Len(t, pre, 1)
	r, _ := runUnitCommand(t, pre[0], under, env)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Equal(t, "configuration OK\n", r.stdout)

	start := unitValues(t, "ExecStart")
	require.Len(t, start, 1)
	r, cfg := runUnitCommand(t, start[0], under, env)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.NotNil(t, cfg, "start ran")
	assert.Equal(t, strings.TrimRight(key, "\n"), cfg.CommonConfiguration.RSAPrivateKey, "the PEM key from the credential, line breaks kept")
	_, err := hatchery.ParseRSAPrivateKey(cfg.CommonConfiguration.RSAPrivateKey)
	require.NoError(t, err, "the daemon's own key parsing accepts it")
	assert.Equal(t, plantedPassword, cfg.Password)
	assert.Equal(t, plantedToken, cfg.CommonConfiguration.API.TokenV2)
	for _, s := range []string{plantedPassword, plantedToken, "PRIVATE KEY-----\nMI"} {
		assert.NotContains(t, r.stdout+r.stderr, s)
	}

	// The PEM key through a file variable instead of a credential.
	fileEnv := envFileVars(t, under(unitValues(t, "EnvironmentFile")[0]))
	fileEnv[config.EnvRSAPrivateKey+config.EnvFileSuffix] = under("/etc/hatchery-vsphere/credentials/rsa-private-key")
	fileEnv[config.EnvPassword+config.EnvFileSuffix] = under("/etc/hatchery-vsphere/credentials/vcenter-password")
	r, cfg = runUnitCommand(t, start[0], under, fileEnv)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.NotNil(t, cfg)
	assert.Equal(t, strings.TrimRight(key, "\n"), cfg.CommonConfiguration.RSAPrivateKey)

	// The guide's check command: secrets.env through env $(… | xargs), the
	// credentials directory itself as CREDENTIALS_DIRECTORY.
	guide, err := os.ReadFile("../../docs/install.md")
	require.NoError(t, err)
	m := regexp.MustCompile(`CREDENTIALS_DIRECTORY=(\S+)`).FindSubmatch(guide)
	require.NotNil(t, m, "docs/install.md's check sets CREDENTIALS_DIRECTORY")
	guideEnv := envFileVars(t, under(unitValues(t, "EnvironmentFile")[0]))
	guideEnv[config.EnvCredentialsDirectory] = under(string(m[1]))
	r, _ = runUnitCommand(t, pre[0], under, guideEnv)
	require.Equal(t, exitOK, r.code, r.stderr)
}

// TestSystemdAnalyzeVerify runs `systemd-analyze verify` on the shipped
// unit, its binary path pointed at an executable that exists here.
func TestSystemdAnalyzeVerify(t *testing.T) {
	t.Parallel()
	tool, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("systemd-analyze is missing (.ci/run installs the systemd package): %v", err)
		}
		t.Skip("systemd-analyze not installed (Debian package systemd)")
	}
	self, err := os.Executable()
	require.NoError(t, err)
	unit, err := os.ReadFile(unitPath)
	require.NoError(t, err)
	p := filepath.Join(t.TempDir(), "hatchery-vsphere.service")
	require.NoError(t, os.WriteFile(p, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/hatchery-vsphere", self)), 0o644))
	out, err := exec.Command(tool, "verify", p).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Empty(t, strings.TrimSpace(string(out)), "systemd-analyze verify complains")
}

// TestInstallGuideStartsTheDaemon follows the guide up to a running
// daemon: the `config new` file with its placeholders replaced by a vCenter
// simulator and a CDS API simulator, the unit's pre-start check, then the
// unit's start command running the real daemon, with the vCenter password
// and the PEM key given as systemd credentials, then as files named by
// *_FILE variables. The daemon signs in to the API with the key's public
// half and connects to vCenter; SIGTERM (the context) stops it with exit 0.
func TestInstallGuideStartsTheDaemon(t *testing.T) {
	t.Parallel()
	for _, form := range []string{"credential", "file variable"} {
		t.Run(form, func(t *testing.T) {
			t.Parallel()
			key := rsaKey()
			vc := vcsimtest.Start(t, vcsimtest.Options{NoTemplates: true, Password: plantedPassword})
			api, err := cdssim.New(cdssim.Options{})
			require.NoError(t, err)
			t.Cleanup(api.Close)

			_, under := installRoot(t, key)
			cfgPath := under("/etc/hatchery-vsphere/hatchery.toml")
			b, err := os.ReadFile(cfgPath)
			require.NoError(t, err)
			doc := string(b)
			for old, repl := range map[string]string{
				`endpoint = "vcenter.example.com"`:    `endpoint = "` + vc.Endpoint + `"`,
				`user = "cds-hatchery@vsphere.local"`: `user = "` + vc.User + `"`,
				`caFile = ""`:                         `caFile = "` + vc.CAFile + `"`,
				`datacenterString = "datacenter1"`:    `datacenterString = "` + vc.Datacenter + `"`,
				`resourcePoolString = ""`:             `resourcePoolString = "` + vc.ResourcePool + `"`,
				// The simulator's datacenter has several networks: the
				// default one is ambiguous, which the daemon's topology
				// check reports on /mon/status (503).
				`networkString = ""`:                  `networkString = "` + vc.Network + `"`,
				`folderString = ""`:                   `folderString = "` + vc.Folder + `"`,
				`url = "https://cds-api.example.com"`: `url = "` + api.URL() + `"`,
				"port = 8086":                         "port = 0",
			} {
				require.Contains(t, doc, old)
				doc = strings.Replace(doc, old, repl, 1)
			}
			require.NoError(t, os.WriteFile(cfgPath, []byte(doc), 0o640))
			envPath := under(unitValues(t, "EnvironmentFile")[0])
			require.NoError(t, os.WriteFile(envPath, []byte(config.EnvAPITokenV2+"="+api.TokenV2()+"\n"), 0o600))
			env := envFileVars(t, envPath)
			switch form {
			case "credential":
				env[config.EnvCredentialsDirectory] = loadCredentials(t, under)
			default:
				env[config.EnvRSAPrivateKey+config.EnvFileSuffix] = under("/etc/hatchery-vsphere/credentials/rsa-private-key")
				env[config.EnvPassword+config.EnvFileSuffix] = under("/etc/hatchery-vsphere/credentials/vcenter-password")
			}

			r, _ := runUnitCommand(t, unitValues(t, "ExecStartPre")[0], under, env)
			require.Equal(t, exitOK, r.code, r.stderr)

			f := strings.Fields(unitValues(t, "ExecStart")[0])
			args := f[1:]
			for i := range args {
				args[i] = under(args[i])
			}
			var stdout, stderr syncBuffer
			a := &app{stdout: &stdout, stderr: &stderr, lookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }, start: runStart}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			code := make(chan int, 1)
			go func() { code <- a.run(ctx, args) }()
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("daemon log:\n%s", stderr.String())
				}
			})

			monRE := regexp.MustCompile(`msg="hatchery running".* mon=(\S+)`)
			var mon string
			require.Eventually(t, func() bool {
				m := monRE.FindStringSubmatch(stderr.String())
				if m != nil {
					mon = m[1]
				}
				return m != nil
			}, 20*time.Second, 20*time.Millisecond, "the daemon runs")
			hc := &http.Client{Timeout: 5 * time.Second}
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				resp, err := hc.Get("http://" + mon + "/mon/status")
				if !assert.NoError(c, err) {
					return
				}
				defer resp.Body.Close()
				var st sdk.MonitoringStatus
				assert.NoError(c, json.NewDecoder(resp.Body).Decode(&st))
				assert.Equal(c, http.StatusOK, resp.StatusCode, "%+v", st.Lines)
			}, 20*time.Second, 50*time.Millisecond, "signed in to the API with the key and connected to vCenter")

			cancel()
			select {
			case c := <-code:
				assert.Equal(t, exitOK, c)
			case <-time.After(30 * time.Second):
				t.Fatal("the daemon did not stop within 30s")
			}
			for _, s := range []string{plantedPassword, api.TokenV2(), "PRIVATE KEY-----\nMI"} {
				assert.NotContains(t, stdout.String()+stderr.String(), s)
			}
		})
	}
}

// TestUnitNotifyReloadWatchdog: the shipped unit lets the hatchery tell
// systemd its state (Type=notify, its main process only), reloads with
// SIGHUP, has a watchdog and no start timeout (READY waits for vCenter and
// the API); without these systemd would neither wait for READY, reload in
// place, nor restart a stuck hatchery.
func TestUnitNotifyReloadWatchdog(t *testing.T) {
	t.Parallel()
	unit, err := os.ReadFile(unitPath)
	require.NoError(t, err)
	lines := map[string]bool{}
	for _, l := range strings.Split(string(unit), "\n") {
		lines[strings.TrimSpace(l)] = true
	}
	for _, want := range []string{"Type=notify", "NotifyAccess=main", "ExecReload=/bin/kill -HUP $MAINPID", "WatchdogSec=60s", "TimeoutStartSec=infinity", "Restart=on-failure"} {
		assert.True(t, lines[want], "unit line %q", want)
	}
}
