package cdssim_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/cdssim"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

type capture struct {
	Method       string          `json:"method"`
	Path         string          `json:"path"`
	Query        string          `json:"query"`
	RequestBody  json.RawMessage `json:"request_body"`
	Status       int             `json:"status"`
	ResponseBody json.RawMessage `json:"response_body"`
}

const capturedName = "cds-hatchery-vsphere-frosty_and_cranky_lichterman"

func readCapture(t *testing.T, name string) capture {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "sdk", "cdsclient", "testdata", "captures", name))
	require.NoError(t, err)
	var c capture
	require.NoError(t, json.Unmarshal(b, &c))
	return c
}

func objKeys(raw json.RawMessage) []string {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// shape is what the replay compares: top-level keys of an object, or the
// length and first item's keys of a list, or "null".
func shape(raw json.RawMessage) any {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "null"
	case raw[0] == '[':
		var l []json.RawMessage
		_ = json.Unmarshal(raw, &l)
		if len(l) == 0 {
			return "list[0]"
		}
		return map[string]any{"len": len(l), "item": objKeys(l[0])}
	default:
		return objKeys(raw)
	}
}

// TestReplayCaptures sends every recorded hatchery request to the
// simulator, in a scripted order that rebuilds the recorded state, and
// checks the recorded status and response shape.
func TestReplayCaptures(t *testing.T) {
	// The captures were recorded from an API without a CDN service.
	sim := cdssim.Start(t, cdssim.Options{HatcheryName: capturedName, NoCDN: true})
	sessions := map[string]string{}

	send := func(t *testing.T, name string) {
		t.Helper()
		cp := readCapture(t, name)
		body := cp.RequestBody
		if strings.Contains(cp.Path, "signin") {
			var m map[string]any
			require.NoError(t, json.Unmarshal(body, &m))
			v1 := strings.HasPrefix(cp.Path, "/auth")
			tok := sim.TokenV2()
			if v1 {
				tok = sim.TokenV1()
			}
			switch {
			case strings.Contains(name, "bad-signature"):
				tok = tok[:len(tok)-3] + "xyz"
			case strings.Contains(name, "garbage"):
				tok = "not-a-jwt"
			case strings.Contains(name, "with-v2-token"):
				tok = sim.TokenV2()
			case strings.Contains(name, "with-v1-token"):
				tok = sim.TokenV1()
			}
			m["token"] = tok
			body, _ = json.Marshal(m)
		}
		u := sim.URL() + cp.Path
		if cp.Query != "" {
			u += "?" + cp.Query
		}
		var rd io.Reader
		if len(body) > 0 && string(body) != "null" {
			rd = bytes.NewReader(body)
		}
		req, err := http.NewRequestWithContext(t.Context(), cp.Method, u, rd)
		require.NoError(t, err)
		switch {
		case strings.Contains(name, "no-auth"), strings.Contains(cp.Path, "signin"):
		case strings.Contains(name, "bad-token"), strings.Contains(name, "bad-jwt"):
			req.Header.Set("Authorization", "Bearer eyJhbGciOiJSUzUxMiJ9.e30.bad")
		case strings.Contains(name, "v1-token-on-v2-route"):
			req.Header.Set("Authorization", "Bearer "+sessions["v1"])
		case strings.Contains(name, "v2-token-on-v1-route"), strings.HasPrefix(cp.Path, "/v2/"):
			req.Header.Set("Authorization", "Bearer "+sessions["v2"])
		default:
			req.Header.Set("Authorization", "Bearer "+sessions["v1"])
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		got, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Equal(t, cp.Status, resp.StatusCode, "%s: %s", name, got)
		assert.Equal(t, shape(cp.ResponseBody), shape(got), "%s: %s", name, got)
		if resp.StatusCode == 200 && strings.Contains(cp.Path, "signin") {
			var r struct {
				Token string `json:"token"`
			}
			require.NoError(t, json.Unmarshal(got, &r))
			key := "v2"
			if strings.HasPrefix(cp.Path, "/auth") {
				key = "v1"
				var want, have struct{ Service json.RawMessage }
				require.NoError(t, json.Unmarshal(cp.ResponseBody, &want))
				require.NoError(t, json.Unmarshal(got, &have))
				assert.Equal(t, objKeys(want.Service), objKeys(have.Service))
			}
			sessions[key] = r.Token
			assert.NotEmpty(t, resp.Header.Get("X-Api-Pub-Signing-Key"))
		}
	}

	steps := [][]string{
		{"v1-signin.json", "v2-signin.json", "v1-heartbeat.json", "v2-heartbeat.json", "v1-config-cdn.json", "v2-config-cdn.json",
			"v1-worker-model-enabled.json", "v1-queue-workflows.json", "v1-queue-workflows-noquery.json", "v1-worker-list.json",
			"v2-worker-list.json", "v2-queue-default.json"},
		nil, // state: job 1 and the model are added here
		{"v1-queue-workflows-with-job.json", "v1-queue-workflows-with-job-docker-filter.json", "v1-queue-job-infos.json",
			"v1-queue-job-book.json", "v1-queue-workflows-after-book.json", "err-v1-queue-job-book-again.json",
			"v1-queue-job-spawninfos.json", "v1-queue-job-infos-after-spawninfo.json", "v1-queue-job-release.json",
			"err-v1-queue-job-release-again.json", "v1-queue-workflows-after-release.json",
			"err-v1-queue-book-missing.json", "err-v1-queue-job-infos-missing.json", "err-v1-queue-release-missing.json",
			"err-v1-queue-spawninfos-missing.json",
			"v1-worker-model-enabled-with-model.json", "v1-worker-model-secret.json", "v1-worker-model-book.json",
			"v1-worker-model-spawn-error.json", "v1-worker-model-enabled-after-error.json",
			"err-v1-404-route.json", "err-v1-bad-jwt-signature.json", "err-v1-bad-token.json", "err-v1-no-auth.json",
			"err-v1-token-on-v2-route.json", "err-v2-token-on-v1-route.json", "err-v2-bad-token.json", "err-v2-no-auth.json",
			"err-v2-queue-job-missing.json", "err-v2-queue-take-missing.json", "err-v2-queue-wrong-region.json",
			"err-v1-signin-bad-signature.json", "err-v1-signin-garbage-token.json", "err-v1-signin-raw-pem-public-key.json",
			"err-v1-signin-with-v2-token.json", "err-v2-signin-bad-signature.json", "err-v2-signin-name-mismatch.json",
			"err-v2-signin-with-v1-token.json"},
		nil, // the old V2 session is kept before signing in again
		{"v2-signin-second.json", "v2-worker-list-new-session.json", "v2-queue-default-old-session-after-resignin.json"},
	}
	replayed := 0
	var oldV2 string
	for i, step := range steps {
		switch i {
		case 1:
			id := sim.AddJobV1(cdssim.JobV1{Requirements: sdk.RequirementList{{Type: sdk.ModelRequirement, Value: "shared.infra/vsphere-debian"}}, ProjectKey: "CAPT"})
			require.EqualValues(t, 1, id, "the captures use job 1")
			sim.AddModelV1(sdk.Model{Name: "vsphere-debian", Description: "capture test vsphere model", NeedRegistration: true,
				ModelVirtualMachine: sdk.ModelVirtualMachine{Image: "DC0_H0_VM0", Cmd: "./worker", PostCmd: "sudo shutdown -h now", User: "root", Password: "{{.secrets.vsphere_password}}"}},
				map[string]string{"secrets.vsphere_password": "root"})
		case 3:
			oldV2 = sessions["v2"]
		}
		for _, name := range step {
			if name == "v2-queue-default-old-session-after-resignin.json" {
				sessions["v2"] = oldV2
			}
			send(t, name)
			replayed++
		}
	}
	// Every capture but the two admin ones (an operator's calls, not a
	// hatchery's) is replayed.
	files, err := filepath.Glob(filepath.Join("..", "..", "sdk", "cdsclient", "testdata", "captures", "*.json"))
	require.NoError(t, err)
	assert.Equal(t, len(files)-2, replayed)
}
