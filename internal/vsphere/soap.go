package vsphere

import (
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
)

// SOAPCounts converts the adapter's per-method SOAP counters to what the
// metrics collector reads (Metrics.SOAP): requests, and request plus
// response body bytes.
func SOAPCounts(s vcenter.SOAPStats) map[string]SOAPCount {
	out := make(map[string]SOAPCount, len(s))
	for method, m := range s {
		out[method] = SOAPCount{Requests: m.Requests, Bytes: m.RequestBytes + m.ResponseBytes}
	}
	return out
}

// SOAPHook returns the Metrics.SOAP hook of a client: a snapshot of its
// cumulative SOAP counters by method, for cds/hatchery/vsphere/soap_requests
// and soap_bytes. Wire it once, before RunMetrics starts:
//
//	m.SOAP = vsphere.SOAPHook(client)
func SOAPHook(c *vcenter.Client) func() map[string]SOAPCount {
	return func() map[string]SOAPCount { return SOAPCounts(c.Stats()) }
}
