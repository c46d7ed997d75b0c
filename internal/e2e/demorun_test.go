//go:build !race

package e2e

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/demo"
)

// runDemoOnce runs the demo's mix of six jobs once (its guest-operations,
// cloud-init, instant-clone and Windows models among them), handing
// onDone the demo's environment before it stops, and returns its report and what it
// printed; its output and logs are shown if the test fails.
func runDemoOnce(t *testing.T, onDone func(demo.Info)) (*demo.Report, string) {
	t.Helper()
	var stdout, logs syncBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("demo output:\n%s\nlogs:\n%s", stdout.String(), logs.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rep, err := demo.Run(ctx, demo.Options{
		Jobs: 6, Once: true, Timeout: 60 * time.Second,
		JobEvery: 400 * time.Millisecond, WorkerRunTime: 500 * time.Millisecond,
		Stdout: &stdout, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		OnDone: func(i demo.Info, _ *demo.Report) { onDone(i) },
	})
	require.NoError(t, err)
	require.NotNil(t, rep)
	return rep, stdout.String()
}
