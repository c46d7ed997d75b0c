package configs

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// unitFile is a parsed systemd unit: section -> key -> values, in order
// (a key may repeat).
type unitFile map[string]map[string][]string

// parseUnit reads the subset of systemd.syntax(7) the unit uses: sections,
// Key=Value lines, comments (# or ;), blank lines; a trailing backslash
// continues a line.
func parseUnit(t *testing.T, path string) unitFile {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	u := unitFile{}
	section := ""
	sc := bufio.NewScanner(f)
	var cont string
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if cont != "" {
			line, cont = cont+" "+line, ""
		}
		if l, ok := strings.CutSuffix(line, `\`); ok {
			cont = l
			continue
		}
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			if u[section] == nil {
				u[section] = map[string][]string{}
			}
		default:
			k, v, ok := strings.Cut(line, "=")
			require.True(t, ok, "%s:%d: not Key=Value: %q", path, n, line)
			require.NotEmpty(t, section, "%s:%d: key outside a section", path, n)
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			u[section][k] = append(u[section][k], v)
		}
	}
	require.NoError(t, sc.Err())
	require.Empty(t, cont, "%s: file ends on a continuation", path)
	return u
}

// last is the effective value of a key (the last assignment wins).
func (u unitFile) last(section, key string) (string, bool) {
	vs := u[section][key]
	if len(vs) == 0 {
		return "", false
	}
	return vs[len(vs)-1], true
}

// TestSystemdUnitHardening checks configs/hatchery-vsphere.service: a
// dedicated non-root account, the sandboxing options (NoNewPrivileges,
// ProtectSystem=strict, ProtectHome, PrivateTmp), start and its
// pre-start config check on the same configuration file, secrets from an
// EnvironmentFile rather than in the unit, a stop timeout above the
// daemon's 30 s shutdown bound, and SIGTERM as the stop signal.
func TestSystemdUnitHardening(t *testing.T) {
	t.Parallel()
	u := parseUnit(t, "hatchery-vsphere.service")
	require.Contains(t, u, "Unit")
	require.Contains(t, u, "Service")
	require.Contains(t, u, "Install")

	const svc = "Service"
	user, ok := u.last(svc, "User")
	require.True(t, ok, "User= is set")
	assert.NotEmpty(t, user)
	assert.NotEqual(t, "root", user)
	assert.NotEqual(t, "0", user)
	if g, ok := u.last(svc, "Group"); ok {
		assert.NotEqual(t, "root", g)
		assert.NotEqual(t, "0", g)
	}
	if d, ok := u.last(svc, "DynamicUser"); ok {
		assert.Contains(t, []string{"yes", "true", "1", "on"}, d, "DynamicUser, when set, is on")
	}

	for key, want := range map[string][]string{
		"NoNewPrivileges": {"yes", "true", "1", "on"},
		"ProtectSystem":   {"strict"},
		"ProtectHome":     {"yes", "true", "1", "on", "read-only", "tmpfs"},
		"PrivateTmp":      {"yes", "true", "1", "on"},
	} {
		v, ok := u.last(svc, key)
		if assert.True(t, ok, "%s= is set", key) {
			assert.Contains(t, want, v, "%s=", key)
		}
	}

	// The configuration path: start and the pre-start check read the same
	// file, under /etc, read only.
	start, ok := u.last(svc, "ExecStart")
	require.True(t, ok, "ExecStart=")
	cfgPath := flagValue(start, "--config")
	require.NotEmpty(t, cfgPath, "ExecStart passes --config: %q", start)
	assert.True(t, strings.HasPrefix(cfgPath, "/etc/hatchery-vsphere/"), "config under /etc/hatchery-vsphere: %q", cfgPath)
	assert.Contains(t, start, " start ", "ExecStart runs the start subcommand")
	pre, ok := u.last(svc, "ExecStartPre")
	if assert.True(t, ok, "ExecStartPre= checks the config") {
		assert.Contains(t, pre, "config check")
		assert.Equal(t, cfgPath, flagValue(pre, "--config"), "the check reads the file start reads")
	}
	ro := strings.Join(u[svc]["ReadOnlyPaths"], " ")
	assert.Contains(t, strings.Fields(ro), cfgPath, "the config is read only")

	// Secrets: from an EnvironmentFile, never inline in the unit.
	ef, ok := u.last(svc, "EnvironmentFile")
	assert.True(t, ok, "EnvironmentFile= carries the secrets")
	assert.True(t, strings.HasPrefix(strings.TrimPrefix(ef, "-"), "/etc/hatchery-vsphere/"), "EnvironmentFile under /etc/hatchery-vsphere: %q", ef)
	for _, env := range u[svc]["Environment"] {
		up := strings.ToUpper(env)
		for _, s := range []string{"PASSWORD", "TOKEN", "PRIVATE_KEY"} {
			assert.NotContains(t, up, s, "a secret inline in Environment=: %q", env)
		}
	}

	// Stop: SIGTERM (the daemon's context), with room for its 30 s bound.
	if sig, ok := u.last(svc, "KillSignal"); ok {
		assert.Equal(t, "SIGTERM", sig)
	}
	// The stop drains first (drainTimeout, 120 s by default:
	// internal/config.DefaultDrainTimeout), then shuts down within 30 s.
	if ts, ok := u.last(svc, "TimeoutStopSec"); ok && ts != "infinity" {
		d, err := time.ParseDuration(ts)
		if err != nil { // a bare number is seconds
			var n int
			n, err = strconv.Atoi(ts)
			d = time.Duration(n) * time.Second
		}
		require.NoError(t, err, "TimeoutStopSec=%s", ts)
		assert.GreaterOrEqual(t, d, (120+30)*time.Second, "TimeoutStopSec leaves room for the default drain (120 s) and the 30 s shutdown bound")
	}
	// The ctl socket's directory: the service's own, closed to others.
	assert.Equal(t, []string{"hatchery-vsphere"}, u[svc]["RuntimeDirectory"])
	if m, ok := u.last(svc, "RuntimeDirectoryMode"); ok {
		assert.Equal(t, "0700", m)
	}
	assert.Equal(t, []string{"multi-user.target"}, u["Install"]["WantedBy"])
}

// flagValue is the value after flag in a command line ("" when absent).
func flagValue(cmd, flag string) string {
	f := strings.Fields(cmd)
	for i, w := range f {
		if v, ok := strings.CutPrefix(w, flag+"="); ok {
			return v
		}
		if w == flag && i+1 < len(f) {
			return f[i+1]
		}
	}
	return ""
}
