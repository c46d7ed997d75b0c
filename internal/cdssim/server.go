// Package cdssim is an in-process CDS API simulator for tests and the demo.
// It listens on 127.0.0.1 and speaks the endpoints a hatchery calls with the
// paths, JSON field names and status codes of the recorded exchanges in
// sdk/cdsclient/testdata/captures: V1/V2 sign-in, heartbeats, /config/cdn, the V1
// and V2 job queues, workers, worker models and the two websockets. Its CDN
// log service (a TCP port, the tcp_url of /config/cdn) takes the step logs
// of simulated workers (StartWorker).
//
// Sessions are RS512 JWTs with the claims the API uses ({ID, TokenID, exp,
// jti, iat, iss, sub}), signed with a key generated once per process; the
// public key is announced in the X-Api-Pub-Signing-Key header (base64 of a
// PKCS#1 "RSA PUBLIC KEY" PEM). A session is valid while the simulator knows
// it: ExpireSessions forgets them all, so the next call answers 401 id 10.
//
// It is as strict as the real API where a hatchery can get it wrong: a
// worker signs in (POST /auth/consumer/worker/signin, see StartWorker) with
// the JWT its hatchery signed, verified with the public key that hatchery
// sent at sign-in read as a PKCS#1 "RSA PUBLIC KEY" PEM (401 otherwise);
// the V2 queue answers only for its regions, the first announced at V2
// sign-in (404 "region … not found" otherwise); a V1 result needs the
// camel-case buildID (409 "Resource locked" otherwise); the V1 queue
// matches each region value exactly, the empty value matching the jobs
// without a region; spawn-info ids the API does not define are flagged
// (UnknownSpawnInfoIDs).
//
// A hatchery that dies after booking a job does not hold it for ever, as
// with the API: a V1 booking lapses after BookingTTL (two minutes, the
// lifetime of the API's cache entry) unless a worker took the job, and a V2
// job Scheduling for SchedulingTimeout (ten minutes, the API's default) is
// queued again. Tests shorten both.
//
// A worker that ends leaves the worker lists as with the API: a V2 worker at
// once (the API deletes a signed-out V2 worker within seconds), a V1 worker
// only after DisabledWorkerTTL, listed Disabled meanwhile (the API disables
// a V1 worker that unregisters and deletes it once its last beat is five
// minutes old).
//
// Everything is safe for concurrent use.
package cdssim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// Default sign-in tokens accepted when Options leaves them empty.
const (
	DefaultTokenV1 = "cdssim-builtin-signin-token-v1"
	DefaultTokenV2 = "cdssim-hatchery-signin-token-v2"
	// DefaultBookingTTL is the lifetime of a V1 booking in the API's
	// cache: two minutes.
	DefaultBookingTTL = 2 * time.Minute
	// DefaultSchedulingTimeout is the API's default V2 job-scheduling
	// timeout: ten minutes.
	DefaultSchedulingTimeout = 10 * time.Minute
	// DefaultDisabledWorkerTTL is how long the API lists a V1 worker
	// after it ended (Disabled): five minutes.
	DefaultDisabledWorkerTTL = 5 * time.Minute
	// DefaultRegion is the V2 region a hatchery gets when Options.Regions is empty.
	DefaultRegion = "default"
)

// Options configure a simulator.
type Options struct {
	// TokenV1 is the builtin consumer sign-in token accepted by V1 sign-in
	// (DefaultTokenV1 when empty).
	TokenV1 string
	// TokenV2 is the hatchery consumer sign-in token accepted by V2 sign-in
	// (DefaultTokenV2 when empty).
	TokenV2 string
	// HatcheryName, when set, is the only name V2 sign-in accepts (403
	// otherwise, as the API does for a consumer bound to another hatchery).
	HatcheryName string
	// Regions are the V2 regions (DefaultRegion when empty); the first is
	// the one V2 sign-in announces.
	Regions []string
	// CDN is what /config/cdn and /v2/config/cdn answer, as the API with
	// a CDN service: nil answers the simulator's own URL as http_url; an
	// empty tcp_url is the simulator's CDN log service (CDNLogAddr).
	CDN *sdk.CDNConfig
	// NoCDN makes /config/cdn and /v2/config/cdn answer 404 id 38, as the
	// API without a CDN service.
	NoCDN bool
	// WindowsWorker makes GET /download/worker/windows/amd64 answer the
	// worker stand-in too, as an API holding the Windows worker build
	// does (the demo's Windows model downloads it); without it that
	// download answers 500, as the API holding only linux/amd64 does.
	WindowsWorker bool
	// APIURL is the api_url announced at sign-in (the server's URL when empty).
	APIURL string
	// SessionTTL is the exp of session JWTs (1h when 0); an expired session
	// answers 401.
	SessionTTL time.Duration
	// BookingTTL is how long a V1 booking holds (DefaultBookingTTL when
	// 0). The API keeps a booking in its cache with this lifetime: a
	// booking neither released nor followed by the worker's take lapses,
	// and the job is in the queue again for any hatchery (the way the jobs
	// of a hatchery that died after booking come back).
	BookingTTL time.Duration
	// SchedulingTimeout is how long a V2 job stays Scheduling after a
	// hatchery took it before it is queued again (DefaultSchedulingTimeout
	// when 0): the API's job-scheduling timeout, re-enqueuing the jobs of a
	// hatchery that died after taking them.
	SchedulingTimeout time.Duration
	// DisabledWorkerTTL is how long a V1 worker that ended stays in GET
	// /worker, Disabled (DefaultDisabledWorkerTTL when 0).
	DisabledWorkerTTL time.Duration
	// Now is the clock of the bookings and the scheduling timeout
	// (time.Now when nil): a test sets one it moves to make them lapse
	// without waiting. Sessions keep the real clock.
	Now func() time.Time
	// Logger receives one debug line per request; discarded when nil.
	Logger *slog.Logger
}

// TB is the part of testing.TB that Start uses.
type TB interface {
	// Helper marks the caller as a test helper.
	Helper()
	// Cleanup registers a function run when the test ends.
	Cleanup(func())
	// Fatalf reports a fatal error and stops the test.
	Fatalf(format string, args ...any)
}

// Server is a running simulator.
type Server struct {
	opts Options
	srv  *httptest.Server
	cdn  *cdnLogs
	log  *slog.Logger
	done chan struct{}
	wg   sync.WaitGroup // websocket connections

	mu     sync.Mutex
	closed bool
	st     state
}

// New starts a simulator on 127.0.0.1 (a free port). Close stops it.
func New(opts Options) (*Server, error) {
	if opts.TokenV1 == "" {
		opts.TokenV1 = DefaultTokenV1
	}
	if opts.TokenV2 == "" {
		opts.TokenV2 = DefaultTokenV2
	}
	if len(opts.Regions) == 0 {
		opts.Regions = []string{DefaultRegion}
	}
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = time.Hour
	}
	if opts.BookingTTL <= 0 {
		opts.BookingTTL = DefaultBookingTTL
	}
	if opts.SchedulingTimeout <= 0 {
		opts.SchedulingTimeout = DefaultSchedulingTimeout
	}
	if opts.DisabledWorkerTTL <= 0 {
		opts.DisabledWorkerTTL = DefaultDisabledWorkerTTL
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if _, err := signingKey(); err != nil {
		return nil, fmt.Errorf("cdssim: signing key: %w", err)
	}
	s := &Server{opts: opts, done: make(chan struct{}), log: opts.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.st.init()
	cdn, err := startCDNLogs()
	if err != nil {
		return nil, fmt.Errorf("cdssim: listen cdn logs: %w", err)
	}
	s.cdn = cdn
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cdn.close()
		return nil, fmt.Errorf("cdssim: listen: %w", err)
	}
	s.srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: s.routes(), ReadHeaderTimeout: 10 * time.Second}}
	s.srv.Start()
	return s, nil
}

// Start starts a simulator for a test and closes it at the test's end.
func Start(t TB, opts Options) *Server {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatalf("start cds simulator: %v", err)
		return nil
	}
	t.Cleanup(s.Close)
	return s
}

// URL is the simulator's base URL (http://127.0.0.1:port).
func (s *Server) URL() string { return s.srv.URL }

// TokenV1 is the V1 sign-in token the simulator accepts.
func (s *Server) TokenV1() string { return s.opts.TokenV1 }

// TokenV2 is the V2 sign-in token the simulator accepts.
func (s *Server) TokenV2() string { return s.opts.TokenV2 }

// Close stops the server, closes websockets and waits for them. It may be
// called more than once.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.done)
	s.mu.Unlock()
	s.srv.CloseClientConnections()
	s.srv.Close()
	s.cdn.close()
	s.wg.Wait()
}

func (s *Server) apiURL() string {
	if s.opts.APIURL != "" {
		return s.opts.APIURL
	}
	return s.srv.URL
}

// CDS error ids used by the simulator, as the API answers them.
const (
	errIDNotAuthenticated = 10
	errIDForbidden        = 11
	errIDNotFound         = 38
	errIDWrongRequest     = 74
	errIDAlreadyBooked    = 89
	errIDAlreadyReleased  = 135
	errIDInternal         = 1 // "internal server error"
	// errIDLocked answers a result whose buildID does not lock the job
	// (409 "Resource locked"); the captures hold no such answer, so the id
	// is the simulator's own.
	errIDLocked = 193
)

type apiErr struct {
	status int
	body   sdk.APIError
	// noRequestID: the API's router 404 carries no request_id.
	noRequestID bool
}

func (e *apiErr) Error() string { return e.body.Message }

func newErr(status, id int, msg, from string) *apiErr {
	return &apiErr{status: status, body: sdk.APIError{ID: id, Message: msg, From: from}}
}

var (
	errNotAuthenticated = func() *apiErr { return newErr(401, errIDNotAuthenticated, "not authenticated", "") }
	errForbidden        = func() *apiErr { return newErr(403, errIDForbidden, "forbidden", "") }
	errNotFound         = func(from string) *apiErr { return newErr(404, errIDNotFound, "resource not found", from) }
	errWrongRequest     = func() *apiErr { return newErr(400, errIDWrongRequest, "wrong request", "") }
)

func requestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	if status == http.StatusNoContent {
		w.WriteHeader(status)
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		status, b = 500, []byte(`{"id":1,"message":"internal server error"}`)
	}
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeErr(w http.ResponseWriter, reqID string, e *apiErr) {
	body := e.body
	if !e.noRequestID {
		body.RequestID = reqID
	}
	writeJSON(w, e.status, body)
}

// handler is one route: it gets the caller's session (nil for sign-in and
// websockets, which authenticate themselves) and answers status and body.
type handler func(r *http.Request, sess *session) (int, any, error)

// route wraps h with the failure injection, authentication and JSON writing.
func (s *Server) route(api apiKind, h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		reqID := requestID()
		w.Header().Set("Request-Id", reqID)
		status, err := s.serve(w, r, api, h)
		var ae *apiErr
		if errors.As(err, &ae) {
			writeErr(w, reqID, ae)
			status = ae.status
		} else if err != nil {
			writeErr(w, reqID, newErr(500, errIDInternal, "internal server error", ""))
			status = 500
		}
		s.record(r, status)
		s.log.Debug("cdssim request", "method", r.Method, "path", r.URL.Path, "status", status)
	}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, api apiKind, h handler) (int, error) {
	if err := s.injected(r.Context()); err != nil {
		return 0, err
	}
	r = r.WithContext(context.WithValue(r.Context(), writerKey{}, w))
	var sess *session
	if api != apiNone {
		var err error
		if sess, err = s.authenticate(r, api); err != nil {
			return 0, err
		}
	}
	status, body, err := h(r, sess)
	if err != nil {
		return 0, err
	}
	if status == 0 {
		return 0, nil // the handler wrote the answer itself (websocket)
	}
	writeJSON(w, status, body)
	return status, nil
}

func decodeBody(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 8<<20))
	if err := dec.Decode(v); err != nil {
		return errWrongRequest()
	}
	return nil
}

func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if t, ok := strings.CutPrefix(h, "Bearer "); ok {
		return strings.TrimSpace(t)
	}
	if c, err := r.Cookie("jwt_token"); err == nil {
		return c.Value
	}
	return ""
}
