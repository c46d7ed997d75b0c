package demo

import (
	"context"
	"testing"

	"github.com/cds-contrib/hatchery-vsphere/internal/cdssim"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The demo's guests download the worker as the script says: the demo's V1
// command and the default V2 pre-command fetch it from the API; a URL the
// API does not serve fails the launch; a script without a download is
// told apart.
func TestFetchWorker(t *testing.T) {
	t.Parallel()
	sim := cdssim.Start(t, cdssim.Options{})
	data := spawn.NewModelTemplateData(spawn.WorkerConfig{APIEndpoint: sim.URL()},
		sdk.WorkerStarterWorkerModel{ModelV2: &sdk.V2WorkerModel{OSArch: "linux/amd64"}}, 60)
	v2, err := spawn.RenderModelCommand(hatchery.DefaultV2PreCmd, data)
	require.NoError(t, err)
	v1, err := spawn.RenderModelCommand(v1ModelCmd, data)
	require.NoError(t, err)

	urls, err := fetchWorker(context.Background(), v2)
	require.NoError(t, err)
	assert.Equal(t, []string{sim.URL() + "/download/worker/linux/amd64"}, urls, "curl and its wget fallback: one download")

	urls, err = fetchWorker(context.Background(), v1)
	require.NoError(t, err)
	assert.Equal(t, []string{sim.URL() + "/download/worker/linux/x86_64"}, urls)

	_, err = fetchWorker(context.Background(), "curl -o worker "+sim.URL()+"/download/worker/linux/arm64 && ./worker")
	assert.ErrorContains(t, err, "status 500")

	_, err = fetchWorker(context.Background(), "exec /usr/local/bin/worker")
	assert.ErrorIs(t, err, errNoDownload)
}
