package vcsimtest

import (
	"context"
	"fmt"
	"net/http"

	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// The end of a vCenter session as vCenter ends it, in test code: govmomi's
// simulator v0.56.0 has no session timeout for a session in use and no
// restart, and its TerminateSession only forgets the session (its property
// collectors and filters stay hooked to the inventory). vCenter ends a
// session when it expires (its idle timeout), when an operator terminates
// it, and for every session when it restarts; with the session go every
// object it made: property collectors, their filters, container views.
// The VMs stay. EndSession does that: it logs the session out on its
// behalf, a Logout carrying the session's cookie, which makes the
// simulator forget the session and unhook every collector and filter of
// it; no later session can reach them (they were the session's own). The
// holder's next call is answered NotAuthenticated, as vCenter answers a
// call with an expired cookie.

// Sessions returns the keys of the simulator's sessions other than the
// test's own (Admin's), in no order.
func (e *Env) Sessions(ctx context.Context) ([]string, error) {
	var sm mo.SessionManager
	if err := e.Admin.PropertyCollector().RetrieveOne(ctx, *e.Admin.ServiceContent.SessionManager, []string{"sessionList", "currentSession"}, &sm); err != nil {
		return nil, fmt.Errorf("read simulator sessions: %w", err)
	}
	var keys []string
	for _, s := range sm.SessionList {
		if sm.CurrentSession != nil && s.Key == sm.CurrentSession.Key {
			continue
		}
		keys = append(keys, s.Key)
	}
	return keys, nil
}

// EndSession ends the session key as vCenter ends an expired session:
// the session and every property collector and filter it made are gone.
func (e *Env) EndSession(ctx context.Context, key string) error {
	u := *e.URL
	u.User = nil
	sc := soap.NewClient(&u, true)
	sc.Jar.SetCookies(&u, []*http.Cookie{{Name: soap.SessionCookieName, Value: key}})
	vc, err := vim25.NewClient(ctx, sc)
	if err != nil {
		return fmt.Errorf("end simulator session: connect: %w", err)
	}
	defer vc.CloseIdleConnections()
	if _, err := methods.Logout(ctx, vc, &types.Logout{This: *vc.ServiceContent.SessionManager}); err != nil {
		return fmt.Errorf("end simulator session: %w", err)
	}
	return nil
}

// RestartSessions ends every session but the test's own (Admin's, which
// stands for the operator's tools and keeps the fixtures working), as a
// vCenter restart does: the VMs, templates and folders stay. It returns
// how many sessions it ended. A restart also closes every connection:
// tests put a testutil.Proxy between the client and the simulator for
// that.
func (e *Env) RestartSessions(ctx context.Context) (int, error) {
	keys, err := e.Sessions(ctx)
	if err != nil {
		return 0, err
	}
	for _, k := range keys {
		if err := e.EndSession(ctx, k); err != nil {
			return 0, err
		}
	}
	return len(keys), nil
}
