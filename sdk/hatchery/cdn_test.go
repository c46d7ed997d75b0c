package hatchery

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// resolveCDN gives workers the CDN's HTTP URL and TCP log address: each
// from the configuration when set, else from the API's answer; without a
// TCP address at the end, one log line says what to set and the CDN status
// line warns.
func TestResolveCDN(t *testing.T) {
	t.Parallel()
	api := &sdk.CDNConfig{HTTPURL: "http://cdn.api", TCPURL: "cdn.api:8090", TCPURLEnableTLS: true}
	cases := []struct {
		name      string
		v2Only    bool
		http, tcp string
		tcpTLS    bool
		answer    *sdk.CDNConfig // nil: 404
		failures  int            // 503 answers first
		want      workerCDN
		asked     int
		logLevel  string // the level of the "no cdn tcp address" line, "" when none
		status    string
	}{
		{name: "all from the api", answer: api, want: workerCDN{"http://cdn.api", "cdn.api:8090", true}, asked: 1, status: sdk.MonitoringStatusOK},
		{name: "cdn.url set: tcp still from the api", http: "http://cdn.conf", answer: api,
			want: workerCDN{"http://cdn.conf", "cdn.api:8090", true}, asked: 1, status: sdk.MonitoringStatusOK},
		{name: "tcp set: http from the api, tls from the config", tcp: "cdn.conf:8090", answer: api,
			want: workerCDN{"http://cdn.api", "cdn.conf:8090", false}, asked: 1, status: sdk.MonitoringStatusOK},
		{name: "both set: api not asked", http: "http://cdn.conf", tcp: "cdn.conf:8090", tcpTLS: true, answer: api,
			want: workerCDN{"http://cdn.conf", "cdn.conf:8090", true}, asked: 0, status: sdk.MonitoringStatusOK},
		{name: "api without cdn, tcp set", tcp: "cdn.conf:8090", want: workerCDN{"", "cdn.conf:8090", false}, asked: 1, status: sdk.MonitoringStatusOK},
		{name: "api without cdn, nothing set", http: "http://cdn.conf", want: workerCDN{HTTP: "http://cdn.conf"}, asked: 1,
			logLevel: "ERROR", status: sdk.MonitoringStatusWarn},
		{name: "api without tcp address", answer: &sdk.CDNConfig{HTTPURL: "http://cdn.api"}, want: workerCDN{HTTP: "http://cdn.api"}, asked: 1,
			logLevel: "ERROR", status: sdk.MonitoringStatusWarn},
		{name: "v2 only, nothing", v2Only: true, want: workerCDN{}, asked: 1, logLevel: "WARN", status: sdk.MonitoringStatusWarn},
		{name: "no tcp address: asked until the api answers", failures: 7, answer: api,
			want: workerCDN{"http://cdn.api", "cdn.api:8090", true}, asked: 8, status: sdk.MonitoringStatusOK},
		{name: "tcp set: api failing, given up after 3", tcp: "cdn.conf:8090", failures: 7, answer: api,
			want: workerCDN{TCP: "cdn.conf:8090"}, asked: cdnAttempts, status: sdk.MonitoringStatusOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig(t)
			if tc.v2Only {
				cfg.API.Token, cfg.API.TokenV2 = "", "v2-secret-token"
			}
			cfg.CDN = CDNConfig{URL: tc.http, TCP: CDNTCPConfig{URL: tc.tcp, EnableTLS: tc.tcpTLS}}
			hs := newHarness(t, cfg, nil)
			hs.c.cdn, hs.c.cdnFailures = tc.answer, tc.failures
			hs.f.resolveCDN(context.Background())

			assert.Equal(t, tc.want, hs.f.workerCDN())
			hs.c.snapshot(func(c *fakeClient) { assert.Equal(t, tc.asked, c.cdnCalls, "api asked") })
			wc := buildWorkerConfig(cfg, hs.f.workerCDN(), spawn.WorkerLogConfig{}, workerConfigInput{Name: "w"})
			assert.Equal(t, tc.want.TCP, wc.GelfServiceAddr)
			assert.Equal(t, tc.want.TCPWithTLS, wc.GelfServiceAddrEnableTLS)

			lines := logLines(hs.logs.String(), "no cdn tcp address", "ERROR", "WARN", "INFO")
			if tc.logLevel == "" {
				assert.Empty(t, lines)
			} else if assert.Len(t, lines, 1) {
				assert.Contains(t, lines[0], `"level":"`+tc.logLevel+`"`)
				assert.Contains(t, lines[0], "commonConfiguration.cdn.tcp.url")
			}
			var cdn sdk.MonitoringStatusLine
			for _, l := range hs.f.statusLines(context.Background()) {
				if l.Component == "CDN" {
					cdn = l
				}
			}
			assert.Equal(t, tc.status, cdn.Status)
			assert.True(t, strings.Contains(cdn.Value, "tcp "+tc.want.TCP) || tc.want.TCP == "", cdn.Value)
		})
	}
}
