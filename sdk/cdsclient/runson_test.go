package cdsclient_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// TestV2QueueRunsOnBothForms replays a V2 queue answer recorded from a real
// CDS API (testdata/v2-queue-runs-on.json: three jobs injected with no
// memory nor flavor, with a memory, with a flavor). The API sends runs-on
// as a plain string, the model, in the first case and as an object
// otherwise; one job of either form must not fail the whole poll.
func TestV2QueueRunsOnBothForms(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("testdata", "v2-queue-runs-on.json"))
	require.NoError(t, err)
	f := newFakeAPI(t)
	c := newTestClient(t, f, false, true, nil)
	f.queue(capture{Method: "GET", Path: "/v2/queue/R", Status: 200, ResponseBody: body})

	jobs, err := c.V2QueueJobs(context.Background(), "R")
	require.NoError(t, err)
	require.Len(t, jobs, 3)
	const model = "PROJ/github/ovh/demo/vsphere-v2@refs/heads/main"
	assert.Equal(t, sdk.V2JobRunsOn{Model: model}, jobs[0].Job.RunsOn, "string form")
	assert.Equal(t, sdk.V2JobRunsOn{Model: model, Memory: "4096"}, jobs[1].Job.RunsOn, "object form with a memory")
	assert.Equal(t, sdk.V2JobRunsOn{Model: model, Flavor: "large"}, jobs[2].Job.RunsOn, "object form with a flavor")

	// Encoded back, each job's runs-on has the form the API sent.
	var raw []struct {
		Job struct {
			RunsOn json.RawMessage `json:"runs-on"`
		} `json:"job"`
	}
	require.NoError(t, json.Unmarshal(body, &raw))
	for i, j := range jobs {
		b, err := json.Marshal(j.Job.RunsOn)
		require.NoError(t, err)
		assert.JSONEq(t, string(raw[i].Job.RunsOn), string(b), "job %d", i)
	}
}
