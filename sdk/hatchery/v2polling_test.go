package hatchery

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// eventsClient is the fake client whose V2 websocket delivers the ids sent
// on events.
type eventsClient struct {
	*fakeClient
	events chan string
}

func (c *eventsClient) V2QueueEvents(ctx context.Context, ids chan<- string) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case id := <-c.events:
			select {
			case ids <- id:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// v2PollingHarness is a V2-only framework whose V2 websocket is fed by the
// returned channel; disable sets DisableV2QueuePolling.
func v2PollingHarness(t *testing.T, disable bool) (*harness, chan string) {
	t.Helper()
	cfg := testConfig(t)
	cfg.API.Token = ""
	cfg.API.TokenV2 = "v2-secret-token-123456"
	events := make(chan string)
	var ec *eventsClient
	hs := newHarness(t, cfg, func(o *Options) {
		ec = &eventsClient{fakeClient: o.Client.(*fakeClient), events: events}
		o.Client = ec
		o.DisableV2QueuePolling = disable
	})
	spec := json.RawMessage(`{"image":"debian12","username":"u","password":"p"}`)
	hs.c.v2jobs["run-a"] = &fakeV2Job{info: sdk.V2QueueJobInfo{
		RunJob: sdk.V2WorkflowRunJob{ID: "run-a", Status: "Waiting", Region: "eu", Job: sdk.V2Job{RunsOn: sdk.V2JobRunsOn{Model: "m"}}},
		Model:  sdk.V2WorkerModel{Name: "Debian_12", Type: sdk.VSphere, Spec: spec},
	}}
	return hs, events
}

// TestDisableV2QueuePolling: with disableV2QueuePolling the V2 queue is
// never polled; a job announced on the websocket is still spawned.
func TestDisableV2QueuePolling(t *testing.T) {
	t.Parallel()
	hs, events := v2PollingHarness(t, true)
	hs.run()
	// Heartbeats prove the loops run for several polling periods.
	require.Eventually(t, func() bool {
		var n int
		hs.c.snapshot(func(c *fakeClient) { n = c.heartbeats })
		return n >= 5
	}, waitFor, tick)
	events <- "run-a"
	got := <-hs.h.spawned
	assert.Equal(t, "run-a", got.JobID)
	hs.c.snapshot(func(c *fakeClient) { assert.Zero(t, c.polls, "the v2 queue was polled") })
}

// TestV2QueuePollingByDefault is the control: without the option the same
// framework polls the V2 queue and finds the job without any event.
func TestV2QueuePollingByDefault(t *testing.T) {
	t.Parallel()
	hs, _ := v2PollingHarness(t, false)
	hs.run()
	got := <-hs.h.spawned
	assert.Equal(t, "run-a", got.JobID)
	hs.c.snapshot(func(c *fakeClient) { assert.Positive(t, c.polls) })
}
