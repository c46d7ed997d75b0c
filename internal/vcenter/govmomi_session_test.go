package vcenter_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

func TestTLSVerification(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{NoTemplates: true})

	_, err := env.TryClient(func(c *vcenter.Config) { c.CAFile = "" })
	require.Error(t, err, "a self-signed vCenter is refused without insecure or a CA file")
	assert.Contains(t, err.Error(), "certificate")

	_, err = env.TryClient(func(c *vcenter.Config) { c.CAFile = "/nonexistent/ca.pem" })
	require.Error(t, err)
	assert.Contains(t, err.Error(), `load vcenter ca file "/nonexistent/ca.pem"`)

	c, err := env.TryClient(func(c *vcenter.Config) { c.CAFile, c.Insecure = "", true })
	require.NoError(t, err, "insecure is an explicit opt-in")
	_, err = c.ListVirtualMachines(testCtx(t))
	require.NoError(t, err)

	// env.Client itself was built with CAFile and verification on.
	_, err = env.Client.ListVirtualMachines(testCtx(t))
	require.NoError(t, err)
}

func TestPasswordWithSpecialCharactersNeverLeaks(t *testing.T) {
	t.Parallel()
	const secret = "p@ss:w/rd%?"
	env := vcsimtest.Start(t, vcsimtest.Options{Password: secret, NoTemplates: true})
	require.Equal(t, secret, env.Password)
	_, err := env.Client.LoadResourcePool(testCtx(t))
	require.NoError(t, err, "login with a password that breaks a concatenated URL")

	wrong := secret + "#x"
	_, err = env.TryClient(func(c *vcenter.Config) { c.Password = wrong })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "log in to vcenter")
	assert.NotContains(t, err.Error(), wrong)
	assert.NotContains(t, err.Error(), url.QueryEscape(wrong))

	// An endpoint carrying user information: ignored, and never echoed.
	_, err = env.TryClient(func(c *vcenter.Config) {
		c.Endpoint = "https://admin:" + secret + "@[::1" // unparseable
	})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), secret)
	assert.NotContains(t, err.Error(), url.QueryEscape(secret))
}

func TestEndpointForms(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{NoTemplates: true})
	u, err := url.Parse(env.Endpoint)
	require.NoError(t, err)
	for name, ep := range map[string]string{
		"url":            env.Endpoint,
		"url with creds": env.URL.String(),
		"host:port":      u.Host,
		"url no path":    "https://" + u.Host,
	} {
		c, err := env.TryClient(func(c *vcenter.Config) { c.Endpoint = ep })
		require.NoError(t, err, name)
		_, err = c.LoadFolder(testCtx(t))
		require.NoError(t, err, name)
	}
	_, err = env.TryClient(func(c *vcenter.Config) { c.Endpoint = "" })
	require.Error(t, err)
	_, err = env.TryClient(func(c *vcenter.Config) { c.Endpoint = "ftp://" + u.Host })
	require.Error(t, err)
}

func TestReloginAfterSessionTerminated(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testCtx(t)
	c := env.Client
	vm := cloneWorker(t, ctx, env, "worker-1", "")
	_, err := c.ListVirtualMachines(ctx) // builds the session-scoped view
	require.NoError(t, err)

	env.TerminateSession(c)
	// PowerOn needs an authenticated session (vcsim lets property reads
	// through without one): the client logs in again and retries.
	require.NoError(t, c.StartVirtualMachine(ctx, vim.RefOf(vm)))
	assert.Equal(t, int64(1), c.Relogins())
	assert.Equal(t, types.VirtualMachinePowerStatePoweredOn, env.MustInspect("worker-1").PowerState)

	// The container view died with the old session: it is rebuilt.
	vms, err := c.ListVirtualMachines(ctx)
	require.NoError(t, err)
	assert.Len(t, vms, 2)

	env.TerminateSession(c)
	vms, err = c.ListVirtualMachines(ctx)
	require.NoError(t, err)
	assert.Len(t, vms, 2)
	assert.Equal(t, int64(2), c.Relogins())
}

func TestRequestTimeoutBoundsEachRequest(t *testing.T) {
	t.Parallel()
	// A vCenter that accepts requests and never answers. (vcsim's fault
	// injection delay races under -race in v0.56.0, so it is not used.)
	release := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv.Listener = l
	srv.Start()
	t.Cleanup(func() { close(release); srv.Close() })

	ctx := testCtx(t)
	start := time.Now()
	_, err = vcenter.Dial(ctx, vcenter.Config{
		Endpoint: srv.URL, User: "u", Password: "p", RequestTimeout: 100 * time.Millisecond,
	})
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 5*time.Second)
}

func TestSOAPStatsCountRequestsAndBytes(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{NoTemplates: true})
	ctx := testCtx(t)
	c := env.Client
	s := c.Stats()
	assert.Equal(t, int64(1), s["RetrieveServiceContent"].Requests)
	assert.Equal(t, int64(1), s["Login"].Requests)
	login := s["Login"]
	assert.Positive(t, login.RequestBytes)
	assert.Positive(t, login.ResponseBytes)

	before := c.Stats()
	_, err := c.LoadResourcePool(ctx)
	require.NoError(t, err)
	delta := c.Stats().Sub(before)
	assert.Positive(t, delta.Total().Requests)
	assert.Positive(t, delta.Total().ResponseBytes)
	for method := range delta {
		assert.False(t, strings.HasSuffix(method, "Body"), method)
		assert.NotEqual(t, "unknown", method)
	}
}

func TestCloseLogsOut(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{NoTemplates: true})
	c := env.NewClient(nil)
	ctx := testCtx(t)
	c.Close(ctx)
	c.Close(ctx) // idempotent
	assert.Equal(t, int64(1), c.Stats()["Logout"].Requests)
	_, err := c.LoadResourcePool(ctx)
	require.Error(t, err, "a closed client does not log in again")
}
