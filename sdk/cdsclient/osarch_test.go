package cdsclient_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient"
)

// The V2 queue listing asks for Config.OSArch (upstream's
// commonConfiguration.osArch), one osarch parameter each, as upstream's
// client does; without any, no parameter: the API then lists its default,
// linux/amd64.
func TestV2QueueJobsAsksForOSArch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		osarch []string
		query  string
	}{
		{nil, ""},
		{[]string{"linux/amd64", "windows/amd64"}, "osarch=linux%2Famd64&osarch=windows%2Famd64"},
	} {
		f := newFakeAPI(t)
		c, err := cdsclient.New(cdsclient.Config{
			APIURL: f.srv.URL, ServiceName: "hatch", PublicKey: testPEM, TokenV2: tokV2, OSArch: tc.osarch,
			RequestTimeout: 5 * time.Second, HTTPClient: f.srv.Client(), Logger: slog.New(slog.DiscardHandler),
		})
		require.NoError(t, err)
		require.NoError(t, c.SignIn(t.Context()))
		f.queue(loadCapture(t, "v2-queue-default.json"))
		_, err = c.V2QueueJobs(t.Context(), "default")
		require.NoError(t, err)
		r := f.last()
		assert.Equal(t, "/v2/queue/default", r.Path)
		assert.Equal(t, tc.query, r.Query, "osarch %v", tc.osarch)
	}
}
