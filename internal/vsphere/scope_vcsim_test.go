package vsphere_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vsphere"
)

// TestVcsimScopedHatcheryClonesOnlyTemplatesOfItsScope: with
// templateFolders set, a V2 model naming the template of the template
// folder spawns (its VM lands in the hatchery's folder), and a V2 model
// naming a template of another team's folder fails before any clone:
// the template is looked for in the scope only (the inventory holds no
// other; a lookup by name, vcenter.ErrOutOfScope).
// Unscoped, the second template was found by name in the whole
// datacenter and cloned.
func TestVcsimScopedHatcheryClonesOnlyTemplatesOfItsScope(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{Folder: "/DC0/vm/cds", TemplateFolder: "/DC0/vm/templates"})
	env.AddTemplate(vcsimtest.Template{Name: "team-secrets", Folder: "/DC0/vm/team-a"})
	cfg := env.Config()
	require.Equal(t, []string{"/DC0/vm/templates"}, cfg.TemplateFolders)
	cfg.CommonConfiguration.Name = "hatch-scope"
	// A static address: the simulator gives one to a customized clone only.
	cfg.IPRange, cfg.Gateway, cfg.SubnetMask, cfg.DNS = "192.168.78.10/24", "192.168.78.1", "255.255.255.0", "192.168.78.2"
	inv := env.Inventory(cfg)
	rec := &viRecordingClient{Port: env.Client}
	h, err := vsphere.New(vsphere.Options{Config: cfg, Client: rec, Inventory: inv})
	require.NoError(t, err)
	ctx := env.Context()

	require.NoError(t, h.SpawnWorker(ctx, viV2Args("hatch-scope", "w-in-scope", "run-1", "")))
	c := rec.clone(t, "w-in-scope")
	require.NoError(t, c.Err)
	folder, err := viFinder(t, env).Folder(ctx, "/DC0/vm/cds")
	require.NoError(t, err)
	assert.Equal(t, folder.Reference(), c.Folder, "cloned into the hatchery's folder")

	args := viV2Args("hatch-scope", "w-out-of-scope", "run-2", "")
	args.Model.VSphereSpec.Image = "team-secrets"
	err = h.SpawnWorker(ctx, args)
	require.Error(t, err)
	// The inventory, which holds the scope only, knows no such template.
	assert.ErrorContains(t, err, `template "team-secrets" of model "vi-model" not found`)
	rec.mu.Lock()
	for _, cl := range rec.clones {
		assert.NotEqual(t, "w-out-of-scope", cl.Name, "no clone of a template outside the scope")
	}
	rec.mu.Unlock()
}

// adminCloneOurs clones the default template into the folder at path
// with the admin client (as an earlier version of the hatchery did),
// carrying a record of warmVcsimHatchery made at created.
func adminCloneOurs(t *testing.T, env *vcsimtest.Env, path, name string, created time.Time) {
	t.Helper()
	ctx := env.Context()
	f := viFinder(t, env)
	tpl, err := f.VirtualMachine(ctx, vcsimtest.DefaultTemplate)
	require.NoError(t, err)
	folder, err := f.Folder(ctx, path)
	require.NoError(t, err)
	pool, err := f.ResourcePool(ctx, env.ResourcePool)
	require.NoError(t, err)
	poolRef := pool.Reference()
	cfg := &types.VirtualMachineConfigSpec{}
	vim.ApplyRecord(cfg, inventory.Annotation{HatcheryName: warmVcsimHatchery, WorkerName: name, Created: created.UTC().Truncate(time.Second)}.Record())
	task, err := tpl.Clone(ctx, folder, name, types.VirtualMachineCloneSpec{Location: types.VirtualMachineRelocateSpec{Pool: &poolRef}, Config: cfg})
	require.NoError(t, err)
	require.NoError(t, task.Wait(ctx))
}

// TestVcsimUpgradeKeepsOldDefaultVMsInSight: an operator upgrading with
// config new's defaults (folderString and templateFolders empty) keeps
// the VMs the earlier version made where its default put them, the VM
// folder's top level: the new version's inventory holds an expired
// worker of ours left there, and its cleanup pass destroys it; a VM of
// ours an operator moved by hand into a team's folder is out of the scope
// and left alone, and so is every VM of that folder
// (docs/inventory-watch.md, "Upgrading from a version that read the whole
// VM folder").
func TestVcsimUpgradeKeepsOldDefaultVMsInSight(t *testing.T) {
	t.Parallel()
	env := warmVcsimEnv(t)
	old := time.Now().Add(-3 * time.Hour) // beyond workerTTL (120 min)
	adminCloneOurs(t, env, vcsimtest.FolderPath, "worker-left-by-v1", old)
	env.AddForeignVMsIn("/DC0/vm/team-a", "team-a-vm-", 3) // makes the folder
	adminCloneOurs(t, env, "/DC0/vm/team-a", "worker-moved-by-hand", old)
	cfg := warmVcsimConfig(env)
	cfg.FolderString, cfg.TemplateFolders = "", nil
	h, inv := hotVcsimHatchery(t, env, cfg)
	ctx := env.Context()
	env.WaitInventory(inv)
	vms, err := inv.VMs(ctx)
	require.NoError(t, err)
	var names []string
	for _, v := range vms {
		names = append(names, v.Name)
	}
	assert.ElementsMatch(t, []string{"debian12", "ubuntu", "worker-left-by-v1"}, names, "the VM folder's top level, nothing of team-a")

	h.WarmKillAwolServersPass(ctx)
	_, left := env.Inspect("worker-left-by-v1")
	assert.False(t, left, "the expired worker the earlier version left is cleaned up")
	env.MustInspect("worker-moved-by-hand")
	env.MustInspect("team-a-vm-00000")
}
