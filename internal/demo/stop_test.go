package demo_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/demo"
)

// cancelOn is the demo's Stdout: it cancels the run when a line holding
// marker is written (the moment a user presses Ctrl-C), and keeps
// everything written.
type cancelOn struct {
	mu     sync.Mutex
	buf    strings.Builder
	marker string
	cancel context.CancelFunc
}

func (w *cancelOn) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(string(p), w.marker) {
		w.cancel()
	}
	return len(p), nil
}

func (w *cancelOn) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestDemoStoppedBeforeItsChecksIsACleanStop: a --once run stopped (its
// ctx cancelled, as SIGINT does) once its jobs are done and before its
// checks returns no error (the command exits 0) and says the checks were
// not run; the checks would judge a state the stop cut short (and failed
// it: exit 1 after Ctrl-C).
func TestDemoStoppedBeforeItsChecksIsACleanStop(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &cancelOn{marker: "every worker VM destroyed", cancel: cancel}
	const jobs = 2
	done := make(chan error, 1)
	go func() {
		_, err := demo.Run(ctx, demo.Options{Jobs: jobs, Once: true, Checks: true, Stdout: out,
			Tune: func(c *config.Config) { c.MaxConcurrentTasks = 1 }, SerialTasks: true})
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err, out.String())
	case <-time.After(5 * time.Minute):
		t.Fatal("the demo did not end within 5 min")
	}
	s := out.String()
	require.Contains(t, s, "every worker VM destroyed", "the jobs ran")
	assert.Contains(t, s, fmt.Sprintf("stopped before the checks: %d of %d jobs done", jobs, jobs))
	assert.NotContains(t, s, "check ", "no check ran")
}

// TestStoppedDaemonIsACleanStop: a daemon ending while the demo is asked
// to stop is a clean stop whether it answered nil or its ctx's error; a
// daemon failing otherwise, or ending when no stop was asked, is not.
func TestStoppedDaemonIsACleanStop(t *testing.T) {
	t.Parallel()
	live := context.Background()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	assert.True(t, demo.Stopped(ended, nil))
	assert.True(t, demo.Stopped(ended, fmt.Errorf("instance 1: %w", context.Canceled)))
	assert.False(t, demo.Stopped(ended, errors.New("shutdown: inventory not stopped")))
	assert.False(t, demo.Stopped(live, nil))
	assert.False(t, demo.Stopped(live, context.Canceled))
}
