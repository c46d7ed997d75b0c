package vcenter_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

const (
	connUser     = "hatchery@vsphere.local"
	connPassword = "s3cret:pass@word"
)

// TestCallsBeforeConnectionFailAtOnce: a client exists before vCenter
// answers; until it connected, every call fails at once with
// ErrNotConnected, naming the endpoint and the last connection error
// (never the password), and Status says so.
func TestCallsBeforeConnectionFailAtOnce(t *testing.T) {
	t.Parallel()
	addr := vcsimtest.FreeAddr(t)
	c := vcenter.New(vcenter.Config{Endpoint: addr, User: connUser, Password: connPassword, Logger: slog.New(slog.DiscardHandler)})
	ctx := testCtx(t)

	_, err := c.ListVirtualMachines(ctx)
	require.ErrorIs(t, err, vctypes.ErrNotConnected)
	assert.Contains(t, err.Error(), addr+"): still connecting")
	err = c.StartVirtualMachine(ctx, vim.RefOf(vmRef("vm-1")))
	require.ErrorIs(t, err, vctypes.ErrNotConnected)
	st := c.Status()
	assert.False(t, st.Connected)
	assert.Zero(t, st.Attempts)
	assert.NoError(t, st.DialErr)
	assert.Equal(t, addr, st.Host)
	assert.False(t, c.Up())

	dialErr := c.Connect(ctx)
	require.Error(t, dialErr)
	_, _, err = c.ProbeInventory(ctx, nil)
	require.ErrorIs(t, err, vctypes.ErrNotConnected)
	assert.Contains(t, err.Error(), dialErr.Error(), "the last connection error")
	assert.NotContains(t, err.Error(), connPassword)
	st = c.Status()
	assert.Equal(t, 1, st.Attempts)
	assert.Equal(t, dialErr, st.DialErr)
	select {
	case <-c.Ready():
		t.Fatal("ready before a connection")
	default:
	}

	// Closed before it ever connected: it stays so.
	c.Close(ctx)
	require.ErrorIs(t, c.Connect(ctx), vctypes.ErrNotConnected)
	_, err = c.ListVirtualMachines(ctx)
	require.ErrorIs(t, err, vctypes.ErrNotConnected)
	assert.Contains(t, err.Error(), "closed")
}

// TestRunConnectsOnceVCenterAnswers: Run retries with its back-off while
// vCenter does not answer (logging each retry, never the password), then
// connects when vCenter comes up on the same address: Ready is closed,
// OnConnect called once, Run returns and calls work.
func TestRunConnectsOnceVCenterAnswers(t *testing.T) {
	t.Parallel()
	addr := vcsimtest.FreeAddr(t)
	var logs testutil.SyncBuffer
	connected := make(chan struct{}, 2)
	c := vcenter.New(vcenter.Config{
		Endpoint: addr, User: connUser, Password: connPassword, Insecure: true,
		DialBackoffMin: 10 * time.Millisecond, DialBackoffMax: 40 * time.Millisecond,
		Logger:    slog.New(slog.NewTextHandler(&logs, nil)),
		OnConnect: func() { connected <- struct{}{} },
	})
	t.Cleanup(func() { c.Close(context.Background()) })
	ctx := testCtx(t)
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		c.Run(ctx)
	}()

	require.Eventually(t, func() bool { return c.Status().Attempts >= 3 }, 10*time.Second, 5*time.Millisecond)
	assert.False(t, c.Connected())
	assert.Contains(t, logs.String(), `msg="vcenter not reachable, retrying"`)
	assert.Contains(t, logs.String(), "retry_in=40ms", "the back-off doubles up to its bound")

	vcsimtest.ServeVPX(t, addr, connUser, connPassword)
	select {
	case <-c.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("not connected 10s after vCenter came up")
	}
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return once connected")
	}
	assert.Len(t, connected, 1, "OnConnect once")
	assert.True(t, c.Connected())
	assert.True(t, c.Up())
	st := c.Status()
	assert.NoError(t, st.DialErr)
	assert.Equal(t, connUser, st.User)
	_, err := c.ListVirtualMachines(ctx)
	require.NoError(t, err)
	assert.Contains(t, logs.String(), `msg="vcenter connected"`)
	assert.NotContains(t, logs.String(), connPassword)
}

// TestStatusNotesUnreachableVCenter: a call that gets no answer (transport
// failure) makes the connected client unreachable (Up false, Status names
// the error, one WARN); the first answer after it makes it reachable
// again, with no second connection.
func TestStatusNotesUnreachableVCenter(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{NoTemplates: true})
	target, err := url.Parse(env.Endpoint)
	require.NoError(t, err)
	p := testutil.StartProxy(t, target.Host)
	var logs testutil.SyncBuffer
	c := env.NewClient(func(cfg *vcenter.Config) {
		cfg.Endpoint = "https://" + p.Addr() + "/sdk"
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	ctx := testCtx(t)
	_, err = c.ListVirtualMachines(ctx)
	require.NoError(t, err)
	require.True(t, c.Up())

	p.Pause()
	_, err = c.ListVirtualMachines(ctx)
	require.Error(t, err)
	var ne net.Error
	require.True(t, errors.As(err, &ne), "a transport error: %v", err)
	assert.False(t, c.Up())
	assert.True(t, c.Connected(), "still connected: the session is not lost")
	st := c.Status()
	require.Error(t, st.Unreachable)
	assert.False(t, st.Since.IsZero())
	_, _ = c.ListVirtualMachines(ctx) // still unreachable: no second WARN
	assert.Equal(t, 1, strings.Count(logs.String(), `msg="vcenter unreachable"`))

	p.Resume()
	_, err = c.ListVirtualMachines(ctx)
	require.NoError(t, err)
	assert.True(t, c.Up())
	assert.NoError(t, c.Status().Unreachable)
	assert.Contains(t, logs.String(), `msg="vcenter reachable again"`)
	assert.NotContains(t, logs.String(), env.Password)
}

// vmRef is the reference of a VM by its managed object id.
func vmRef(id string) types.ManagedObjectReference {
	return types.ManagedObjectReference{Type: "VirtualMachine", Value: id}
}

// TestLoginRefusedIsNotAnOutage: against vcsim with a wrong password, Run
// tells the refusal of the credentials from an outage by its fault
// (InvalidLogin): one ERROR naming the user, never the password, a wait
// of LoginRefusedRetry instead of the dial back-off, Info at the later
// refusals, and Status says LoginRefused. The dial back-off here is 1 ms:
// with the old rule each refusal was retried at once as "vcenter not
// reachable". The retry is 50 ms so that the test sees the second
// refusal; its log line carries the wait decided.
func TestLoginRefusedIsNotAnOutage(t *testing.T) {
	t.Parallel()
	addr := vcsimtest.FreeAddr(t)
	vcsimtest.ServeVPX(t, addr, connUser, connPassword)
	const wrong = "wr0ng:pass@word"
	var logs testutil.SyncBuffer
	c := vcenter.New(vcenter.Config{
		Endpoint: addr, User: connUser, Password: wrong, Insecure: true,
		DialBackoffMin: time.Millisecond, DialBackoffMax: time.Millisecond,
		LoginRefusedRetry: 50 * time.Millisecond,
		Logger:            slog.New(slog.NewTextHandler(&logs, nil)),
	})
	t.Cleanup(func() { c.Close(context.Background()) })
	ctx, cancel := context.WithCancel(testCtx(t))
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		c.Run(ctx)
	}()
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), `msg="vcenter still refuses the credentials"`) }, 10*time.Second, 5*time.Millisecond)
	cancel()
	<-ran

	out := logs.String()
	assert.Equal(t, 1, strings.Count(out, "level=ERROR"), out)
	assert.Contains(t, out, `level=ERROR msg="vcenter refused the credentials, retrying rarely: a wrong password retried often locks the account" endpoint=`+addr+` user=`+connUser+` attempt=1 retry_in=50ms`)
	assert.Contains(t, out, `level=INFO msg="vcenter still refuses the credentials"`)
	assert.NotContains(t, out, "vcenter not reachable", "a refusal is not an outage")
	assert.NotContains(t, out, wrong)
	assert.NotContains(t, out, "level=WARN")

	st := c.Status()
	assert.False(t, st.Connected)
	assert.True(t, st.LoginRefused)
	assert.Equal(t, 50*time.Millisecond, st.LoginRetry)
	assert.True(t, vcenter.IsLoginRefused(st.DialErr))
	assert.NotContains(t, st.DialErr.Error(), wrong)
	// Attempts: one per LoginRefusedRetry, not one per millisecond.
	assert.Less(t, st.Attempts, 10)
}

// TestLoginRefusedIsClassifiedByFault: IsLoginRefused is the InvalidLogin
// fault, however wrapped; an unreachable vCenter or another fault is not.
func TestLoginRefusedIsClassifiedByFault(t *testing.T) {
	t.Parallel()
	assert.False(t, vcenter.IsLoginRefused(nil))
	assert.False(t, vcenter.IsLoginRefused(errors.New("Login failure")), "never by the text")
	addr := vcsimtest.FreeAddr(t)
	c := vcenter.New(vcenter.Config{Endpoint: addr, User: connUser, Password: connPassword, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { c.Close(context.Background()) })
	err := c.Connect(testCtx(t))
	require.Error(t, err)
	assert.False(t, vcenter.IsLoginRefused(err), "no answer is not a refusal")
	assert.False(t, c.Status().LoginRefused)
}
