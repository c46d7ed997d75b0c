package latencyfile

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRoundTrip: what Write writes, Read reads back, duration by
// operation.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "lat.toml")
	require.NoError(t, Write(path, File{Source: "vc1", Latency: []Entry{
		{Op: OpLinkedClone, Real: "41.5s", Note: "2 clones"},
		{Op: OpPowerOn, Real: "1.2s"},
	}}))
	got, err := Read(path)
	require.NoError(t, err)
	assert.Equal(t, map[string]time.Duration{OpLinkedClone: 41500 * time.Millisecond, OpPowerOn: 1200 * time.Millisecond}, got)
}

// TestReadRefusesWhatTheModelCannotPlay: an unknown operation, a bad or
// non-positive duration, a repeated operation and an unknown key are
// errors naming them.
func TestReadRefusesWhatTheModelCannotPlay(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ doc, want string }{
		"unknown op":  {"[[latency]]\nop = \"teleport\"\nreal = \"1s\"\n", `unknown operation "teleport"`},
		"bad real":    {"[[latency]]\nop = \"rename\"\nreal = \"soon\"\n", `real "soon"`},
		"zero real":   {"[[latency]]\nop = \"rename\"\nreal = \"0s\"\n", `real "0s"`},
		"twice":       {"[[latency]]\nop = \"rename\"\nreal = \"1s\"\n[[latency]]\nop = \"rename\"\nreal = \"2s\"\n", `"rename" given twice`},
		"unknown key": {"[[latency]]\nop = \"rename\"\nreal = \"1s\"\nspeed = 3\n", "unknown key latency.speed"},
	} {
		path := filepath.Join(t.TempDir(), "lat.toml")
		require.NoError(t, os.WriteFile(path, []byte(tc.doc), 0o644))
		_, err := Read(path)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), tc.want, name)
	}
}
