package vcsimtest

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
)

// Recorder is a TLS reverse proxy on 127.0.0.1 in front of the simulator
// that keeps every SOAP request and response body going through it: a
// test reads what a client sent and was answered (the TLS between the
// hatchery and vCenter hides it from a TCP proxy). Clients reach it with
// NewClient; it is stopped when the Env closes.
type Recorder struct {
	env *Env
	srv *httptest.Server

	mu        sync.Mutex
	exchanges []Exchange
}

// Exchange is one SOAP call seen by a Recorder.
type Exchange struct {
	Request, Response []byte
	// Sent and Answered: when the request reached the recorder and when
	// its answer came back from the simulator (a trace's timeline).
	Sent, Answered time.Time
}

// StartRecorder starts a Recorder in front of e's simulator.
func (e *Env) StartRecorder() *Recorder {
	r := &Recorder{env: e}
	target := *e.URL
	target.User = nil
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	rp.Transport = &http.Transport{
		// The simulator's self-signed certificate, on loopback.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // test proxy to the local simulator
	}
	rp.ModifyResponse = func(res *http.Response) error {
		body, err := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if err != nil {
			return err
		}
		res.Body = io.NopCloser(bytes.NewReader(body))
		rr, _ := res.Request.Context().Value(recordedRequestKey{}).(recordedRequest)
		r.mu.Lock()
		r.exchanges = append(r.exchanges, Exchange{Request: rr.body, Response: body, Sent: rr.sent, Answered: time.Now()})
		r.mu.Unlock()
		return nil
	}
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		sent := time.Now()
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		rp.ServeHTTP(w, req.WithContext(context.WithValue(req.Context(), recordedRequestKey{}, recordedRequest{body: body, sent: sent})))
	}))
	r.srv.StartTLS()
	e.closeMu.Lock()
	e.closers = append(e.closers, r.srv.Close)
	e.closeMu.Unlock()
	return r
}

// recordedRequestKey carries a request's body and arrival
// (recordedRequest) to ModifyResponse.
type recordedRequestKey struct{}

type recordedRequest struct {
	body []byte
	sent time.Time
}

// NewClient builds a client of the simulator that goes through the
// recorder (TLS verification off: the recorder's certificate is
// httptest's), closed when the Env closes; mutate as in Env.NewClient.
func (r *Recorder) NewClient(mutate func(*vcenter.Config)) *vcenter.Client {
	r.env.t.Helper()
	return r.env.NewClient(func(c *vcenter.Config) {
		c.Endpoint = r.srv.URL + "/sdk"
		c.CAFile = ""
		c.Insecure = true
		if mutate != nil {
			mutate(c)
		}
	})
}

// Exchanges returns the calls recorded so far, oldest first.
func (r *Recorder) Exchanges() []Exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Exchange(nil), r.exchanges...)
}
