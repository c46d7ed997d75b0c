package metrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/require"
)

// testHatchery is the service_name of the Metrics under test.
const testHatchery = "hatch-a"

// scrape fetches the Handler over HTTP and parses the Prometheus text.
func scrape(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
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

type labels map[string]string

// series returns the value of the sample of family name whose labels
// include want, and whether there is one.
func series(fams map[string]*dto.MetricFamily, name string, want labels) (float64, bool) {
	mt := findMetric(fams, name, want)
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

// findMetric returns the first sample of family name whose labels include
// want; nil when there is none.
func findMetric(fams map[string]*dto.MetricFamily, name string, want labels) *dto.Metric {
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

func svc(name string, extra ...string) labels {
	l := labels{"service_name": name, "service_type": "hatchery"}
	for i := 0; i+1 < len(extra); i += 2 {
		l[extra[i]] = extra[i+1]
	}
	return l
}
