package cdssim

// The simulator's injected faults: failures, latency, expired sessions.

import (
	"context"
	"net/http"
	"time"
)

// injected applies the configured latency and failures to one request.
func (s *Server) injected(ctx context.Context) error {
	s.mu.Lock()
	lat := s.st.latency
	var status int
	f := &s.st.fail
	switch {
	case f.remaining > 0:
		f.remaining--
		status = f.status
	case !f.until.IsZero() && time.Now().Before(f.until):
		status = f.status
	}
	s.mu.Unlock()
	if lat > 0 {
		t := time.NewTimer(lat)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
			return errNotFound("simulator closed")
		}
	}
	if status != 0 {
		return newErr(status, errIDInternal, http.StatusText(status), "injected by cdssim")
	}
	return nil
}

// authenticate checks the bearer session against the route's API version:
// no or unknown session 401 id 10; a session of the other version 403 id 11.
func (s *Server) authenticate(r *http.Request, api apiKind) (*session, error) {
	tok := bearer(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.st.sessions[tok]
	if tok == "" || !ok || time.Now().After(sess.expires) {
		return nil, errNotAuthenticated()
	}
	if sess.api != api {
		return nil, errForbidden()
	}
	return sess, nil
}

// FailNext makes the next n requests (sign-ins included) answer status
// (e.g. 500 or 503) with a CDS error body.
func (s *Server) FailNext(n, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.fail = failure{status: status, remaining: n}
}

// FailFor makes every request answer status for d from now.
func (s *Server) FailFor(d time.Duration, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.fail = failure{status: status, until: time.Now().Add(d)}
}

// ClearFailures stops injected failures.
func (s *Server) ClearFailures() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.fail = failure{}
}

// SetLatency delays every answer by d (0 turns it off); the delay ends early
// when the request's context ends.
func (s *Server) SetLatency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.latency = d
}

// ExpireSessions forgets every session: the next authenticated call answers
// 401 id 10 "not authenticated" until the hatchery signs in again.
func (s *Server) ExpireSessions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.st.sessions)
}
