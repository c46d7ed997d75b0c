package testutil

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy forwards TCP connections from a loopback port to a target. Tests
// put one between a client and a simulator to break the link: DropAll
// closes the connections open now (a network failure, a server restart:
// new connections are forwarded again), Pause does that and closes every
// new connection at once until Resume (the target unreachable for a
// while), Cut also stops listening (the client's process is gone, as after
// kill -9: nothing it sends reaches the target any more). It is stopped
// and its goroutines joined at the test's end.
//
// Pause and Cut take effect at one instant on every connection: from the
// moment they are called no byte is forwarded either way, even on a
// connection that is not closed yet. A target that stops answering does so
// for every client at once; closing the connections one after the other
// would otherwise let a request sent on one still open be answered after
// another's failure, a flap no real outage shows.
type Proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	// down is set by Pause and Cut, cleared by Resume: no byte is
	// forwarded while it is set (gate).
	down atomic.Bool

	mu     sync.Mutex
	cut    bool
	paused bool
	conns  map[net.Conn]struct{}
}

// proxyDial bounds the dial to the target: a loopback simulator answers at
// once or not at all.
const proxyDial = 5 * time.Second

// StartProxy starts a proxy on 127.0.0.1 (a free port) to target
// (host:port).
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy to %s: listen: %v", target, err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() { p.Cut(); p.wg.Wait() })
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // cut
		}
		if !p.track(c) {
			_ = c.Close()
			continue
		}
		p.wg.Add(1)
		go func() { // joined through p.wg by the cleanup
			defer p.wg.Done()
			p.pipe(c)
		}()
	}
}

// track records c as open; false once the proxy is cut, or while it is
// paused.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut || p.paused {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
	}
}

// pipe forwards c to a new connection to the target, both ways, until
// either side closes.
func (p *Proxy) pipe(c net.Conn) {
	defer p.untrack(c)
	up, err := net.DialTimeout("tcp", p.target, proxyDial)
	if err != nil {
		_ = c.Close()
		return
	}
	defer p.untrack(up)
	if !p.track(up) {
		_ = up.Close()
		_ = c.Close()
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(gate{p, up}, c); done <- struct{}{} }() // joined below
	go func() { _, _ = io.Copy(gate{p, c}, up); done <- struct{}{} }() // joined below
	<-done
	_ = c.Close()
	_ = up.Close()
	<-done
}

// errProxyDown ends a connection's copy once the proxy is paused or cut.
var errProxyDown = errors.New("proxy paused or cut")

// gate writes to w only while the proxy is neither paused nor cut.
type gate struct {
	p *Proxy
	w io.Writer
}

// Write implements io.Writer.
func (g gate) Write(b []byte) (int, error) {
	if g.p.down.Load() {
		return 0, errProxyDown
	}
	return g.w.Write(b)
}

// DropAll closes every connection open now; new ones are forwarded.
func (p *Proxy) DropAll() {
	p.mu.Lock()
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// Pause closes every connection open now, and every new one at once,
// until Resume.
func (p *Proxy) Pause() {
	p.down.Store(true)
	p.mu.Lock()
	p.paused = true
	p.mu.Unlock()
	p.DropAll()
}

// Resume forwards new connections again after Pause.
func (p *Proxy) Resume() {
	p.mu.Lock()
	p.paused = false
	p.down.Store(p.cut)
	p.mu.Unlock()
}

// Cut stops the proxy: the listener and every open connection close now,
// and no connection is forwarded afterwards.
func (p *Proxy) Cut() {
	p.down.Store(true)
	p.mu.Lock()
	p.cut = true
	p.mu.Unlock()
	_ = p.ln.Close()
	p.DropAll()
}
