package vsphere

import (
	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
)

// SOAPCounts converts the adapter's per-method SOAP counters to what the
// metrics collector reads (metrics.Metrics.SOAP): requests, and request plus
// response body bytes.
func SOAPCounts(s vcenter.SOAPStats) map[string]metrics.SOAPCount {
	out := make(map[string]metrics.SOAPCount, len(s))
	for method, m := range s {
		out[method] = metrics.SOAPCount{Requests: m.Requests, Bytes: m.RequestBytes + m.ResponseBytes}
	}
	return out
}

// SOAPHook returns the metrics.Metrics.SOAP hook of a client: a snapshot of its
// cumulative SOAP counters by method, for cds/hatchery/vsphere/soap_requests
// and soap_bytes. Wire it once, before RunMetrics starts:
//
//	m.SOAP = vsphere.SOAPHook(client)
func SOAPHook(c *vcenter.Client) func() map[string]metrics.SOAPCount {
	return func() map[string]metrics.SOAPCount { return SOAPCounts(c.Stats()) }
}
