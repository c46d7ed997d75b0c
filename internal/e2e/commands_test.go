//go:build !race

package e2e

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/guest"
)

// downloadURL is a worker download in a launched script.
var downloadURL = regexp.MustCompile(`https?://[^\s"]+/download/worker/[^\s"]+`)

// TestLaunchedScriptsDownloadTheWorker: with the configuration's default V2
// commands, a V2 job's launched script downloads the worker the API serves
// for the model's osarch into the working directory, then starts it and
// powers the VM off; the demo's V1 model, written with the API's default
// command ({{.API}}), renders to a download from the same API. The API
// serves both URLs.
func TestLaunchedScriptsDownloadTheWorker(t *testing.T) {
	r := newRig(t)
	r.start(nil)
	r.addJobs(3) // V2, V2, V1

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	scripts := map[bool]string{} // V1? -> launched script
	seen := 0
	for len(scripts) < 2 {
		calls, err := r.sims.Env.Guest.WaitForCalls(ctx, seen+1)
		require.NoError(t, err, "launches of a V1 and a V2 job")
		for _, c := range calls[seen:] {
			if c.Fault != nil || c.ProgramPath != guest.LaunchProgram {
				continue
			}
			_, wc, ok := launchJob(c)
			require.True(t, ok, "launch with a worker config")
			assert.Equal(t, r.sims.API.URL(), wc.APIEndpoint)
			scripts[wc.BookedJobID != 0] = strings.TrimPrefix(c.Arguments, "-n ;")
		}
		seen = len(calls)
	}

	api := r.sims.API.URL()
	v2 := scripts[false]
	assert.Contains(t, v2, `curl -fsSL --retry 10 --retry-max-time 120 -o ./worker "`+api+`/download/worker/linux/amd64"`)
	assert.Contains(t, v2, `wget -q -O ./worker "`+api+`/download/worker/linux/amd64"`)
	lines := strings.Split(v2, "\n")
	require.Len(t, lines, 3, v2)
	assert.Equal(t, []string{"./worker", "sudo shutdown -h now"}, lines[1:], "the downloaded worker starts, then the VM powers off")

	v1 := scripts[true]
	assert.Contains(t, v1, "curl "+api+"/download/worker/linux/$(uname -m) -o worker")

	for _, s := range []string{v2, strings.ReplaceAll(v1, "$(uname -m)", "x86_64")} {
		for _, u := range downloadURL.FindAllString(s, -1) {
			resp, err := http.Get(u)
			require.NoError(t, err)
			_ = resp.Body.Close()
			assert.Equal(t, http.StatusOK, resp.StatusCode, "GET %s", u)
		}
	}
}
