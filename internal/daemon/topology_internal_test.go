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
