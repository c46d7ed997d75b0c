package vcsimtest

import (
	"context"
	"crypto/tls"
	"net/url"
	"testing"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/simulator"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
)

// PlainTemplate is the template of a Plain simulator: the VPX model's
// first VM of its cluster, powered off and marked as a template.
const PlainTemplate = "DC0_C0_RP0_VM0"

// Plain is govmomi's simulator as it comes, without any of this
// package's extensions (no guest, no readiness, no changeVersion check,
// no instant clone): what `vcenter check` must report as unsupported
// rather than pass.
type Plain struct {
	// Endpoint is the SDK URL without credentials.
	Endpoint string
	// User and Password are accepted by the simulator.
	User, Password string
}

// StartPlain serves a plain VPX simulator (one VM per host and pool) on
// loopback until the end of the test, with PlainTemplate made a
// template.
func StartPlain(t testing.TB) *Plain {
	t.Helper()
	m := simulator.VPX()
	// Created under newServerMu as an Env's simulator (env.go).
	newServerMu.Lock()
	if err := m.Create(); err != nil {
		newServerMu.Unlock()
		t.Fatalf("vcenter simulator: %v", err)
	}
	m.Service.TLS = new(tls.Config)
	m.Service.Listen = &url.URL{Host: "127.0.0.1:0"}
	s := m.Service.NewServer()
	newServerMu.Unlock()
	t.Cleanup(func() {
		s.Close()
		m.Remove()
	})
	ctx := context.Background()
	c, err := govmomi.NewClient(ctx, s.URL, true)
	if err != nil {
		t.Fatalf("plain simulator client: %v", err)
	}
	vm, err := find.NewFinder(c.Client, true).VirtualMachine(ctx, "/DC0/vm/"+PlainTemplate)
	if err != nil {
		t.Fatalf("plain simulator template: %v", err)
	}
	task, err := vm.PowerOff(ctx)
	if err == nil {
		err = task.Wait(ctx)
	}
	if err == nil {
		err = vm.MarkAsTemplate(ctx)
	}
	if err != nil {
		t.Fatalf("plain simulator template: %v", err)
	}
	u := *s.URL
	u.User = nil
	pw, _ := s.URL.User.Password()
	return &Plain{Endpoint: u.String(), User: s.URL.User.Username(), Password: pw}
}

// Config is a configuration of the plain simulator (insecure TLS: its
// certificate is throwaway), its one cluster as the placement.
func (p *Plain) Config() *config.Config {
	return &config.Config{
		User: p.User, Password: p.Password, Endpoint: p.Endpoint, Insecure: true,
		DatacenterString: DatacenterName, ResourcePoolString: ResourcePoolPath,
		DatastoreString: DatastoreName, NetworkString: NetworkName, FolderString: FolderPath, CardName: CardName,
	}
}
