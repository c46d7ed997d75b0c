package hatchery

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// drainLine is the "Drain" status line, if any.
func drainLine(f *Framework) (sdk.MonitoringStatusLine, bool) {
	for _, l := range f.Status(context.Background()).Lines {
		if l.Component == "Drain" {
			return l, true
		}
	}
	return sdk.MonitoringStatusLine{}, false
}

// TestDrainLetsSpawnInFlightFinishAndTakesNoJob: a drain started while a
// spawn is in flight lets that spawn finish (its job stays booked for its
// worker), takes no job queued since (neither polled nor booked), reports
// "Drain" on the status while it waits, and closes its channel and logs
// "drained" once the spawn ended. Without the drain the second job would
// be booked at the next poll (every 5 ms here).
func TestDrainLetsSpawnInFlightFinishAndTakesNoJob(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, testConfig(t), nil)
	hs.c.models = []sdk.Model{testModel("shared.infra", "debian12")}
	gate := make(chan struct{})
	hs.h.gate = gate
	hs.c.addJob(1, modelReq("shared.infra/debian12"))
	stop := hs.run()
	<-hs.h.spawned // job 1's spawn is in flight

	_, ok := drainLine(hs.f)
	assert.False(t, ok, "no Drain line before a drain")
	drained := hs.f.Drain("test")
	assert.True(t, hs.f.Draining())
	assert.Equal(t, 1, hs.f.InFlight())
	select {
	case <-drained:
		t.Fatal("drained while a spawn is in flight")
	default:
	}
	l, ok := drainLine(hs.f)
	require.True(t, ok, "Drain line while draining")
	assert.Equal(t, sdk.MonitoringStatusWarn, l.Status)
	assert.Contains(t, l.Value, "1 in flight")
	assert.Equal(t, drained, hs.f.Drain("again"), "a second drain returns the same channel")

	// A job queued during the drain is not taken: wait for heartbeats
	// (they go on while draining) long enough for several poll periods.
	var polls, beats int
	hs.c.snapshot(func(c *fakeClient) { polls, beats = c.polls, c.heartbeats })
	hs.c.addJob(2, modelReq("shared.infra/debian12"))
	require.Eventually(t, func() bool {
		n := 0
		hs.c.snapshot(func(c *fakeClient) { n = c.heartbeats })
		return n >= beats+5
	}, 5*time.Second, time.Millisecond, "heartbeats go on while draining")

	close(gate) // the spawn in flight ends
	select {
	case <-drained:
	case <-time.After(5 * time.Second):
		t.Fatal("not drained after the spawn in flight ended")
	}
	assert.True(t, hs.f.Drained())
	assert.Equal(t, 0, hs.f.InFlight())
	l, _ = drainLine(hs.f)
	assert.Contains(t, l.Value, "drained at")

	hs.c.snapshot(func(c *fakeClient) {
		// A poll pass that checked before the drain began may still list.
		assert.LessOrEqual(t, c.polls, polls+1, "no queue poll while draining")
		assert.Equal(t, 1, c.books, "only the job in flight was booked")
		assert.Equal(t, testHatchery, c.jobs[1].bookedBy, "the spawned job stays booked for its worker")
		assert.Empty(t, c.jobs[2].bookedBy, "the job queued during the drain is left to another instance")
	})
	hs.h.get(func(h *fakeHatchery) { assert.Len(t, h.spawns, 1) })
	err, _ := stop()
	require.NoError(t, err)
	logs := hs.logs.String()
	assert.Equal(t, 1, strings.Count(logs, `"msg":"drain started`), "one drain line:\n%s", logs)
	assert.Equal(t, 1, strings.Count(logs, `"msg":"drained: nothing in flight"`), "one drained line")
	assert.NotContains(t, logs, `"level":"WARN"`)
}

// TestDrainWithNothingInFlight is drained at once.
func TestDrainWithNothingInFlight(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, testConfig(t), nil)
	hs.run()
	<-hs.f.MonReady()
	select {
	case <-hs.f.Drain("test"):
	case <-time.After(5 * time.Second):
		t.Fatal("not drained with nothing in flight")
	}
}
