package vcenter

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/vmware/govmomi/vim25/soap"
)

// Ready is closed once the client first connected.
func (c *Client) Ready() <-chan struct{} { return c.ready }

// Connected tells whether the client connected (and Close was not called).
func (c *Client) Connected() bool { return c.up.Load() && !c.closed.Load() }

// Up tells whether the client is connected and vCenter answered its last
// call: the "vCenter" status line is OK.
func (c *Client) Up() bool {
	if !c.Connected() {
		return false
	}
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	return c.unreachable == nil
}

// Status is the state of the connection, for the "vCenter" status line.
// Its errors never carry the password.
type Status struct {
	// Host is the endpoint's host[:port].
	Host string
	// User is the user the client logs in as.
	User string
	// Connected is true once the client connected (until Close).
	Connected bool
	// Attempts counts the connection attempts so far.
	Attempts int
	// DialErr is the last connection error while not connected.
	DialErr error
	// LoginRefused tells that DialErr is vCenter refusing the credentials
	// (IsLoginRefused): not an outage; Run retries only every
	// LoginRetry.
	LoginRefused bool
	LoginRetry   time.Duration
	// Unreachable is the last transport error of a call (vCenter did not
	// answer), nil once vCenter answered again; Since is when it started.
	Unreachable error
	Since       time.Time
}

// Status returns the connection's state.
func (c *Client) Status() Status {
	connected := c.Connected()
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	return Status{
		Host: c.host, User: c.cfg.User, Connected: connected, Attempts: c.attempts, DialErr: c.dialErr,
		LoginRefused: !connected && IsLoginRefused(c.dialErr), LoginRetry: c.cfg.LoginRefusedRetry,
		Unreachable: c.unreachable, Since: c.since,
	}
}

// IsLoginRefused tells whether err is vCenter refusing the login for its
// credentials (vim.IsLoginRefused: the InvalidLogin fault).
func IsLoginRefused(err error) bool { return vim.IsLoginRefused(err) }

// notConnected is nil once the client connected, else vctypes.ErrNotConnected
// (wrapped, with the last connection error): every Port call starts with
// it, so that a call before the connection fails at once.
func (c *Client) notConnected() error {
	if c.up.Load() && !c.closed.Load() {
		return nil
	}
	if c.closed.Load() {
		return fmt.Errorf("%w (%s): closed", vctypes.ErrNotConnected, c.host)
	}
	c.stateMu.Lock()
	err := c.dialErr
	c.stateMu.Unlock()
	if err != nil {
		return fmt.Errorf("%w (%s): %w", vctypes.ErrNotConnected, c.host, err)
	}
	return fmt.Errorf("%w (%s): still connecting", vctypes.ErrNotConnected, c.host)
}

// Run connects the client: it tries until it succeeds or ctx ends, waiting
// between attempts from DialBackoffMin doubling to DialBackoffMax, then
// calls OnConnect and returns. A login vCenter refused for its
// credentials is not an outage: it is logged at ERROR once (then at Info
// at each later refusal) and retried only every LoginRefusedRetry, so that
// a wrong password does not lock the account (DefaultLoginRefusedRetry). Once connected the client never needs
// another connection: it keeps its session alive and logs in again itself
// (reloginRoundTripper).
func (c *Client) Run(ctx context.Context) {
	delay := c.cfg.DialBackoffMin
	refused := false // a refusal of the credentials was logged at ERROR
	for {
		err := c.Connect(ctx)
		if err == nil {
			c.log.Info("vcenter connected", "endpoint", c.host)
			if c.cfg.OnConnect != nil {
				c.cfg.OnConnect()
			}
			return
		}
		if ctx.Err() != nil || c.closed.Load() {
			return
		}
		n := c.Status().Attempts
		var dnf *DatacenterNotFoundError
		wait := delay
		if IsLoginRefused(err) {
			wait = c.cfg.LoginRefusedRetry
			args := []any{"endpoint", c.host, "user", c.cfg.User, "attempt", n, "retry_in", wait, logkey.Err, err}
			if !refused {
				c.log.Error("vcenter refused the credentials, retrying rarely: a wrong password retried often locks the account", args...)
			} else {
				c.log.Info("vcenter still refuses the credentials", args...)
			}
			refused = true
		} else if errors.As(err, &dnf) {
			// vCenter answered and the login worked: a configuration mistake.
			c.log.Error("vcenter datacenter not found, retrying", "endpoint", c.host, "datacenter", dnf.Name, "existing", strings.Join(dnf.Existing, ", "), "attempt", n, "retry_in", delay)
		} else {
			c.log.Warn("vcenter not reachable, retrying", "endpoint", c.host, "attempt", n, "retry_in", delay, logkey.Err, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if wait == delay {
			delay = min(delay*2, c.cfg.DialBackoffMax)
		}
	}
}

// reachabilityRoundTripper notes, for Status, whether vCenter answered
// each call: only a transport failure (no answer) makes it unreachable, a
// fault is an answer. A call ended by its own ctx says nothing.
type reachabilityRoundTripper struct {
	next soap.RoundTripper
	c    *Client
}

// RoundTrip implements soap.RoundTripper.
func (r *reachabilityRoundTripper) RoundTrip(ctx context.Context, req, res soap.HasFault) error {
	sent := time.Now()
	err := r.next.RoundTrip(ctx, req, res)
	if ctx.Err() == nil {
		r.c.note(err, sent)
	}
	return err
}

// note records the outcome of a call: a transport error starts (or
// continues) the unreachable state, anything else ends it. These are the
// two lines of an outage, a vCenter restart included
// (docs/operations.md#when-vcenter-restarts): `vcenter unreachable`
// (WARN) once when it starts, `vcenter reachable again` (INFO) once when
// it ends, with session=renewed when the client had to log in again
// meanwhile (vCenter restarted: every session ended). sent is when the
// call was sent: only a call sent after the outage began ends it, and
// only one sent after vCenter last answered again starts another: calls
// in flight at either moment end in any order (an answer read just before
// the connections broke, noted after a failure), which would otherwise
// log a flap of both lines.
func (c *Client) note(err error, sent time.Time) {
	transport := vim.IsTransport(err)
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	switch {
	case transport && c.unreachable == nil && sent.Before(c.backAt):
		// Sent before vCenter answered again: old news.
	case !transport && c.unreachable != nil && sent.Before(c.since):
		// Sent before the outage began: says nothing of vCenter now.
	case transport && c.unreachable == nil:
		c.unreachable, c.since = err, time.Now()
		c.log.Warn("vcenter unreachable", "endpoint", c.host, logkey.Err, err)
	case transport:
		c.unreachable = err
	case c.unreachable != nil:
		c.unreachable = nil
		c.backAt = time.Now()
		attrs := []any{"endpoint", c.host, "down_for", c.backAt.Sub(c.since).Round(time.Millisecond).String()}
		if c.renewed {
			attrs = append(attrs, "session", "renewed")
		}
		c.renewed = false
		c.log.Info("vcenter reachable again", attrs...)
	}
}

// reloginQuiet is the re-login's hook (reloginRoundTripper.quiet): it
// tells whether the re-login is part of an outage the two lines of note
// tell already, so that the re-login logs at DEBUG: vCenter is unreachable
// now (the re-login is the first call to get through: vCenter restarted;
// the `reachable again` line then says session=renewed), or it came back
// less than reloginOutageWindow ago.
func (c *Client) reloginQuiet() bool {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	if c.unreachable != nil {
		c.renewed = true
		return true
	}
	return !c.backAt.IsZero() && time.Since(c.backAt) < reloginOutageWindow
}

// endpointHost is the endpoint's host[:port], never its user information.
func endpointHost(endpoint string) string {
	e := strings.TrimSpace(endpoint)
	if !strings.Contains(e, "://") {
		e = "https://" + e
	}
	u, err := url.Parse(e)
	if err != nil || u.Host == "" {
		return "vcenter"
	}
	return u.Host
}
