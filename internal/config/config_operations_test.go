package config

import (
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOperationsKeys: drainTimeout's range and 0 (no drain), ctlSocket's
// absolute path and its default in $RUNTIME_DIRECTORY. A range or path not
// checked would pass Validate.
func TestOperationsKeys(t *testing.T) {
	t.Parallel()
	c := validConfig()
	require.NoError(t, c.Validate())
	d := Default()
	assert.Equal(t, DefaultDrainTimeout*time.Second, d.DrainTimeoutDuration())
	c.DrainTimeout = 0
	require.NoError(t, c.Validate())
	assert.Zero(t, c.DrainTimeoutDuration(), "0: no drain")
	for _, bad := range []int{-1, MaxDrainTimeout + 1} {
		c.DrainTimeout = bad
		assert.ErrorContains(t, c.Validate(), "hatchery.vsphere.drainTimeout")
	}
	c.DrainTimeout = 10

	env := func(v string) func(string) (string, bool) {
		return func(k string) (string, bool) { return v, k == "RUNTIME_DIRECTORY" && v != "" }
	}
	assert.Equal(t, "", c.CtlSocketPath(env("")), "no runtime directory: no socket")
	assert.Equal(t, "/run/hatchery-vsphere/ctl.sock", c.CtlSocketPath(env("/run/hatchery-vsphere:/run/other")))
	c.CtlSocket = "/tmp/h/ctl.sock"
	assert.Equal(t, "/tmp/h/ctl.sock", c.CtlSocketPath(env("/run/x")))
	require.NoError(t, c.Validate())
	c.CtlSocket = "relative/ctl.sock"
	assert.ErrorContains(t, c.Validate(), "hatchery.vsphere.ctlSocket")
	c.CtlSocket = ""
}

// TestLogLevelKey: logLevel takes debug, info, warn or error (any case) or
// nothing; anything else is refused naming the key; it is a key a reload
// applies.
func TestLogLevelKey(t *testing.T) {
	t.Parallel()
	c := validConfig()
	for _, ok := range []string{"", "debug", "INFO", "warn", "error"} {
		c.LogLevel = ok
		assert.NoError(t, c.Validate(), ok)
	}
	for _, bad := range []string{"verbose", "warning", "debug+1"} {
		c.LogLevel = bad
		assert.ErrorContains(t, c.Validate(), `hatchery.vsphere.logLevel: "`+bad+`": want debug, info, warn or error`)
	}
	l, err := ParseLogLevel("Warn")
	require.NoError(t, err)
	assert.Equal(t, slog.LevelWarn, l)
	assert.True(t, LiveKey(KeyPrefix+".logLevel"))
}

// TestUnitTimeoutStopCoversDrain: the shipped unit's TimeoutStopSec leaves
// room for the default drain and the daemon's 30 s shutdown bound; raising
// DefaultDrainTimeout without the unit fails here.
func TestUnitTimeoutStopCoversDrain(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "configs", "hatchery-vsphere.service"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^TimeoutStopSec=(\d+)s$`).FindSubmatch(b)
	require.NotNil(t, m, "TimeoutStopSec=Ns in the unit")
	n, err := strconv.Atoi(string(m[1]))
	require.NoError(t, err)
	assert.Greater(t, n, DefaultDrainTimeout+30, "TimeoutStopSec=%ds: drainTimeout %d s + shutdown 30 s", n, DefaultDrainTimeout)
}
