package hatchery

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSimServiceURLSentAtSignIn: the sign-in carries the hatchery's /mon
// URL (V1 service.http_url, V2 http_url), which the API shows in its
// service list: commonConfiguration.url when set, otherwise the address
// the /mon server listens on.
func TestSimServiceURLSentAtSignIn(t *testing.T) {
	for _, tc := range []struct {
		name string
		url  string
	}{
		{name: "derived from the /mon listener"},
		{name: "commonConfiguration.url", url: "https://hatchery.example.com/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newSimRig(t, simRigOptions{v1: true, v2: true, mon: true, cfg: func(c *CommonConfiguration) { c.URL = tc.url }})
			r.run()
			<-r.f.MonReady()
			want := tc.url
			if want == "" {
				want = "http://" + r.f.MonAddr()
			}
			require.Eventually(t, func() bool {
				v1, v2 := r.sim.ServiceHTTPURL(testHatchery)
				return v1 != "" && v2 != ""
			}, simWait, tick, "signed in with a url")
			v1, v2 := r.sim.ServiceHTTPURL(testHatchery)
			assert.Equal(t, want, v1)
			assert.Equal(t, want, v2)
		})
	}
}

// TestServiceURL: commonConfiguration.url wins; otherwise the listener's
// address (or commonConfiguration.http without one), a listener on every
// interface named by the host name; no URL for a port chosen at start
// that nothing listens on.
func TestServiceURL(t *testing.T) {
	t.Parallel()
	host, err := os.Hostname()
	require.NoError(t, err)
	cfg := func(url, addr string, port int) CommonConfiguration {
		return CommonConfiguration{URL: url, HTTP: HTTPConfig{Addr: addr, Port: port}}
	}
	cases := []struct {
		name   string
		cfg    CommonConfiguration
		listen string
		want   string
	}{
		{"url set", cfg("https://h.example", "127.0.0.1", 8086), "127.0.0.1:8086", "https://h.example"},
		{"listener", cfg("", "127.0.0.1", 0), "127.0.0.1:40123", "http://127.0.0.1:40123"},
		{"no listener: configured address", cfg("", "10.1.2.3", 8086), "", "http://10.1.2.3:8086"},
		{"ipv6 listener", cfg("", "::1", 8086), "[::1]:8086", "http://[::1]:8086"},
		{"every interface", cfg("", "", 8086), "[::]:8086", "http://" + host + ":8086"},
		{"every interface, ipv4", cfg("", "0.0.0.0", 8086), "0.0.0.0:8086", "http://" + host + ":8086"},
		{"free port, no listener", cfg("", "127.0.0.1", 0), "", ""},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, ServiceURL(tc.cfg, tc.listen), tc.name)
	}
}
