package cdssim

import (
	"bufio"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"sync"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// The simulator's CDN log service: a TCP listener on 127.0.0.1 taking the
// step logs of simulated workers, as the CDN's TCP port takes a real
// worker's. /config/cdn answers its address as tcp_url. A log message is
// one JSON object ended by a NUL byte (the GELF-over-TCP framing); the
// simulator reads the job it belongs to and its text.

// logMessage is one step log a simulated worker sends.
type logMessage struct {
	// Job is the V1 job id (decimal) or the V2 run job id.
	Job     string `json:"_job"`
	Message string `json:"short_message"`
}

// cdnLogs is the log listener and what it received.
type cdnLogs struct {
	ln net.Listener
	wg sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	byJob map[string][]string
	done  bool
}

func startCDNLogs() (*cdnLogs, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &cdnLogs{ln: ln, conns: map[net.Conn]struct{}{}, byJob: map[string][]string{}}
	l.wg.Add(1)
	go l.accept()
	return l, nil
}

func (l *cdnLogs) addr() string { return l.ln.Addr().String() }

func (l *cdnLogs) accept() {
	defer l.wg.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return // closed
		}
		l.mu.Lock()
		if l.done {
			l.mu.Unlock()
			_ = c.Close()
			return
		}
		l.conns[c] = struct{}{}
		l.wg.Add(1)
		l.mu.Unlock()
		go l.read(c)
	}
}

func (l *cdnLogs) read(c net.Conn) {
	defer l.wg.Done()
	defer func() {
		l.mu.Lock()
		delete(l.conns, c)
		l.mu.Unlock()
		_ = c.Close()
	}()
	r := bufio.NewReader(c)
	for {
		b, err := r.ReadBytes(0)
		if len(b) > 1 {
			var m logMessage
			if json.Unmarshal(b[:len(b)-1], &m) == nil && m.Job != "" {
				l.mu.Lock()
				l.byJob[m.Job] = append(l.byJob[m.Job], m.Message)
				l.mu.Unlock()
			}
		}
		if err != nil {
			return
		}
	}
}

func (l *cdnLogs) logs(job string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.byJob[job]...)
}

// close stops the listener, closes the connections and waits for their
// readers.
func (l *cdnLogs) close() {
	l.mu.Lock()
	l.done = true
	for c := range l.conns {
		_ = c.Close()
	}
	l.mu.Unlock()
	_ = l.ln.Close()
	l.wg.Wait()
}

// CDNLogAddr is the address (host:port) of the simulator's CDN log
// service: the tcp_url /config/cdn answers.
func (s *Server) CDNLogAddr() string { return s.cdn.addr() }

// JobLogs returns the step logs the CDN log service received for a job (a
// V1 job id in decimal, or a V2 run job id), in order.
func (s *Server) JobLogs(job string) []string { return s.cdn.logs(job) }

// configCDN answers GET /config/cdn and /v2/config/cdn: 404 id 38 with
// Options.NoCDN, as the API without a CDN service; else Options.CDN (the
// simulator's own URL when nil) with tcp_url the simulator's CDN log
// service when it sets none.
func (s *Server) configCDN(_ *http.Request, _ *session) (int, any, error) {
	if s.opts.NoCDN {
		return 0, nil, errNotFound("unable to find any tcp configuration in CDN Uservice")
	}
	cfg := sdk.CDNConfig{HTTPURL: s.srv.URL}
	if s.opts.CDN != nil {
		cfg = *s.opts.CDN
	}
	if cfg.TCPURL == "" {
		cfg.TCPURL = s.CDNLogAddr()
	}
	return 200, cfg, nil
}

// ErrNoLogAddress is what a simulated worker without a CDN log address
// (gelf_service_addr) returns from End for a V1 job: like the real worker,
// which cannot send its step logs, it never sends the job's end, and the
// job stays Building.
var ErrNoLogAddress = errors.New("worker has no cdn log address: job result never sent")
