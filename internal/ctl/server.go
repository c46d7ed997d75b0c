package ctl

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// Peer is the process on the other end of a connection, as the kernel
// tells it.
type Peer struct {
	UID int `json:"uid"`
	PID int `json:"pid"`
}

// String names the peer in log lines: "ctl uid N".
func (p Peer) String() string { return fmt.Sprintf("ctl uid %d", p.UID) }

// Result is what a command answers: its human text and its facts (any
// value encoding to JSON; nil: none).
type Result struct {
	Text string
	Data any
}

// Command is one command the server answers.
type Command struct {
	// Action marks a command that changes something: it is logged at INFO
	// with the peer's uid, whatever its outcome (a read is logged at
	// DEBUG).
	Action bool
	// Reads, when set on an Action command, tells which arguments make a
	// read rather than an action ("placement list" of "placement"): logged
	// at DEBUG like a read.
	Reads func(args []string) bool
	// Run answers the command with its arguments, for peer (who asked,
	// for the command's own log lines); an error is the client's (bad
	// arguments, nothing to act on) or the daemon's.
	Run func(ctx context.Context, peer Peer, args []string) (Result, error)
}

// Options configure a Server. Commands is required.
type Options struct {
	// Commands by name.
	Commands map[string]Command
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Allowed tells whether a peer uid may talk to the socket; nil allows
	// the daemon's own uid and root (docs/operations.md#ctl).
	Allowed func(uid int) bool
	// PeerOf reads a connection's peer; nil reads it from the kernel
	// (SO_PEERCRED). Tests inject another uid here, since they run as one
	// user.
	PeerOf func(*net.UnixConn) (Peer, error)
	// Timeout bounds one exchange: reading the request, running the
	// command, writing the answer (0: DefaultTimeout).
	Timeout time.Duration
}

// DefaultTimeout bounds one exchange on the socket.
const DefaultTimeout = 30 * time.Second

// Server answers ctl requests on a unix socket. Make it with Listen, run
// it with Serve.
type Server struct {
	ln   *net.UnixListener
	path string
	o    Options
	log  *slog.Logger
}

// Listen creates the unix socket at path with mode 0600. A socket file
// left by a process that is gone is replaced; one a live process answers
// on, or a file that is not a socket, is an error.
func Listen(path string, o Options) (*Server, error) {
	if len(o.Commands) == 0 {
		return nil, errors.New("listen ctl socket: no command")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Allowed == nil {
		self := os.Getuid()
		o.Allowed = func(uid int) bool { return uid == self || uid == 0 }
	}
	if o.PeerOf == nil {
		o.PeerOf = peerOf
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if err := removeStale(path); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen ctl socket %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(true)
	// The unit's UMask=0077 creates it so already; outside it, the window
	// before this chmod is closed by the peer check.
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("listen ctl socket %s: chmod 0600: %w", path, err)
	}
	return &Server{ln: ln, path: path, o: o, log: o.Logger}, nil
}

// removeStale removes a socket file at path that nothing answers on.
func removeStale(path string) error {
	st, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("listen ctl socket %s: %w", path, err)
	case st.Mode()&fs.ModeSocket == 0:
		return fmt.Errorf("listen ctl socket %s: the file exists and is not a socket", path)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("listen ctl socket %s: another process answers on it", path)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("listen ctl socket %s: remove the stale socket: %w", path, err)
	}
	return nil
}

// Close closes a socket that Serve will not run: its file is removed.
func (s *Server) Close() { s.ln.Close() }

// Path is the socket's path.
func (s *Server) Path() string { return s.path }

// Serve answers connections until ctx ends, then closes the socket
// (removing its file) and returns once every connection it took is done.
func (s *Server) Serve(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() { // closes the listener when ctx ends, ending Accept
		defer wg.Done()
		<-ctx.Done()
		s.ln.Close()
	}()
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			if ctx.Err() == nil {
				s.log.Error("ctl socket stopped", "socket", s.path, logkey.Err, err)
			}
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.serveConn(ctx, c)
		}()
	}
}

// serveConn answers the one request of a connection.
func (s *Server) serveConn(ctx context.Context, c *net.UnixConn) {
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	_ = c.SetDeadline(time.Now().Add(s.o.Timeout))
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()

	peer, err := s.o.PeerOf(c)
	if err != nil {
		s.log.Warn("ctl connection refused", logkey.Err, err)
		writeResponse(c, Response{Error: "permission denied: peer credentials unreadable"})
		return
	}
	if !s.o.Allowed(peer.UID) {
		s.log.Warn("ctl connection refused", "peer_uid", peer.UID, "peer_pid", peer.PID, logkey.Detail, "uid is neither the daemon's nor root")
		writeResponse(c, Response{Error: fmt.Sprintf("permission denied: uid %d may not use this socket", peer.UID)})
		return
	}
	line, err := bufio.NewReaderSize(c, 4096).ReadSlice('\n')
	if err != nil && len(line) == 0 {
		s.log.Debug("ctl request unread", "peer_uid", peer.UID, logkey.Err, err)
		return
	}
	var req Request
	if err := json.Unmarshal(line, &req); err != nil {
		writeResponse(c, Response{Error: "bad request: " + err.Error()})
		return
	}
	writeResponse(c, s.run(ctx, peer, req))
}

// run runs one request's command and logs it.
func (s *Server) run(ctx context.Context, peer Peer, req Request) Response {
	cmd, ok := s.o.Commands[req.Command]
	if !ok {
		return Response{Error: fmt.Sprintf("unknown command %q (commands: %s)", req.Command, strings.Join(s.names(), ", ")), Usage: true}
	}
	res, err := cmd.Run(ctx, peer, req.Args)
	lvl := slog.LevelDebug
	if cmd.Action && (cmd.Reads == nil || !cmd.Reads(req.Args)) {
		lvl = slog.LevelInfo
	}
	args := []any{"command", strings.TrimSpace(req.Command + " " + strings.Join(req.Args, " ")), "peer_uid", peer.UID, "peer_pid", peer.PID}
	if err != nil {
		s.log.Log(ctx, lvl, "ctl command refused", append(args, logkey.Err, err)...)
		return Response{Error: err.Error(), Usage: errors.Is(err, ErrUsage)}
	}
	s.log.Log(ctx, lvl, "ctl command", append(args, logkey.Detail, firstLine(res.Text))...)
	r := Response{OK: true, Text: res.Text}
	if res.Data != nil {
		b, err := json.Marshal(res.Data)
		if err != nil {
			return Response{Error: "encode answer: " + err.Error()}
		}
		r.Data = b
	}
	return r
}

func (s *Server) names() []string {
	out := make([]string, 0, len(s.o.Commands))
	for n := range s.o.Commands {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// writeResponse writes r as one JSON line; a client gone is not an error
// worth a line.
func writeResponse(c net.Conn, r Response) {
	b, err := json.Marshal(r)
	if err != nil {
		b, _ = json.Marshal(Response{Error: "encode answer: " + err.Error()})
	}
	_, _ = c.Write(append(b, '\n'))
}
