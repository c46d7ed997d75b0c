package vcsimtest

import (
	"crypto/tls"
	"net"
	"net/url"
	"sync"
	"testing"

	"github.com/vmware/govmomi/simulator"
)

// FreeAddr is a loopback address nothing listens on (yet): a vCenter that
// does not answer, until ServeVPX serves one there.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free address: %v", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatalf("free address: %v", err)
	}
	return addr
}

// ServeVPX serves a bare vCenter simulator (the default VPX model, no VMs)
// on addr, accepting user and password, until the end of the test or
// stop: a vCenter that comes up where a client already tries to connect.
func ServeVPX(t testing.TB, addr, user, password string) (stop func()) {
	t.Helper()
	m := simulator.VPX()
	m.Machine = 0
	// Created under newServerMu as an Env's simulator (env.go): vcsim
	// v0.56.0's Create writes package state (the evaluation license's
	// properties, the default options) that another model being created
	// at once reads; the race detector saw it between this and an Env.
	newServerMu.Lock()
	if err := m.Create(); err != nil {
		newServerMu.Unlock()
		t.Fatalf("vcenter simulator: %v", err)
	}
	m.Service.TLS = new(tls.Config)
	m.Service.Listen = &url.URL{Host: addr, User: url.UserPassword(user, password)}
	s := m.Service.NewServer()
	newServerMu.Unlock()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			s.Close()
			m.Remove()
		})
	}
	t.Cleanup(stop)
	return stop
}
