package inventory_test

import (
	"bytes"
	"context"
	"errors"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

const (
	scopeHatchery = "hatch-scope"
	scopeFolder   = "/DC0/vm/cds"
	scopeTpl      = "/DC0/vm/templates"
	teamA         = "/DC0/vm/team-a"
	teamB         = "/DC0/vm/team-b/nested"
)

// scopeClone clones the default template into the folder at path with
// ops, under name, carrying the record of hatchery hatch.
func scopeClone(t *testing.T, ctx context.Context, env *vcsimtest.Env, ops *vcenter.Client, path, name string) types.ManagedObjectReference {
	t.Helper()
	tpl, err := ops.LoadVirtualMachine(ctx, vcsimtest.DefaultTemplate)
	require.NoError(t, err)
	finder := find.NewFinder(env.Admin.Client, true)
	dc, err := finder.Datacenter(ctx, env.Datacenter)
	require.NoError(t, err)
	finder.SetDatacenter(dc)
	folder, err := finder.Folder(ctx, path)
	require.NoError(t, err)
	poolRef, err := ops.LoadResourcePool(ctx)
	require.NoError(t, err)
	ref, err := ops.CloneVirtualMachine(ctx, vctypes.Clone{Template: tpl, Folder: vim.RefOf(folder.Reference()), Name: name, Pool: poolRef,
		Record: inventory.Annotation{HatcheryName: scopeHatchery, WorkerName: name, Created: time.Now().UTC().Truncate(time.Second)}.Record()})
	require.NoError(t, err)
	return vim.MORef(ref)
}

// waitVM refreshes inv until a VM named name is in it (or the deadline).
func waitVM(t *testing.T, env *vcsimtest.Env, inv inventory.Inventory, name string) []inventory.VM {
	t.Helper()
	ctx, cancel := context.WithTimeout(env.Context(), time.Minute)
	defer cancel()
	for {
		env.WaitInventory(inv)
		vms, err := inv.VMs(ctx)
		require.NoError(t, err)
		for _, v := range vms {
			if v.Name == name {
				return vms
			}
		}
		require.NoError(t, ctx.Err(), "vm %q never learnt", name)
	}
}

func names(vms []inventory.VM) []string {
	out := make([]string, len(vms))
	for i, v := range vms {
		out[i] = v.Name
	}
	return out
}

// TestVcsimScopeNeverReadsForeignFolders: with templateFolders set, the
// inventory (in the mode of HATCHERY_VSPHERE_TEST_INVENTORY) learns a VM
// of ours another client clones into the hatchery's folder, sees the
// template of the template folder, and never has a VM of other teams'
// folders on the wire: a recording proxy between its client and the
// simulator holds no reference nor name of theirs in any request or
// response, through its first refresh, idle refreshes and the refreshes
// after the clones — not even a VM carrying our record cloned into a
// team's folder. Before the scope existed, the probe's container view
// (and every listing) carried each of them.
func TestVcsimScopeNeverReadsForeignFolders(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{Folder: scopeFolder, TemplateFolder: scopeTpl})
	ctx := env.Context()
	foreign := env.AddForeignVMsIn(teamA, "team-a-vm-", 6)
	foreign = append(foreign, env.AddForeignVMsIn(teamB, "team-b-vm-", 6)...)
	foreignNames := []string{"team-a-vm-", "team-b-vm-"}

	rec := env.StartRecorder()
	client := rec.NewClient(nil)
	require.True(t, client.TemplateFoldersSet())
	cfg := env.Config()
	cfg.CommonConfiguration.Name = scopeHatchery
	inv := env.InventoryOver(cfg, client)

	vms, err := inv.VMs(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{vcsimtest.DefaultTemplate}, names(vms), "the template folder's template only")
	for range 3 { // idle refreshes
		env.WaitInventory(inv)
	}

	ops := env.NewClient(nil) // another instance, say: clones go around the recorder
	ours := scopeClone(t, ctx, env, ops, scopeFolder, "ours-1")
	stray := scopeClone(t, ctx, env, ops, teamA, "stray-ours")
	foreign = append(foreign, stray)
	foreignNames = append(foreignNames, "stray-ours")
	vms = waitVM(t, env, inv, "ours-1")
	env.WaitInventory(inv)
	vms, err = inv.VMs(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{vcsimtest.DefaultTemplate, "ours-1"}, names(vms))
	for _, v := range vms {
		if v.Name == "ours-1" {
			assert.Equal(t, vim.RefOf(ours), v.Ref)
			assert.True(t, v.OwnedBy(scopeHatchery))
		}
	}

	// A template outside the scope is not found by name either.
	_, err = client.LoadVirtualMachine(ctx, "team-a-vm-00000")
	assert.True(t, errors.Is(err, vcenter.ErrOutOfScope), "%v", err)
	ref, err := client.LoadVirtualMachine(ctx, vcsimtest.DefaultTemplate)
	require.NoError(t, err)
	assert.NotEmpty(t, ref.Value)

	ex := rec.Exchanges()
	require.NotEmpty(t, ex)
	for _, e := range ex {
		for _, ref := range foreign {
			needle := []byte(">" + ref.Value + "<")
			assert.False(t, bytes.Contains(e.Response, needle), "foreign vm %s in a response: %.300s", ref.Value, e.Response)
			assert.False(t, bytes.Contains(e.Request, needle), "foreign vm %s in a request: %.300s", ref.Value, e.Request)
		}
		for _, n := range foreignNames {
			assert.False(t, bytes.Contains(e.Response, []byte(n)), "foreign vm name %s in a response", n)
		}
	}
	t.Logf("%d requests through the recorder, none carrying a foreign vm", len(ex))
}

// TestVcsimDefaultScopeNeverReadsForeignFolders: with the defaults
// (folderString the VM folder, no templateFolders), in each of the three
// inventory modes, the inventory holds the VM folder's top level (the
// template, our VMs, one another instance clones there), and no request
// or response through a recording proxy names a VM of other teams'
// folders (reference or name), not even one carrying our record: the
// default scope is derived from the configuration
// (internal/vcenter/govmomi_scope.go), no longer the datacenter's whole
// VM folder.
func TestVcsimDefaultScopeNeverReadsForeignFolders(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{config.InventoryListing, config.InventoryShared, config.InventoryWatch} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			env := vcsimtest.Start(t, vcsimtest.Options{})
			ctx := env.Context()
			foreign := env.AddForeignVMsIn(teamA, "team-a-vm-", 6)
			foreign = append(foreign, env.AddForeignVMsIn(teamB, "team-b-vm-", 6)...)
			foreignNames := []string{"team-a-vm-", "team-b-vm-"}

			rec := env.StartRecorder()
			client := rec.NewClient(nil)
			require.False(t, client.TemplateFoldersSet())
			cfg := env.Config()
			// env.Config writes the VM folder itself: the default, said.
			require.Equal(t, vcsimtest.FolderPath, cfg.FolderString)
			require.Empty(t, cfg.TemplateFolders)
			cfg.CommonConfiguration.Name = scopeHatchery
			cfg.InventoryMode = mode
			inv := env.InventoryOver(cfg, client)

			vms, err := inv.VMs(ctx)
			require.NoError(t, err)
			assert.ElementsMatch(t, []string{vcsimtest.DefaultTemplate}, names(vms), "the VM folder's top level only")
			for range 3 { // idle refreshes
				env.WaitInventory(inv)
			}

			ops := env.NewClient(nil) // another instance: its clones go around the recorder
			ours := scopeClone(t, ctx, env, ops, env.Folder, "ours-1")
			stray := scopeClone(t, ctx, env, ops, teamA, "stray-ours")
			foreign = append(foreign, stray)
			foreignNames = append(foreignNames, "stray-ours")
			waitVM(t, env, inv, "ours-1")
			env.WaitInventory(inv)
			vms, err = inv.VMs(ctx)
			require.NoError(t, err)
			assert.ElementsMatch(t, []string{vcsimtest.DefaultTemplate, "ours-1"}, names(vms))
			for _, v := range vms {
				if v.Name == "ours-1" {
					assert.Equal(t, vim.RefOf(ours), v.Ref)
					assert.True(t, v.OwnedBy(scopeHatchery))
				}
			}
			ref, err := client.LoadVirtualMachine(ctx, vcsimtest.DefaultTemplate)
			require.NoError(t, err)
			assert.NotEmpty(t, ref.Value)

			ex := rec.Exchanges()
			require.NotEmpty(t, ex)
			for _, e := range ex {
				for _, ref := range foreign {
					needle := []byte(">" + ref.Value + "<")
					assert.False(t, bytes.Contains(e.Response, needle), "foreign vm %s in a response: %.300s", ref.Value, e.Response)
					assert.False(t, bytes.Contains(e.Request, needle), "foreign vm %s in a request: %.300s", ref.Value, e.Request)
				}
				for _, n := range foreignNames {
					assert.False(t, bytes.Contains(e.Response, []byte(n)), "foreign vm name %s in a response", n)
					assert.False(t, bytes.Contains(e.Request, []byte(n)), "foreign vm name %s in a request", n)
				}
			}
			t.Logf("%s: %d requests through the recorder, none carrying a foreign vm", mode, len(ex))
		})
	}
}

// TestVcsimDefaultScopeFindsTemplatesByName: with folderString set and no
// templateFolders, the inventory holds the hatchery's folder and the VM
// folder's top level, not other teams' folders; a template of another
// folder, named, is found without listing any VM (discoverVM) and its
// folder's top level joins the scope: the inventory holds it from the
// next refresh on, and a VM of ours cloned by hand into a team's folder
// stays out of sight (docs/inventory-watch.md, "Scope").
func TestVcsimDefaultScopeFindsTemplatesByName(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{Folder: scopeFolder})
	ctx := env.Context()
	env.AddForeignVMsIn(teamA, "team-a-vm-", 3)
	env.AddForeignVMsIn(teamB, "team-b-vm-", 2)
	env.AddTemplate(vcsimtest.Template{Name: "golden", Folder: teamB})
	cfg := env.Config()
	require.Empty(t, cfg.TemplateFolders)
	cfg.CommonConfiguration.Name = scopeHatchery
	client := env.NewClient(nil)
	inv := env.InventoryOver(cfg, client)
	vms, err := inv.VMs(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{vcsimtest.DefaultTemplate}, names(vms))

	ops := env.NewClient(nil)
	scopeClone(t, ctx, env, ops, scopeFolder, "ours-1")
	scopeClone(t, ctx, env, ops, teamA, "ours-elsewhere")
	vms = waitVM(t, env, inv, "ours-1")
	assert.NotContains(t, names(vms), "ours-elsewhere")

	ref, err := client.LoadVirtualMachine(ctx, "golden")
	require.NoError(t, err)
	assert.NotEmpty(t, ref.Value)
	vms = waitVM(t, env, inv, "golden")
	assert.ElementsMatch(t, []string{vcsimtest.DefaultTemplate, "ours-1", "golden", "team-b-vm-00003", "team-b-vm-00004"}, names(vms),
		"the template's folder, top level only, joins the scope")
	_, err = client.LoadVirtualMachine(ctx, "no-such-template")
	assert.ErrorIs(t, err, vcenter.ErrNoSuchVM)
}

// TestVcsimWholeVMFolderByTemplateFolders: templateFolders naming the VM
// folder itself gives the scope of configurations before the scope
// existed: every VM of the datacenter is listed, a VM of ours cloned
// anywhere is learnt.
func TestVcsimWholeVMFolderByTemplateFolders(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{Folder: scopeFolder, TemplateFolder: vcsimtest.FolderPath})
	ctx := env.Context()
	env.AddForeignVMsIn(teamA, "team-a-vm-", 3)
	env.AddForeignVMsIn(teamB, "team-b-vm-", 2)
	cfg := env.Config()
	require.Equal(t, []string{vcsimtest.FolderPath}, cfg.TemplateFolders)
	cfg.CommonConfiguration.Name = scopeHatchery
	inv := env.InventoryOver(cfg, env.Client)
	vms, err := inv.VMs(ctx)
	require.NoError(t, err)
	assert.Len(t, vms, 1+3+2)

	ops := env.NewClient(nil)
	scopeClone(t, ctx, env, ops, teamA, "ours-elsewhere")
	vms = waitVM(t, env, inv, "ours-elsewhere")
	assert.Len(t, vms, 1+3+2+1)
	ref, err := env.Client.LoadVirtualMachine(ctx, "team-b-vm-00004")
	require.NoError(t, err)
	assert.NotEmpty(t, ref.Value)
}
