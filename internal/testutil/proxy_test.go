package testutil

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// echoServer answers every line with the same line.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() { // ends when the listener closes
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { // ends when the connection closes
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					l, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(l)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn, s string) (string, error) {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(s + "\n")); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

// dial connects to the proxy; the connection is closed at the test's end.
func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// echoes fails the test unless c answers s with s (what says when).
func echoes(t *testing.T, c net.Conn, s, what string) {
	t.Helper()
	if got, err := roundTrip(c, s); err != nil || got != s+"\n" {
		t.Fatalf("%s: %q, %v", what, got, err)
	}
}

// silent fails the test if c answers s (what says when).
func silent(t *testing.T, c net.Conn, s, what string) {
	t.Helper()
	if _, err := roundTrip(c, s); err == nil {
		t.Fatalf("%s: answered", what)
	}
}

// TestProxyDropAllThenCut: the proxy forwards; DropAll breaks the open
// connection but a new one goes through; Cut refuses new connections and
// breaks the open ones.
func TestProxyDropAllThenCut(t *testing.T) {
	p := StartProxy(t, echoServer(t))
	c1 := dial(t, p)
	echoes(t, c1, "one", "through the proxy")
	p.DropAll()
	silent(t, c1, "two", "a dropped connection")
	c2 := dial(t, p)
	echoes(t, c2, "three", "a new connection after DropAll")
	p.Cut()
	silent(t, c2, "four", "an open connection after Cut")
	if c3, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		defer c3.Close()
		silent(t, c3, "five", "a new connection after Cut")
	}
}

// TestProxyPauseResume: while paused the proxy breaks the open connection
// and forwards no new one; after Resume a new connection goes through.
func TestProxyPauseResume(t *testing.T) {
	p := StartProxy(t, echoServer(t))
	c1 := dial(t, p)
	echoes(t, c1, "one", "through the proxy")
	p.Pause()
	silent(t, c1, "two", "an open connection while paused")
	silent(t, dial(t, p), "three", "a new connection while paused")
	p.Resume()
	echoes(t, dial(t, p), "four", "a new connection after Resume")
}

// TestProxyPauseStopsEveryConnectionAtOnce: from the moment the proxy is
// down no byte goes through, even on a connection Pause has not closed yet
// (played by setting the flag alone, as Pause does first): a request on
// it gets no answer. Resume forwards new connections again.
func TestProxyPauseStopsEveryConnectionAtOnce(t *testing.T) {
	p := StartProxy(t, echoServer(t))
	c := dial(t, p)
	echoes(t, c, "before", "before the pause")
	p.down.Store(true) // Pause's first step; its closing of c not yet done
	silent(t, c, "during", "a connection not yet closed, after the pause began")
	p.Pause()
	p.Resume()
	echoes(t, dial(t, p), "after", "a new connection after Resume")
}
