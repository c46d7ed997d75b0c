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
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
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
	require.ErrorIs(t, err, vcenter.ErrNotConnected)
	assert.Contains(t, err.Error(), addr+"): still connecting")
	err = c.StartVirtualMachine(ctx, vmRef("vm-1"))
	require.ErrorIs(t, err, vcenter.ErrNotConnected)
	st := c.Status()
	assert.False(t, st.Connected)
	assert.Zero(t, st.Attempts)
	assert.NoError(t, st.DialErr)
	assert.Equal(t, addr, st.Host)
	assert.False(t, c.Up())

	dialErr := c.Connect(ctx)
	require.Error(t, dialErr)
	_, _, err = c.ProbeInventory(ctx, nil)
	require.ErrorIs(t, err, vcenter.ErrNotConnected)
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
	require.ErrorIs(t, c.Connect(ctx), vcenter.ErrNotConnected)
	_, err = c.ListVirtualMachines(ctx)
	require.ErrorIs(t, err, vcenter.ErrNotConnected)
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
