package vcsimtest

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/latencyfile"
)

// TestUseLatencyFile: a latency file's figures replace the model's for
// the operations it names, the others and the instant clone's total
// follow; every operation a file may carry is one of the model's. Not
// parallel: the table is the process's (restored at the end).
func TestUseLatencyFile(t *testing.T) {
	saved := slices.Clone(Latencies)
	t.Cleanup(func() { copy(Latencies, saved) })
	for _, op := range latencyfile.Ops {
		assert.True(t, slices.ContainsFunc(Latencies, func(l Latency) bool { return l.Op == op }), "%s is an operation of the model", op)
	}
	path := filepath.Join(t.TempDir(), "lat.toml")
	require.NoError(t, latencyfile.Write(path, latencyfile.File{Latency: []latencyfile.Entry{
		{Op: OpLinkedClone, Real: "10s"}, {Op: OpInstantCloneTask, Real: "5s"},
	}}))
	require.NoError(t, UseLatencyFile(path))
	assert.Equal(t, 10*time.Second/LatencyScale, Modelled(OpLinkedClone))
	assert.Equal(t, 5*time.Second/LatencyScale, Modelled(OpInstantCloneTask))
	assert.Equal(t, 24*time.Second/LatencyScale, Modelled(OpInstantClone), "5 s fork + the model's 19 s re-identification")
	assert.Equal(t, 88*time.Second/LatencyScale, Modelled(OpFullClone), "not in the file: the model's")
}
