//go:build !race

// The end-to-end test is built without the race detector, like
// internal/e2e: it installs vCenter fault-injection rules while the demo
// clones and powers on, and the pinned govmomi simulator races inside its
// own fault injector then (internal/vsphere/faults_vcsim_test.go says
// more). .ci/test runs this package a second time without -race.

package promtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/demo"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// Timings of the end-to-end test: Prometheus scrapes and evaluates every
// second (the daemon of the demo collects its gauges every 2 s), so that a
// rate over 30 s has data within seconds.
const (
	promInterval = "1s"
	// rateWindow replaces the dashboard's $__rate_interval.
	rateWindow = "30s"
	// promStartTimeout bounds Prometheus's start (TSDB creation, rules).
	promStartTimeout = 30 * time.Second
	// dataTimeout bounds the wait for every expression to have data: the
	// first spawns of the demo succeed within ~10 s.
	dataTimeout = 40 * time.Second
	// alertTimeout bounds the wait for the failure-ratio alert once spawns
	// fail.
	alertTimeout = 40 * time.Second
	// apiTimeout bounds one request to Prometheus's HTTP API on loopback.
	apiTimeout = 5 * time.Second
)

// TestPrometheusScrapesDemo runs a real Prometheus on loopback against the
// in-process demo with the shipped rules, checks that every expression of
// the Grafana dashboard and of docs/metrics.md returns data, then makes
// every clone and power-on of the demo's vCenter fail and waits for the
// HatcheryVSphereSpawnFailureRatioHigh alert to fire.
//
// The rules are loaded with every "for:" shortened to 1s (the expressions
// unchanged): a test cannot wait ten minutes for an alert's pending period.
func TestPrometheusScrapesDemo(t *testing.T) {
	promBin := tool(t, "prometheus")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The demo, jobs forever, until the test ends.
	ready := make(chan demo.Info, 1)
	demoErr := make(chan error, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, err := demo.Run(ctx, demo.Options{OnReady: func(i demo.Info) { ready <- i }})
		demoErr <- err
	}()
	var info demo.Info
	select {
	case info = <-ready:
	case err := <-demoErr:
		t.Fatalf("demo stopped at start: %v", err)
	case <-time.After(promStartTimeout):
		t.Fatal("demo not ready")
	}
	mon, err := url.Parse(info.MonURL)
	require.NoError(t, err)

	prom := startPrometheus(ctx, t, promBin, mon.Host)

	// Every expression of the dashboard and of docs/metrics.md answers.
	exprs := dashboardExprs(t)
	exprs = append(exprs, docExprs(t)...)
	require.Greater(t, len(exprs), 30)
	pending := map[string]bool{}
	for _, e := range exprs {
		pending[e] = true
	}
	start := time.Now()
	deadline := start.Add(dataTimeout)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for len(pending) > 0 && time.Now().Before(deadline) {
		for e := range pending {
			n, err := prom.query(ctx, e)
			var bad *badQueryError
			require.False(t, errors.As(err, &bad), "%v", err)
			if err == nil && n > 0 {
				delete(pending, e)
			}
		}
		select {
		case <-tick.C:
		case err := <-demoErr:
			t.Fatalf("demo stopped: %v", err)
		}
	}
	for e := range pending {
		t.Errorf("no data from Prometheus for %s", e)
	}
	require.Empty(t, pending)
	t.Logf("%d expressions answered after %s", len(exprs), time.Since(start).Round(time.Second))

	// No alert fires in a healthy run of the demo, the failure ratio among
	// them. (HatcheryVSphereCapacityExhausted may: the demo's trickle of
	// jobs does hit maxWorker.)
	firing, err := prom.firing(ctx)
	require.NoError(t, err)
	assert.NotContains(t, firing, "HatcheryVSphereSpawnFailureRatioHigh")
	assert.NotContains(t, firing, "HatcheryVSphereVCenterUnreachable")
	assert.NotContains(t, firing, "HatcheryVSphereInventoryStale")
	assert.NotContains(t, firing, "HatcheryVSphereHeartbeatFailing")
	assert.NotContains(t, firing, "HatcheryVSphereDown")

	// Then every spawn fails: the alert fires.
	injected := time.Now()
	for _, m := range []string{"CloneVM_Task", "PowerOnVM_Task"} {
		info.Env.InjectFault(vcsimtest.Fault{Method: m})
	}
	require.Eventually(t, func() bool {
		firing, err := prom.firing(ctx)
		return err == nil && firing["HatcheryVSphereSpawnFailureRatioHigh"]
	}, alertTimeout, time.Second, "HatcheryVSphereSpawnFailureRatioHigh never fired")
	t.Logf("failure-ratio alert fired %s after the faults were injected", time.Since(injected).Round(time.Second))
	n, err := prom.query(ctx, `ALERTS{alertname="HatcheryVSphereSpawnFailureRatioHigh",alertstate="firing",severity="warning",service_name="hatchery-vsphere-demo"}`)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "the ALERTS series of the firing alert")
}

// promServer is a Prometheus started by startPrometheus.
type promServer struct {
	base   string
	client *http.Client
}

// startPrometheus runs the prometheus binary on a free loopback port with a
// temporary TSDB, scraping target's /mon/metrics as the job of
// configs/prometheus/prometheus-scrape.yml, with the shipped rules; it
// stops it at the end of the test.
func startPrometheus(ctx context.Context, t *testing.T, bin, target string) *promServer {
	t.Helper()
	dir := t.TempDir()
	rules, err := os.ReadFile(rulesFile)
	require.NoError(t, err)
	short := regexp.MustCompile(`(?m)^(\s+for:) \S+$`).ReplaceAll(rules, []byte("$1 1s"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.yml"), short, 0o600))
	cfg := fmt.Sprintf(`global:
  scrape_interval: %[1]s
  evaluation_interval: %[1]s
rule_files: [rules.yml]
scrape_configs:
  - job_name: cds-hatchery-vsphere
    metrics_path: /mon/metrics
    static_configs:
      - targets: [%[2]q]
`, promInterval, target)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600))

	addr := freeLoopbackAddr(t)
	cmd := exec.CommandContext(ctx, bin,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn",
	)
	logs := &testutil.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("prometheus output:\n%s", logs.String())
		}
	})

	p := &promServer{base: "http://" + addr, client: &http.Client{Timeout: apiTimeout}}
	require.Eventually(t, func() bool {
		select {
		case <-done:
			return false
		default:
		}
		resp, err := p.client.Get(p.base + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, promStartTimeout, 100*time.Millisecond, "prometheus not ready:\n%s", logs)
	return p
}

// freeLoopbackAddr returns a loopback address with a port free now.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// apiResponse is the envelope of Prometheus's HTTP API.
type apiResponse struct {
	Status string          `json:"status"`
	Error  string          `json:"error"`
	Data   json.RawMessage `json:"data"`
}

func (p *promServer) get(ctx context.Context, path string, q url.Values) (json.RawMessage, error) {
	rctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, p.base+path+"?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var r apiResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("decode %s: status %d: %w", path, resp.StatusCode, err)
	}
	if r.Status != "success" {
		return nil, &badQueryError{query: q.Encode(), msg: r.Error}
	}
	return r.Data, nil
}

// badQueryError is Prometheus refusing a query (bad PromQL, unknown
// function): never a matter of waiting for data.
type badQueryError struct{ query, msg string }

func (e *badQueryError) Error() string { return "prometheus refused " + e.query + ": " + e.msg }

// query runs an instant query and returns how many series it answered;
// a *badQueryError when Prometheus refused the query.
func (p *promServer) query(ctx context.Context, expr string) (int, error) {
	data, err := p.get(ctx, "/api/v1/query", url.Values{"query": {expr}})
	if err != nil {
		return 0, err
	}
	var d struct {
		ResultType string            `json:"resultType"`
		Result     []json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return 0, fmt.Errorf("decode query result: %w", err)
	}
	return len(d.Result), nil
}

// firing returns the names of the alerts firing now (/api/v1/alerts).
func (p *promServer) firing(ctx context.Context) (map[string]bool, error) {
	data, err := p.get(ctx, "/api/v1/alerts", nil)
	if err != nil {
		return nil, err
	}
	var d struct {
		Alerts []struct {
			Labels map[string]string `json:"labels"`
			State  string            `json:"state"`
		} `json:"alerts"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, a := range d.Alerts {
		if a.State == "firing" {
			out[a.Labels["alertname"]] = true
		}
	}
	return out, nil
}

// dashboardExprs returns every target expression of the Grafana dashboard,
// with its variables replaced: $hatchery by ".*" (All), $__rate_interval by
// rateWindow.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	var d struct {
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(b, &d))
	var out []string
	for _, p := range d.Panels {
		if p.Type != "row" {
			require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			e := strings.ReplaceAll(tg.Expr, "$hatchery", ".*")
			e = strings.ReplaceAll(e, "$__rate_interval", rateWindow)
			out = append(out, e)
		}
	}
	return out
}

// docComparison is a top-level comparison of an alert-style example.
var docComparison = regexp.MustCompile(`\s(==|!=|<=|>=|<|>)\s+([0-9.]+)\s*$`)

// docExprs returns every expression of the promql blocks of docs/metrics.md
// (one per comment, continuation lines indented), made answerable in a
// healthy demo: an alert-style comparison "x > 0.9" becomes "x > bool 0.9"
// (0 or 1 for every series of x), absent(x) becomes x, and range windows
// longer than the run become rateWindow.
func docExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(metricsDoc)
	require.NoError(t, err)
	var out []string
	in := false
	var cur []string
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.Join(cur, " "))
			cur = nil
		}
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```promql"):
			in = true
		case in && strings.HasPrefix(line, "```"):
			flush()
			in = false
		case !in:
		case strings.TrimSpace(line) == "", strings.HasPrefix(strings.TrimSpace(line), "#"):
			flush()
		case strings.HasPrefix(line, " ") && len(cur) > 0:
			cur = append(cur, strings.TrimSpace(line))
		default:
			flush()
			cur = append(cur, strings.TrimSpace(line))
		}
	}
	require.NoError(t, sc.Err())
	window := regexp.MustCompile(`\[[0-9]+[mh]\]`)
	for i, e := range out {
		if inner, ok := strings.CutPrefix(e, "absent("); ok {
			e = strings.TrimSuffix(inner, ")")
		}
		e = docComparison.ReplaceAllString(e, " $1 bool $2")
		out[i] = window.ReplaceAllString(e, "["+rateWindow+"]")
	}
	return out
}
