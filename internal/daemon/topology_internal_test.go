package daemon

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// TestTopologyTemplateProblemLoggedOnceUntilResolved: a configured template
// that does not exist is one ERROR line naming its key, a WARN status line
// (a missing template fails only its model's jobs) while it lasts, not
// logged again by the next check, and one INFO line once the template
// exists; the line is then OK and names what resolved. It fails if a
// check logged every problem again, or never cleared one. Not parallel
// (see TestInventoryLine).
func TestTopologyTemplateProblemLoggedOnceUntilResolved(t *testing.T) {
	env := vcsimtest.Start(t, vcsimtest.Options{})
	cfg := env.Config()
	cfg.GuestCredentials = []config.GuestCredential{{ModelVMWare: vcsimtest.DefaultTemplate}, {ModelVMWare: "ubuntu24"}}
	var logs testutil.SyncBuffer
	topo := &topology{vc: env.Client, cfg: cfg, log: slog.New(slog.NewTextHandler(&logs, nil))}
	ctx := context.Background()

	assert.Equal(t, "not checked yet", topo.line().Value)
	require.True(t, topo.check(ctx), "a problem: check again")
	require.True(t, topo.check(ctx))
	l := topo.line()
	assert.Equal(t, sdk.MonitoringStatusWarn, l.Status)
	assert.Equal(t, `hatchery.vsphere.guestCredentials[1].modelVMWare: no template "ubuntu24" in datacenter "DC0"; templates: debian12`, l.Value)
	assert.Equal(t, 1, strings.Count(logs.String(), "level=ERROR"), logs.String())
	assert.Contains(t, logs.String(), "setting=hatchery.vsphere.guestCredentials[1].modelVMWare")

	env.AddTemplate(vcsimtest.Template{Name: "ubuntu24"})
	require.False(t, topo.check(ctx), "no problem left")
	l = topo.line()
	assert.Equal(t, sdk.MonitoringStatusOK, l.Status, l.Value)
	assert.Contains(t, l.Value, "resolved: datastoreString=/DC0/datastore/LocalDS_0, folderString=/DC0/vm, guestCredentials[0].modelVMWare=debian12, guestCredentials[1].modelVMWare=ubuntu24")
	assert.Equal(t, 1, strings.Count(logs.String(), `level=INFO msg="vcenter topology problem resolved" setting=hatchery.vsphere.guestCredentials[1].modelVMWare`), logs.String())
	assert.Equal(t, 1, strings.Count(logs.String(), "level=ERROR"))
	assert.NotContains(t, logs.String(), "level=WARN")
}

// TestTopologyNotCheckedWhileVCenterDownIsNotOK: before its first check,
// with vCenter not connected (nothing answers at its address), the
// topology line is not OK: nothing was checked and nothing can be. Not
// parallel (see TestInventoryLine: a paused test counts among the
// goroutines TestStartWithUnreachableVCenter finds left).
func TestTopologyNotCheckedWhileVCenterDownIsNotOK(t *testing.T) {
	c := vcenter.New(vcenter.Config{Endpoint: vcsimtest.FreeAddr(t), User: "u", Password: "p", Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { c.Close(context.Background()) })
	cfg := config.Default()
	topo := &topology{vc: c, cfg: &cfg, log: slog.New(slog.DiscardHandler)}
	l := topo.line()
	assert.Equal(t, sdk.MonitoringStatusWarn, l.Status, l.Value)
	assert.Equal(t, "not checked yet: vCenter not connected or not answering", l.Value)
}

// TestVCenterLineNamesRefusedCredentials: a login vCenter refused for its
// credentials is an alert naming the user and the keys to fix, never the
// password, and not "not connected" as an outage reads. Not parallel
// (above).
func TestVCenterLineNamesRefusedCredentials(t *testing.T) {
	addr := vcsimtest.FreeAddr(t)
	vcsimtest.ServeVPX(t, addr, "svc@vsphere.local", "right-secret")
	c := vcenter.New(vcenter.Config{Endpoint: addr, User: "svc@vsphere.local", Password: "wrong-secret", Insecure: true, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { c.Close(context.Background()) })
	require.Error(t, c.Connect(context.Background()))
	l := vcenterLine(c.Status())
	assert.Equal(t, sdk.MonitoringStatusAlert, l.Status)
	assert.Equal(t, addr+` refused the credentials of user "svc@vsphere.local" (hatchery.vsphere.user, hatchery.vsphere.password; 1 attempts, retried every 15m0s so as not to lock the account): fix them and restart`, l.Value)
	assert.NotContains(t, l.Value, "secret")
}
