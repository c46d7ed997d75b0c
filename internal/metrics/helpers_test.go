package metrics

import (
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
)

// testHatchery is the service_name of the Metrics under test.
const testHatchery = testutil.Hatchery

// scrape fetches the Handler over HTTP and parses the Prometheus text.
func scrape(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	return testutil.Scrape(t, m.Handler())
}

type labels = testutil.Labels

var (
	series = testutil.Series
	svc    = testutil.ServiceLabels
)
