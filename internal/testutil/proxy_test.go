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

// TestProxyDropAllThenCut: the proxy forwards; DropAll breaks the open
// connection but a new one goes through; Cut refuses new connections and
// breaks the open ones.
func TestProxyDropAllThenCut(t *testing.T) {
	p := StartProxy(t, echoServer(t))
	c1, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	if got, err := roundTrip(c1, "one"); err != nil || got != "one\n" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}
	p.DropAll()
	if _, err := roundTrip(c1, "two"); err == nil {
		t.Fatal("a dropped connection still answered")
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got, err := roundTrip(c2, "three"); err != nil || got != "three\n" {
		t.Fatalf("a new connection after DropAll: %q, %v", got, err)
	}
	p.Cut()
	if _, err := roundTrip(c2, "four"); err == nil {
		t.Fatal("an open connection answered after Cut")
	}
	if c3, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		defer c3.Close()
		if _, err := roundTrip(c3, "five"); err == nil {
			t.Fatal("a new connection answered after Cut")
		}
	}
}

// TestProxyPauseResume: while paused the proxy breaks the open connection
// and forwards no new one; after Resume a new connection goes through.
func TestProxyPauseResume(t *testing.T) {
	p := StartProxy(t, echoServer(t))
	c1, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	if got, err := roundTrip(c1, "one"); err != nil || got != "one\n" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}
	p.Pause()
	if _, err := roundTrip(c1, "two"); err == nil {
		t.Fatal("an open connection answered while paused")
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := roundTrip(c2, "three"); err == nil {
		t.Fatal("a new connection answered while paused")
	}
	p.Resume()
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if got, err := roundTrip(c3, "four"); err != nil || got != "four\n" {
		t.Fatalf("a new connection after Resume: %q, %v", got, err)
	}
}
