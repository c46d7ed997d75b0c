package cdsclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient"
)

// capture is one recorded exchange of testdata/captures (real CDS API
// exchanges).
type capture struct {
	Method       string          `json:"method"`
	Path         string          `json:"path"`
	Query        string          `json:"query"`
	RequestBody  json.RawMessage `json:"request_body"`
	Status       int             `json:"status"`
	ResponseBody json.RawMessage `json:"response_body"`
}

func loadCapture(t *testing.T, name string) capture {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "captures", name))
	require.NoError(t, err)
	var c capture
	require.NoError(t, json.Unmarshal(b, &c))
	return c
}

const (
	tokV1     = "v1-signin-token-SECRET-aaaa"
	tokV2     = "v2-signin-token-SECRET-bbbb"
	sessV1    = "eyJ.session-v1-JWT-SECRET"
	sessV2    = "eyJ.session-v2-JWT-SECRET"
	sessV1New = "eyJ.session-v1-JWT-SECRET-renewed"
)

type recorded struct {
	Method, Path, RawPath, Query, Auth, ContentType string
	Body                                            []byte
}

// fakeAPI answers sign-ins with the recorded sign-in answers (session
// tokens replaced) and any other call with the capture queued in next.
type fakeAPI struct {
	t   *testing.T
	srv *httptest.Server

	mu      sync.Mutex
	next    []capture
	reqs    []recorded
	signins map[string]int
}

func newFakeAPI(t *testing.T) *fakeAPI {
	f := &fakeAPI{t: t, signins: map[string]int{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, recorded{r.Method, r.URL.Path, r.URL.RawPath, r.URL.RawQuery, r.Header.Get("Authorization"), r.Header.Get("Content-Type"), body})
	var c capture
	switch r.URL.Path {
	case "/auth/consumer/builtin/signin":
		f.signins["v1"]++
		c = loadCapture(f.t, "v1-signin.json")
		tok := sessV1
		if f.signins["v1"] > 1 {
			tok = sessV1New
		}
		c.ResponseBody = bytes.Replace(c.ResponseBody, []byte(`"<JWT>"`), []byte(`"`+tok+`"`), 1)
	case "/v2/auth/consumer/hatchery/signin":
		f.signins["v2"]++
		c = loadCapture(f.t, "v2-signin.json")
		c.ResponseBody = bytes.Replace(c.ResponseBody, []byte(`"<JWT>"`), []byte(`"`+sessV2+`"`), 1)
	default:
		if len(f.next) == 0 {
			f.mu.Unlock()
			http.Error(w, "no capture queued", 599)
			return
		}
		c = f.next[0]
		f.next = f.next[1:]
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(c.Status)
	if c.Status != http.StatusNoContent {
		_, _ = w.Write(c.ResponseBody)
	}
}

func (f *fakeAPI) queue(cs ...capture) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next = append(f.next, cs...)
}

func (f *fakeAPI) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

func (f *fakeAPI) last() recorded {
	r := f.requests()
	return r[len(r)-1]
}

var testPEM = []byte("-----BEGIN RSA PUBLIC KEY-----\nMIIBCgKCAQEAtest\n-----END RSA PUBLIC KEY-----\n")

func newTestClient(t *testing.T, f *fakeAPI, v1, v2 bool, logs io.Writer) *cdsclient.Client {
	t.Helper()
	cfg := cdsclient.Config{
		APIURL: f.srv.URL, ServiceName: "hatch", HTTPURL: "http://127.0.0.1:8086", PublicKey: testPEM,
		Region: "eu", Version: "1.2.3", RequestTimeout: 5 * time.Second, ServiceConfig: map[string]any{"k": "v"},
		HTTPClient: f.srv.Client(),
	}
	if v1 {
		cfg.Token = tokV1
	}
	if v2 {
		cfg.TokenV2 = tokV2
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	if logs != nil {
		cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	c, err := cdsclient.New(cfg)
	require.NoError(t, err)
	require.NoError(t, c.SignIn(t.Context()))
	return c
}

func keys(t *testing.T, raw []byte) []string {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &m), string(raw))
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestSignInRequests(t *testing.T) {
	f := newFakeAPI(t)
	c := newTestClient(t, f, true, true, nil)
	reqs := f.requests()
	require.Len(t, reqs, 2)

	v1 := reqs[0]
	assert.Equal(t, "POST", v1.Method)
	assert.Equal(t, "/auth/consumer/builtin/signin", v1.Path)
	assert.Empty(t, v1.Auth)
	assert.Equal(t, "application/json", v1.ContentType)
	var b1 struct {
		Token   string                     `json:"token"`
		Service map[string]json.RawMessage `json:"service"`
	}
	require.NoError(t, json.Unmarshal(v1.Body, &b1))
	assert.Equal(t, tokV1, b1.Token)
	assert.Equal(t, `"hatchery"`, string(b1.Service["type"]))
	assert.Equal(t, `"eu"`, string(b1.Service["region"]))
	for _, k := range []string{"name", "type", "http_url", "config", "public_key"} {
		assert.Contains(t, b1.Service, k)
	}
	var pk []byte // base64 of the PEM bytes, not raw PEM
	require.NoError(t, json.Unmarshal(b1.Service["public_key"], &pk))
	assert.Equal(t, testPEM, pk)
	assert.NotContains(t, string(b1.Service["public_key"]), "BEGIN")

	v2 := reqs[1]
	assert.Equal(t, "/v2/auth/consumer/hatchery/signin", v2.Path)
	assert.Equal(t, []string{"config", "http_url", "name", "public_key", "token", "type", "version"}, keys(t, v2.Body))
	var b2 sdk.V2HatcherySigninRequest
	require.NoError(t, json.Unmarshal(v2.Body, &b2))
	assert.Equal(t, tokV2, b2.Token)
	assert.Equal(t, "vsphere", b2.Type)
	assert.Equal(t, "1.2.3", b2.Version)
	assert.Equal(t, testPEM, b2.PublicKey)

	assert.Equal(t, "http://localhost:8081", c.APIURL())
	require.NotNil(t, c.Service())
	assert.EqualValues(t, 6, c.Service().ID)
	h, region := c.V2Hatchery()
	require.NotNil(t, h)
	assert.Equal(t, "8646f789-611a-49a7-97e2-0e34cd014f69", h.ID)
	assert.Equal(t, "default", region)
	assert.Equal(t, region, c.V2Region(), "the V2 queue routes take the sign-in region")
}

func TestSignInSkipsMissingToken(t *testing.T) {
	for _, tc := range []struct {
		name   string
		v1, v2 bool
		paths  []string
	}{
		{"v1 only", true, false, []string{"/auth/consumer/builtin/signin"}},
		{"v2 only", false, true, []string{"/v2/auth/consumer/hatchery/signin"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t)
			newTestClient(t, f, tc.v1, tc.v2, nil)
			var got []string
			for _, r := range f.requests() {
				got = append(got, r.Path)
			}
			assert.Equal(t, tc.paths, got)
		})
	}
	_, err := cdsclient.New(cdsclient.Config{APIURL: "http://127.0.0.1:1"})
	assert.Error(t, err, "no token at all")
}

// TestEveryCall checks method, path, query, session header and body keys of
// every client call, and that each decodes its recorded answer.
func TestEveryCall(t *testing.T) {
	ctx := context.Background()
	type tc struct {
		name     string
		capture  string // answer served
		call     func(c *cdsclient.Client) error
		method   string
		path     string
		rawPath  string
		query    string
		auth     string
		bodyKeys []string // nil: no body
		check    func(t *testing.T, body []byte)
		only     string // "v1" or "v2": a client with that token only
	}
	cases := []tc{
		{name: "heartbeat v1", only: "v1", capture: "v1-heartbeat.json", method: "POST", path: "/services/heartbeat", auth: sessV1, bodyKeys: []string{"lines", "now"},
			call: func(c *cdsclient.Client) error {
				return c.Heartbeat(ctx, sdk.MonitoringStatus{Lines: []sdk.MonitoringStatusLine{{Component: "Version", Value: "1", Status: "OK"}}})
			}},
		{name: "config cdn", capture: "v1-config-cdn.json", method: "GET", path: "/config/cdn", auth: sessV1,
			call: func(c *cdsclient.Client) error {
				_, err := c.ConfigCDN(ctx)
				if assert.ErrorIs(t, err, cdsclient.ErrNotFound) {
					return nil
				}
				return err
			}},
		{name: "queue", capture: "v1-queue-workflows-with-job.json", method: "GET", path: "/queue/workflows", query: "modelType=vsphere&region=eu&region=", auth: sessV1,
			call: func(c *cdsclient.Client) error {
				// A region and the jobs without one: both values, in order.
				jobs, err := c.QueueWorkflowNodeJobRun(ctx, []string{"eu", ""})
				if err == nil {
					require.Len(t, jobs, 1)
					assert.Equal(t, "shared.infra/vsphere-debian", jobs[0].Job.Action.Requirements.First(sdk.ModelRequirement))
				}
				return err
			}},
		{name: "job infos", capture: "v1-queue-job-infos-after-spawninfo.json", method: "GET", path: "/queue/workflows/1/infos", auth: sessV1,
			call: func(c *cdsclient.Client) error {
				j, err := c.QueueJobInfo(ctx, 1)
				if err == nil {
					assert.Equal(t, "cds-hatchery-vsphere-frosty_and_cranky_lichterman", j.BookedBy.Name)
					assert.Equal(t, "CAPT", j.Header["X-Project-Key"])
				}
				return err
			}},
		{name: "book", capture: "v1-queue-job-book.json", method: "POST", path: "/queue/workflows/1/book", auth: sessV1, bodyKeys: []string{"delay"},
			call: func(c *cdsclient.Client) error {
				b, err := c.QueueJobBook(ctx, 1)
				if err == nil {
					assert.Equal(t, sdk.BookedJob{ProjectKey: "CAPT", WorkflowName: "wf", WorkflowID: 1, RunID: 1, NodeRunName: "build", NodeRunID: 1, JobName: "build"}, b)
				}
				return err
			}},
		{name: "release", capture: "v1-queue-job-release.json", method: "DELETE", path: "/queue/workflows/1/book", auth: sessV1,
			call: func(c *cdsclient.Client) error { return c.QueueJobRelease(ctx, 1) }},
		{name: "spawn infos", capture: "v1-queue-job-spawninfos.json", method: "POST", path: "/queue/workflows/1/spawn/infos", auth: sessV1,
			call: func(c *cdsclient.Client) error {
				return c.QueueJobSendSpawnInfo(ctx, 1, []sdk.SpawnInfo{{Message: sdk.SpawnInfoMessage{ID: "MsgSpawnInfoHatcheryStarts", Args: []string{"a"}}}})
			},
			check: func(t *testing.T, body []byte) {
				var l []map[string]json.RawMessage
				require.NoError(t, json.Unmarshal(body, &l))
				require.Len(t, l, 1)
				assert.Contains(t, l[0], "remote_time")
				assert.Equal(t, []string{"args", "id"}, keys(t, l[0]["message"]))
			}},
		{name: "fail", capture: "v1-queue-job-spawninfos.json", method: "POST", path: "/queue/workflows/1/result", auth: sessV1,
			// The API reads buildID and remoteTime in camel case (409
			// "Resource locked" with other keys).
			bodyKeys: []string{"buildID", "duration", "id", "reason", "remoteTime", "status"},
			call:     func(c *cdsclient.Client) error { return c.QueueJobFail(ctx, 1, "gave up") },
			check: func(t *testing.T, body []byte) {
				var r map[string]any
				require.NoError(t, json.Unmarshal(body, &r))
				assert.Equal(t, "Fail", r["status"])
				assert.Equal(t, "gave up", r["reason"])
				assert.EqualValues(t, 1, r["buildID"])
				assert.NotEmpty(t, r["remoteTime"])
			}},
		{name: "workers v1", capture: "v1-worker-list.json", method: "GET", path: "/worker", auth: sessV1,
			call: func(c *cdsclient.Client) error { _, err := c.WorkerList(ctx); return err }},
		{name: "worker disable", capture: "v1-queue-job-release.json", method: "POST", path: "/worker/w-1/disable", auth: sessV1,
			call: func(c *cdsclient.Client) error { return c.WorkerDisable(ctx, "w-1") }},
		{name: "models enabled", capture: "v1-worker-model-enabled-after-error.json", method: "GET", path: "/worker/model/enabled", auth: sessV1,
			call: func(c *cdsclient.Client) error {
				ms, err := c.WorkerModelsEnabled(ctx)
				if err == nil {
					require.Len(t, ms, 1)
					assert.Equal(t, "shared.infra/vsphere-debian", ms[0].Path())
					assert.Equal(t, "{{.secrets.vsphere_password}}", ms[0].ModelVirtualMachine.Password)
					require.NotNil(t, ms[0].LastSpawnErrLogs)
					assert.Equal(t, "logs", *ms[0].LastSpawnErrLogs)
				}
				return err
			}},
		{name: "model secrets", capture: "v1-worker-model-secret.json", method: "GET", path: "/worker/model/shared.infra/vsphere-debian/secret", auth: sessV1,
			call: func(c *cdsclient.Client) error {
				s, err := c.WorkerModelSecretList(ctx, "shared.infra", "vsphere-debian")
				if err == nil {
					require.Len(t, s, 1)
					assert.Equal(t, "secrets.vsphere_password", s[0].Name)
				}
				return err
			}},
		{name: "model book", capture: "v1-worker-model-book.json", method: "PUT", path: "/worker/model/shared.infra/vsphere-debian/book", auth: sessV1,
			call: func(c *cdsclient.Client) error { return c.WorkerModelBook(ctx, "shared.infra", "vsphere-debian") }},
		{name: "model spawn error", capture: "v1-worker-model-spawn-error.json", method: "PUT", path: "/worker/model/shared.infra/vsphere-debian/error", auth: sessV1,
			bodyKeys: []string{"error", "logs"},
			call: func(c *cdsclient.Client) error {
				return c.WorkerModelSpawnError(ctx, "shared.infra", "vsphere-debian", sdk.SpawnErrorForm{Error: "capture test spawn error", Logs: []byte("logs")})
			},
			check: func(t *testing.T, body []byte) {
				assert.JSONEq(t, string(loadCapture(t, "v1-worker-model-spawn-error.json").RequestBody), string(body))
			}},
		{name: "heartbeat v2", only: "v2", capture: "v2-heartbeat.json", method: "POST", path: "/v2/hatchery/heartbeat", auth: sessV2, bodyKeys: []string{"lines", "now"},
			call: func(c *cdsclient.Client) error { return c.Heartbeat(ctx, sdk.MonitoringStatus{}) }},
		{name: "queue v2", capture: "v2-queue-default.json", method: "GET", path: "/v2/queue/default", auth: sessV2,
			call: func(c *cdsclient.Client) error { _, err := c.V2QueueJobs(ctx, "default"); return err }},
		{name: "job v2", capture: "v1-queue-job-book.json", method: "GET", path: "/v2/queue/default/job/abc", auth: sessV2,
			call: func(c *cdsclient.Client) error { _, err := c.V2QueueJobInfo(ctx, "default", "abc"); return err }},
		{name: "take v2", capture: "v1-queue-job-book.json", method: "POST", path: "/v2/queue/default/job/abc/hatchery/take", auth: sessV2,
			call: func(c *cdsclient.Client) error { return c.V2QueueJobTake(ctx, "default", "abc") }},
		{name: "release v2", capture: "v1-queue-job-release.json", method: "DELETE", path: "/v2/queue/default/job/abc/hatchery/take", auth: sessV2,
			call: func(c *cdsclient.Client) error { return c.V2QueueJobRelease(ctx, "default", "abc") }},
		{name: "info v2", capture: "v1-queue-job-spawninfos.json", method: "POST", path: "/v2/queue/default/job/abc/info", auth: sessV2,
			bodyKeys: []string{"level", "message", "time"},
			call: func(c *cdsclient.Client) error {
				return c.V2QueueJobSendInfo(ctx, "default", "abc", sdk.V2SendJobRunInfo{Level: sdk.JobRunInfoLevelWarning, Message: "m"})
			}},
		{name: "workers v2 null", capture: "v2-worker-list.json", method: "GET", path: "/v2/worker", auth: sessV2,
			call: func(c *cdsclient.Client) error {
				ws, err := c.V2WorkerList(ctx)
				assert.Empty(t, ws)
				return err
			}},
		{name: "model v2", capture: "v1-queue-job-book.json", method: "GET", path: "/v2/project/PROJ/vcs/github/repository/org/repo/workermodel/debian",
			rawPath: "/v2/project/PROJ/vcs/github/repository/org%2Frepo/workermodel/debian", query: "branch=main", auth: sessV2,
			call: func(c *cdsclient.Client) error {
				_, err := c.V2WorkerModelGet(ctx, "PROJ", "github", "org/repo", "debian", "main")
				return err
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t)
			c := newTestClient(t, f, tc.only != "v2", tc.only != "v1", nil)
			cp := loadCapture(t, tc.capture)
			f.queue(cp)
			require.NoError(t, tc.call(c))
			r := f.last()
			assert.Equal(t, tc.method, r.Method)
			assert.Equal(t, tc.path, r.Path)
			assert.Equal(t, tc.rawPath, r.RawPath)
			assert.Equal(t, tc.query, r.Query)
			assert.Equal(t, "Bearer "+tc.auth, r.Auth)
			if tc.bodyKeys == nil && tc.check == nil {
				assert.Empty(t, r.Body)
			}
			if tc.bodyKeys != nil {
				assert.Equal(t, "application/json", r.ContentType)
				assert.Equal(t, tc.bodyKeys, keys(t, r.Body))
			}
			if tc.check != nil {
				tc.check(t, r.Body)
			}
		})
	}
}

// TestDecodeEveryCapture decodes every recorded answer into the type the
// client decodes it into, and every error answer into the typed error.
func TestDecodeEveryCapture(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "captures", "*.json"))
	require.NoError(t, err)
	require.Len(t, files, 55)
	targets := map[string]func() any{
		"POST /auth/consumer/builtin/signin":                   func() any { return &sdk.AuthConsumerSigninResponse{} },
		"POST /v2/auth/consumer/hatchery/signin":               func() any { return &sdk.V2HatcherySigninResponse{} },
		"GET /queue/workflows":                                 func() any { return &[]sdk.WorkflowNodeJobRun{} },
		"GET /queue/workflows/1/infos":                         func() any { return &sdk.WorkflowNodeJobRun{} },
		"POST /queue/workflows/1/book":                         func() any { return &sdk.BookedJob{} },
		"GET /worker":                                          func() any { return &[]sdk.Worker{} },
		"GET /v2/worker":                                       func() any { return &[]sdk.V2Worker{} },
		"GET /worker/model/enabled":                            func() any { return &[]sdk.Model{} },
		"POST /worker/model":                                   func() any { return &sdk.Model{} },
		"GET /worker/model/shared.infra/vsphere-debian/secret": func() any { return &[]sdk.WorkerModelSecret{} },
		"GET /v2/queue/default":                                func() any { return &[]sdk.V2WorkflowRunJob{} },
		"GET /group":                                           func() any { return &[]sdk.Group{} },
	}
	for _, file := range files {
		name := filepath.Base(file)
		if name == "INDEX.tsv" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			cp := loadCapture(t, name)
			if cp.Status >= 300 {
				var e sdk.APIError
				require.NoError(t, json.Unmarshal(cp.ResponseBody, &e))
				assert.NotZero(t, e.ID)
				assert.NotEmpty(t, e.Message)
				return
			}
			if cp.Status == http.StatusNoContent || string(cp.ResponseBody) == "null" {
				return // nothing to decode; the client accepts empty and null bodies (TestEveryCall)
			}
			mk, ok := targets[cp.Method+" "+cp.Path]
			require.True(t, ok, "no decode target for %s %s", cp.Method, cp.Path)
			dec := json.NewDecoder(bytes.NewReader(cp.ResponseBody))
			require.NoError(t, dec.Decode(mk()))
		})
	}
}

// TestErrorAnswers maps every recorded error answer to its typed error.
func TestErrorAnswers(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		capture string
		call    func(c *cdsclient.Client) error
		is      []error
		status  int
		id      int
	}{
		{"err-v1-queue-job-book-again.json", func(c *cdsclient.Client) error { _, err := c.QueueJobBook(ctx, 1); return err }, []error{cdsclient.ErrAlreadyBooked, cdsclient.ErrForbidden}, 403, 89},
		{"err-v1-queue-book-missing.json", func(c *cdsclient.Client) error { _, err := c.QueueJobBook(ctx, 999999); return err }, []error{cdsclient.ErrForbidden}, 403, 11},
		{"err-v1-queue-job-infos-missing.json", func(c *cdsclient.Client) error { _, err := c.QueueJobInfo(ctx, 999999); return err }, []error{cdsclient.ErrForbidden}, 403, 11},
		{"err-v1-queue-job-release-again.json", func(c *cdsclient.Client) error { return c.QueueJobRelease(ctx, 1) }, []error{cdsclient.ErrAlreadyReleased}, 400, 135},
		{"err-v1-queue-release-missing.json", func(c *cdsclient.Client) error { return c.QueueJobRelease(ctx, 999999) }, []error{cdsclient.ErrForbidden}, 403, 11},
		{"err-v1-queue-spawninfos-missing.json", func(c *cdsclient.Client) error { return c.QueueJobSendSpawnInfo(ctx, 999999, nil) }, []error{cdsclient.ErrForbidden}, 403, 11},
		{"err-v2-queue-job-missing.json", func(c *cdsclient.Client) error { _, err := c.V2QueueJobInfo(ctx, "default", "x"); return err }, []error{cdsclient.ErrNotFound}, 404, 38},
		{"err-v2-queue-take-missing.json", func(c *cdsclient.Client) error { return c.V2QueueJobTake(ctx, "default", "x") }, []error{cdsclient.ErrNotFound}, 404, 38},
		{"err-v2-queue-wrong-region.json", func(c *cdsclient.Client) error { _, err := c.V2QueueJobs(ctx, "nope"); return err }, []error{cdsclient.ErrNotFound}, 404, 38},
		{"v2-config-cdn.json", func(c *cdsclient.Client) error { _, err := c.ConfigCDN(ctx); return err }, []error{cdsclient.ErrNotFound}, 404, 38},
		{"err-v1-token-on-v2-route.json", func(c *cdsclient.Client) error { _, err := c.V2QueueJobs(ctx, "default"); return err }, []error{cdsclient.ErrForbidden}, 403, 11},
		{"err-v1-404-route.json", func(c *cdsclient.Client) error { _, err := c.WorkerList(ctx); return err }, []error{cdsclient.ErrNotFound}, 404, 38},
	}
	for _, tc := range cases {
		t.Run(tc.capture, func(t *testing.T) {
			f := newFakeAPI(t)
			c := newTestClient(t, f, true, true, nil)
			cp := loadCapture(t, tc.capture)
			f.queue(cp)
			err := tc.call(c)
			require.Error(t, err)
			for _, target := range tc.is {
				assert.ErrorIs(t, err, target)
			}
			var ae *cdsclient.APIError
			require.ErrorAs(t, err, &ae)
			assert.Equal(t, tc.status, ae.Status)
			assert.Equal(t, tc.id, ae.ID)
			var want sdk.APIError
			require.NoError(t, json.Unmarshal(cp.ResponseBody, &want))
			assert.Equal(t, want.Message, ae.Message)
			assert.Contains(t, err.Error(), want.Message)
			assert.NotErrorIs(t, err, cdsclient.ErrNotAuthenticated)
			if !slices.Contains(tc.is, cdsclient.ErrAlreadyReleased) {
				assert.NotErrorIs(t, err, cdsclient.ErrAlreadyReleased)
			}
		})
	}
}

// TestAlreadyReleasedByErrorID: a release answered 400 id 135 is
// ErrAlreadyReleased whatever its message says; another 400 carrying the
// same message is not (the id classifies, never the text).
func TestAlreadyReleasedByErrorID(t *testing.T) {
	t.Parallel()
	assert.ErrorIs(t, &cdsclient.APIError{Status: 400, ID: 135, Message: "Travail déjà libéré"}, cdsclient.ErrAlreadyReleased)
	assert.NotErrorIs(t, &cdsclient.APIError{Status: 400, ID: 74, Message: "Job already released"}, cdsclient.ErrAlreadyReleased)
	assert.NotErrorIs(t, &cdsclient.APIError{Status: 403, ID: 89, Message: "Job already booked"}, cdsclient.ErrAlreadyReleased)
}

// TestReSignInOn401: a 401 id 10 signs in again once and retries once with
// the new session; a second 401 is returned.
func TestReSignInOn401(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"err-v1-bad-token.json", "err-v1-bad-jwt-signature.json", "err-v1-no-auth.json"} {
		t.Run(name, func(t *testing.T) {
			f := newFakeAPI(t)
			c := newTestClient(t, f, true, false, nil)
			f.queue(loadCapture(t, name), loadCapture(t, "v1-worker-model-enabled-with-model.json"))
			ms, err := c.WorkerModelsEnabled(ctx)
			require.NoError(t, err)
			assert.Len(t, ms, 1)
			reqs := f.requests()
			require.Len(t, reqs, 4) // sign-in, 401, sign-in, retry
			assert.Equal(t, "/auth/consumer/builtin/signin", reqs[2].Path)
			assert.Equal(t, "Bearer "+sessV1, reqs[1].Auth)
			assert.Equal(t, "Bearer "+sessV1New, reqs[3].Auth)
		})
	}
	t.Run("twice", func(t *testing.T) {
		f := newFakeAPI(t)
		c := newTestClient(t, f, true, false, nil)
		f.queue(loadCapture(t, "err-v1-bad-token.json"), loadCapture(t, "err-v1-bad-token.json"))
		_, err := c.WorkerModelsEnabled(ctx)
		assert.ErrorIs(t, err, cdsclient.ErrNotAuthenticated)
		assert.Len(t, f.requests(), 4)
	})
	t.Run("v2", func(t *testing.T) {
		f := newFakeAPI(t)
		c := newTestClient(t, f, false, true, nil)
		f.queue(loadCapture(t, "err-v2-no-auth.json"), loadCapture(t, "v2-heartbeat.json"))
		require.NoError(t, c.Heartbeat(ctx, sdk.MonitoringStatus{}))
		reqs := f.requests()
		require.Len(t, reqs, 4)
		assert.Equal(t, "/v2/auth/consumer/hatchery/signin", reqs[2].Path)
	})
}

func TestSignInErrors(t *testing.T) {
	for _, name := range []string{"err-v1-signin-bad-signature.json", "err-v1-signin-garbage-token.json", "err-v1-signin-raw-pem-public-key.json", "err-v1-signin-with-v2-token.json", "err-v2-signin-bad-signature.json", "err-v2-signin-name-mismatch.json", "err-v2-signin-with-v1-token.json"} {
		t.Run(name, func(t *testing.T) {
			cp := loadCapture(t, name)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(cp.Status)
				_, _ = w.Write(cp.ResponseBody)
			}))
			t.Cleanup(srv.Close)
			cfg := cdsclient.Config{APIURL: srv.URL, ServiceName: "h", HTTPClient: srv.Client()}
			if strings.HasPrefix(name, "err-v1") {
				cfg.Token = tokV1
			} else {
				cfg.TokenV2 = tokV2
			}
			c, err := cdsclient.New(cfg)
			require.NoError(t, err)
			err = c.SignIn(t.Context())
			var ae *cdsclient.APIError
			require.ErrorAs(t, err, &ae)
			assert.Equal(t, cp.Status, ae.Status)
			assert.Contains(t, err.Error(), "sign in")
		})
	}
}

// TestNoSecretInLogsOrErrors runs calls that fail and succeed with debug
// logging and checks that neither tokens nor session JWTs show.
func TestNoSecretInLogsOrErrors(t *testing.T) {
	ctx := context.Background()
	var logs bytes.Buffer
	var mu sync.Mutex
	f := newFakeAPI(t)
	c := newTestClient(t, f, true, true, lockedWriter{&mu, &logs})
	var errs []string
	f.queue(loadCapture(t, "err-v1-bad-token.json"), loadCapture(t, "err-v1-bad-token.json"))
	_, err := c.WorkerModelsEnabled(ctx)
	errs = append(errs, err.Error())
	f.queue(loadCapture(t, "err-v1-queue-job-book-again.json"))
	_, err = c.QueueJobBook(ctx, 1)
	errs = append(errs, err.Error())
	f.queue(loadCapture(t, "v1-worker-model-secret.json"))
	_, err = c.WorkerModelSecretList(ctx, "shared.infra", "vsphere-debian")
	require.NoError(t, err)
	f.srv.Close()
	_, err = c.WorkerList(ctx)
	errs = append(errs, err.Error())
	mu.Lock()
	out := logs.String() + strings.Join(errs, "\n")
	mu.Unlock()
	assert.NotEmpty(t, logs.String())
	for _, secret := range []string{tokV1, tokV2, sessV1, sessV2, sessV1New, "SECRET", `"root"`} {
		assert.NotContains(t, out, secret)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestRequestTimeout(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "signin") {
			_, _ = w.Write(loadCapture(t, "v1-signin.json").ResponseBody)
			return
		}
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(block) })
	c, err := cdsclient.New(cdsclient.Config{APIURL: srv.URL, Token: tokV1, RequestTimeout: 50 * time.Millisecond, HTTPClient: srv.Client()})
	require.NoError(t, err)
	require.NoError(t, c.SignIn(t.Context()))
	_, err = c.WorkerList(t.Context())
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestInsecureTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(loadCapture(t, "v1-signin.json").ResponseBody)
	}))
	t.Cleanup(srv.Close)
	for _, insecure := range []bool{false, true} {
		c, err := cdsclient.New(cdsclient.Config{APIURL: srv.URL, Token: tokV1, Insecure: insecure})
		require.NoError(t, err)
		err = c.SignIn(t.Context())
		if insecure {
			assert.NoError(t, err)
		} else {
			assert.Error(t, err, "self-signed certificate refused without insecure")
		}
	}
}
