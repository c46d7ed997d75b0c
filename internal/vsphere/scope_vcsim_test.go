package vsphere_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
