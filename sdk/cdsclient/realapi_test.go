package cdsclient_test

// Answers of a real CDS API (CDS of 2026-07, with its CDN service) that the
// recorded captures (testdata/captures, an API without CDN) lack.

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

// TestConfigCDNWithACDNService decodes /config/cdn as a real CDS API with a
// CDN service answers it (V1 route for a V1 client, V2 route for a V2-only
// client): tcp_url is the CDN's TCP log address workers need.
func TestConfigCDNWithACDNService(t *testing.T) {
	body := []byte(`{"tcp_url":"127.0.0.1:25298","tcp_url_enable_tls":false,"http_url":"http://127.0.0.1:30866"}`)
	for _, tc := range []struct {
		name   string
		v1, v2 bool
		path   string
	}{{"v1", true, false, "/config/cdn"}, {"v2 only", false, true, "/v2/config/cdn"}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t)
			c := newTestClient(t, f, tc.v1, tc.v2, nil)
			f.queue(capture{Method: "GET", Path: tc.path, Status: 200, ResponseBody: body})
			cdn, err := c.ConfigCDN(context.Background())
			require.NoError(t, err)
			assert.Equal(t, sdk.CDNConfig{TCPURL: "127.0.0.1:25298", HTTPURL: "http://127.0.0.1:30866"}, cdn)
			assert.Equal(t, tc.path, f.last().Path)
		})
	}
}
