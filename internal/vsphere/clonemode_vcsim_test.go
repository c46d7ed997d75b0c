package vsphere_test

import (
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vsphere"
)

// TestVcsimLinkedCloneFromTemplateSnapshot: a template with a current
// snapshot is cloned as a linked clone: the clone spec as sent carries
// that snapshot and createNewChildDiskBacking, and the simulator accepts
// it. A disk-growing flavor on the same template gets a full clone
// (moveChildMostDiskBacking, no snapshot) with the reason logged.
//
// vcsim v0.56.0 snapshots a template (CreateSnapshot_Task has no template
// check; a real vCenter keeps the snapshot taken before the VM was marked
// as template) and accepts a clone spec with a snapshot and
// createNewChildDiskBacking, but ignores both (it copies the disks): the
// spec as sent is what is checked here, as in the placement test.
func TestVcsimLinkedCloneFromTemplateSnapshot(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := env.Context()
	const hatch = "hatch-vi-linked"

	tpl := env.MustInspect(vcsimtest.DefaultTemplate)
	tplObj := object.NewVirtualMachine(env.Admin.Client, tpl.Ref)
	task, err := tplObj.CreateSnapshot(ctx, "base", "linked clone base", false, false)
	require.NoError(t, err)
	require.NoError(t, task.Wait(ctx))
	var o mo.VirtualMachine
	require.NoError(t, tplObj.Properties(ctx, tpl.Ref, []string{"snapshot"}, &o))
	require.NotNil(t, o.Snapshot)
	require.NotNil(t, o.Snapshot.CurrentSnapshot)
	snap := *o.Snapshot.CurrentSnapshot

	client := &viRecordingClient{Port: env.NewClient(nil)}
	cfg := env.Config()
	cfg.CommonConfiguration.Name = hatch
	// A static range: the simulator reports a guest IP only from a fixed-IP
	// customization.
	cfg.IPRange, cfg.Gateway, cfg.SubnetMask, cfg.DNS = "192.168.78.10/24", "192.168.78.1", "255.255.255.0", "192.168.78.2"
	cfg.Flavors = []config.Flavor{{Name: "big-disk", CPUs: 1, MemoryMB: 512, DiskSizeGB: 4096}}
	var logs testutil.SyncBuffer
	h, err := vsphere.New(vsphere.Options{Config: cfg, Client: client, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)

	require.NoError(t, h.SpawnWorker(ctx, viV2Args(hatch, "vi-linked-1", "run-linked-1", "")))
	rec := client.clone(t, "vi-linked-1")
	require.NoError(t, rec.Err)
	assert.Equal(t, vim.RefOf(snap), rec.Req.Snapshot, "linked clone names the snapshot (createNewChildDiskBacking: vim.CloneSpecOf)")

	require.NoError(t, h.SpawnWorker(ctx, viV2Args(hatch, "vi-linked-2", "run-linked-2", "big-disk")))
	rec = client.clone(t, "vi-linked-2")
	require.NoError(t, rec.Err)
	assert.True(t, rec.Req.Snapshot.IsZero(), "a full clone names no snapshot (moveChildMostDiskBacking: vim.CloneSpecOf)")
	out := logs.String()
	assert.Contains(t, out, `detail="flavor \"big-disk\" grows the disk beyond the template's, a linked clone cannot: full clone"`)
	assert.Equal(t, 1, strings.Count(out, "mode=linked"), "the template's linked mode logged once:\n%s", out)
}
