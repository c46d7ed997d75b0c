package testutil

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/require"
)

// Scrape fetches h (a /mon/metrics handler) from a loopback test server
// and parses the Prometheus text.
func Scrape(t testing.TB, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL+"/mon/metrics", nil)
	require.NoError(t, err)
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return fams
}

// Labels is a label set that a sample must include.
type Labels map[string]string

// Series returns the value of the sample of family name whose labels
// include want (a histogram's: its sample count), and whether there is one.
func Series(fams map[string]*dto.MetricFamily, name string, want Labels) (float64, bool) {
	mt := FindMetric(fams, name, want)
	switch {
	case mt == nil:
		return 0, false
	case mt.Gauge != nil:
		return mt.GetGauge().GetValue(), true
	case mt.Counter != nil:
		return mt.GetCounter().GetValue(), true
	case mt.Untyped != nil:
		return mt.GetUntyped().GetValue(), true
	case mt.Histogram != nil:
		return float64(mt.GetHistogram().GetSampleCount()), true
	}
	return 0, false
}

// FindMetric returns the first sample of family name whose labels include
// want; nil when there is none.
func FindMetric(fams map[string]*dto.MetricFamily, name string, want Labels) *dto.Metric {
next:
	for _, mt := range fams[name].GetMetric() {
		got := map[string]string{}
		for _, lp := range mt.GetLabel() {
			got[lp.GetName()] = lp.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		return mt
	}
	return nil
}

// ServiceLabels is the label set of every hatchery series, service_name=name
// and service_type=hatchery, plus extra as name, value pairs.
func ServiceLabels(name string, extra ...string) Labels {
	l := Labels{"service_name": name, "service_type": "hatchery"}
	for i := 0; i+1 < len(extra); i += 2 {
		l[extra[i]] = extra[i+1]
	}
	return l
}
