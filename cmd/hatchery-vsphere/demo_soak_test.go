package main

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDemoSoakFlag: `demo --soak D` hands the duration to the demo (make
// soak); it ends on its own, so --jobs and --once are refused beside it,
// as is a duration that is not positive.
func TestDemoSoakFlag(t *testing.T) {
	t.Parallel()
	var got DemoFlags
	a := &app{demo: func(_ context.Context, _ io.Writer, _ *slog.Logger, f DemoFlags) error { got = f; return nil }}
	r := runCmd(t, nil, a, "demo", "--soak", "20m")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Equal(t, DemoFlags{Soak: 20 * time.Minute, Instances: 1}, got)

	for _, args := range [][]string{
		{"--soak", "20m", "--jobs", "6"},
		{"--soak", "20m", "--once", "--jobs", "6"},
		{"--soak", "-1m"},
	} {
		r = runCmd(t, nil, a, append([]string{"demo"}, args...)...)
		assert.Equal(t, exitUsage, r.code, args)
		assert.Contains(t, r.stderr, "demo: --soak D takes a positive duration and neither --jobs nor --once", args)
	}
}
