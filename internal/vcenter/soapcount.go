package vcenter

import (
	"io"
	"maps"
	"net/http"
	"sync"
)

// SOAPMethodStats counts the SOAP requests of one method and their bytes on
// the wire (request bodies sent, response bodies read).
type SOAPMethodStats struct {
	Requests      int64
	RequestBytes  int64
	ResponseBytes int64
}

// SOAPStats is a snapshot of SOAP traffic per method name
// ("RetrieveProperties", "CloneVM_Task", …), for the metrics
// cds/hatchery/vsphere/soap_requests and soap_bytes.
type SOAPStats map[string]SOAPMethodStats

// Total sums every method.
func (s SOAPStats) Total() SOAPMethodStats {
	var t SOAPMethodStats
	for _, m := range s {
		t.Requests += m.Requests
		t.RequestBytes += m.RequestBytes
		t.ResponseBytes += m.ResponseBytes
	}
	return t
}

// Sub returns s minus an earlier snapshot: the traffic in between.
func (s SOAPStats) Sub(earlier SOAPStats) SOAPStats {
	out := SOAPStats{}
	for k, m := range s {
		e := earlier[k]
		d := SOAPMethodStats{
			Requests:      m.Requests - e.Requests,
			RequestBytes:  m.RequestBytes - e.RequestBytes,
			ResponseBytes: m.ResponseBytes - e.ResponseBytes,
		}
		if d != (SOAPMethodStats{}) {
			out[k] = d
		}
	}
	return out
}

// Stats returns a snapshot of the client's SOAP counters since it was
// created. Safe for concurrent use.
func (c *Client) Stats() SOAPStats { return c.stats.snapshot() }

// soapStats holds the counters. The method set is the vim25 API's, so the
// map stays small (tens of entries).
type soapStats struct {
	mu sync.Mutex
	m  map[string]SOAPMethodStats
}

func newSOAPStats() *soapStats { return &soapStats{m: map[string]SOAPMethodStats{}} }

func (s *soapStats) add(method string, d SOAPMethodStats) {
	s.mu.Lock()
	m := s.m[method]
	m.Requests += d.Requests
	m.RequestBytes += d.RequestBytes
	m.ResponseBytes += d.ResponseBytes
	s.m[method] = m
	s.mu.Unlock()
}

func (s *soapStats) snapshot() SOAPStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.m)
}

// countingTransport is the HTTP layer under the SOAP client: it counts one
// request per round trip and the body bytes both ways, under the SOAP
// method name meteredRoundTripper put in the request's context.
type countingTransport struct {
	next  http.RoundTripper
	stats *soapStats
}

// RoundTrip implements http.RoundTripper.
func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	method := soapMethodFrom(req.Context())
	t.stats.add(method, SOAPMethodStats{Requests: 1})
	if req.Body != nil && req.Body != http.NoBody {
		req = req.Clone(req.Context())
		req.Body = &countingBody{ReadCloser: req.Body, done: func(n int64) {
			t.stats.add(method, SOAPMethodStats{RequestBytes: n})
		}}
	}
	res, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	res.Body = &countingBody{ReadCloser: res.Body, done: func(n int64) {
		t.stats.add(method, SOAPMethodStats{ResponseBytes: n})
	}}
	return res, nil
}

// countingBody counts bytes read from a body and reports them once, on
// Close (the transport closes request bodies, soap.Client response bodies).
type countingBody struct {
	io.ReadCloser
	n    int64
	once sync.Once
	done func(int64)
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingBody) Close() error {
	err := c.ReadCloser.Close()
	c.once.Do(func() { c.done(c.n) })
	return err
}
