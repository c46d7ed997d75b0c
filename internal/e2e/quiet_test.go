//go:build !race

package e2e

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/demo"
)

// TestDemoIsQuiet is `demo --jobs 6 --once` at its default log level
// (warn): a healthy run prints no WARN or ERROR line. It once printed nine
// in its first two seconds, from work started before vCenter answered
// ("vcenter not connected … still connecting") and from the CDN lookup.
func TestDemoIsQuiet(t *testing.T) {
	var stdout, logs syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// As cmdDemo builds it: text lines, warn level.
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	_, err := demo.Run(ctx, demo.Options{Jobs: 6, Once: true, Stdout: &stdout, Logger: logger})
	require.NoError(t, err, "logs:\n%s", logs.String())
	for _, out := range []string{stdout.String(), logs.String()} {
		for _, line := range strings.Split(out, "\n") {
			assert.NotContains(t, line, "level=WARN")
			assert.NotContains(t, line, "level=ERROR")
		}
	}
	assert.Empty(t, strings.TrimSpace(logs.String()), "a healthy demo logs nothing at warn level")
	assert.Contains(t, stdout.String(), "job 6", "the demo ran its jobs")
}
