package vcenter

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
)

// meteredRoundTripper is the innermost SOAP layer: it bounds each request by
// timeout and labels its context with the SOAP method name, which
// countingTransport uses to attribute bytes.
type meteredRoundTripper struct {
	next    soap.RoundTripper
	timeout time.Duration
}

// RoundTrip implements soap.RoundTripper.
func (m *meteredRoundTripper) RoundTrip(ctx context.Context, req, res soap.HasFault) error {
	ctx, cancel := context.WithTimeout(withSOAPMethod(ctx, soapMethodName(req)), m.timeout)
	defer cancel()
	return m.next.RoundTrip(ctx, req, res)
}

// soapMethodName turns *methods.RetrievePropertiesBody into "RetrieveProperties".
func soapMethodName(req soap.HasFault) string {
	t := reflect.TypeOf(req)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "unknown"
	}
	return strings.TrimSuffix(t.Name(), "Body")
}

type soapMethodKey struct{}

func withSOAPMethod(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, soapMethodKey{}, name)
}

func soapMethodFrom(ctx context.Context) string {
	if s, ok := ctx.Value(soapMethodKey{}).(string); ok && s != "" {
		return s
	}
	return "unknown"
}

// reloginRoundTripper is the outermost SOAP layer: when vCenter answers
// NotAuthenticated (session expired or terminated), it logs in again once
// and retries the request once. Concurrent failures share one login.
type reloginRoundTripper struct {
	next     soap.RoundTripper
	sm       types.ManagedObjectReference
	user     string
	password string // secret: never logged
	log      *slog.Logger
	// quiet, when set, tells whether a re-login is part of an outage
	// already logged (Client.reloginQuiet): it is then logged at DEBUG.
	quiet func() bool

	mu       sync.Mutex
	gen      atomic.Int64 // session generation, bumped by each re-login
	relogins atomic.Int64
	closed   atomic.Bool
}

// RoundTrip implements soap.RoundTripper.
func (r *reloginRoundTripper) RoundTrip(ctx context.Context, req, res soap.HasFault) error {
	gen := r.gen.Load()
	err := r.next.RoundTrip(ctx, req, res)
	if r.closed.Load() {
		return err
	}
	if err == nil && !missingNotAuthenticated(res) {
		return nil
	}
	if err != nil && !vim.IsNotAuthenticated(err) {
		return err
	}
	switch req.(type) {
	case *methods.LoginBody, *methods.LogoutBody:
		return err
	}
	if lerr := r.relogin(ctx, gen); lerr != nil {
		if err == nil {
			return lerr
		}
		return fmt.Errorf("%w (re-login failed: %w)", err, lerr)
	}
	// The response was (partly) decoded: zero it before the retry.
	if v := reflect.ValueOf(res); v.Kind() == reflect.Pointer && !v.IsNil() {
		v.Elem().Set(reflect.Zero(v.Elem().Type()))
	}
	return r.next.RoundTrip(ctx, req, res)
}

// missingNotAuthenticated tells whether a property retrieval came back
// with NotAuthenticated per object (the simulator answers unauthenticated
// reads so, where vCenter answers a NotAuthenticated fault).
func missingNotAuthenticated(res soap.HasFault) bool {
	var objects []types.ObjectContent
	switch r := res.(type) {
	case *methods.RetrievePropertiesExBody:
		if r.Res != nil && r.Res.Returnval != nil {
			objects = r.Res.Returnval.Objects
		}
	case *methods.RetrievePropertiesBody:
		if r.Res != nil {
			objects = r.Res.Returnval
		}
	}
	for _, o := range objects {
		for _, m := range o.MissingSet {
			if _, ok := m.Fault.Fault.(*types.NotAuthenticated); ok {
				return true
			}
		}
	}
	return false
}

// relogin logs in again unless another caller already did since gen.
func (r *reloginRoundTripper) relogin(ctx context.Context, gen int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gen.Load() != gen {
		return nil // someone else logged in meanwhile
	}
	_, err := methods.Login(ctx, r.next, &types.Login{This: r.sm, UserName: r.user, Password: r.password})
	if err != nil {
		return fmt.Errorf("log in again as %q: %w", r.user, err)
	}
	r.gen.Add(1)
	r.relogins.Add(1)
	// One line for the session vCenter ended (expired, terminated):
	// INFO, the client recovered by itself. After a restart the outage's
	// lines tell it (Client.note): DEBUG here.
	level := slog.LevelInfo
	if r.quiet != nil && r.quiet() {
		level = slog.LevelDebug
	}
	r.log.Log(ctx, level, "vcenter session ended by vcenter: logged in again", "user", r.user)
	return nil
}

// generation is the session generation; session-scoped objects (views)
// created under another generation are gone.
func (r *reloginRoundTripper) generation() int64 { return r.gen.Load() }
