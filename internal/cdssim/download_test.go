package cdssim_test

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/cds-contrib/hatchery-vsphere/internal/cdssim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// GET /download/worker/{os}/{arch} answers as the real API did (seen on a
// real API holding the linux/amd64 worker): the worker without
// authentication, x86_64 read as amd64, 400 for an unknown name and 500
// for a known one it does not hold.
func TestDownloadWorker(t *testing.T) {
	t.Parallel()
	sim := cdssim.Start(t, cdssim.Options{})
	tests := []struct {
		path   string
		status int
		id     int
		from   string
	}{
		{"/download/worker/linux/amd64", 200, 0, ""},
		{"/download/worker/linux/x86_64", 200, 0, ""},
		{"/download/worker/linux/arm64", 500, 1, ""},
		{"/download/worker/freebsd/amd64", 500, 1, ""},
		{"/download/worker/linux/foo", 400, 74, `invalid given ARCH: "foo"`},
		{"/download/worker/plan9/amd64", 400, 74, `invalid given OS: "plan9"`},
		{"/download/hatchery/linux/amd64", 400, 74, `invalid given binary name: "hatchery"`},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			t.Parallel()
			resp, err := http.Get(sim.URL() + tt.path)
			require.NoError(t, err)
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, tt.status, resp.StatusCode)
			if tt.status == 200 {
				assert.Equal(t, "application/octet-stream", resp.Header.Get("Content-Type"))
				assert.Equal(t, cdssim.WorkerBinary, body)
				return
			}
			var e struct {
				ID        int    `json:"id"`
				Message   string `json:"message"`
				RequestID string `json:"request_id"`
				From      string `json:"from"`
			}
			require.NoError(t, json.Unmarshal(body, &e), string(body))
			assert.Equal(t, tt.id, e.ID)
			assert.Equal(t, tt.from, e.From)
			assert.NotEmpty(t, e.RequestID)
		})
	}
}

// TestDownloadWindowsWorker: windows/amd64 answers the stand-in only for
// a simulator holding the Windows build (Options.WindowsWorker).
func TestDownloadWindowsWorker(t *testing.T) {
	t.Parallel()
	for _, held := range []bool{false, true} {
		sim := cdssim.Start(t, cdssim.Options{WindowsWorker: held})
		resp, err := http.Get(sim.URL() + "/download/worker/windows/amd64")
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if held {
			assert.Equal(t, 200, resp.StatusCode)
			assert.Equal(t, `attachment;filename="cds-worker-windows-amd64"`, resp.Header.Get("Content-Disposition"))
		} else {
			assert.Equal(t, 500, resp.StatusCode)
		}
	}
}
