package vcenter_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// TestScopeFolderProblemsNameTheirKey: a template folder that does not
// exist, or a path that is not a folder, fails the listing and the probe
// with an error naming its templateFolders entry; a template folder inside
// the hatchery's folder is read once (no VM twice).
func TestScopeFolderProblemsNameTheirKey(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{Folder: "/DC0/vm/cds", TemplateFolder: "/DC0/vm/cds/templates"})
	ctx := env.Context()

	c := env.NewClient(nil)
	vms, err := c.ListVirtualMachines(ctx)
	require.NoError(t, err)
	require.Len(t, vms, 1, "the template, once: its folder is inside the hatchery's")
	refs, _, err := c.ProbeInventory(ctx, nil)
	require.NoError(t, err)
	assert.Len(t, refs, 1)

	missing := env.NewClient(func(cfg *vcenter.Config) {
		cfg.TemplateFolders = []string{"/DC0/vm/cds/templates", "/DC0/vm/nowhere"}
	})
	_, err = missing.ListVirtualMachines(ctx)
	assert.ErrorContains(t, err, `find folder "/DC0/vm/nowhere" (templateFolders[1]): no such inventory path`)
	_, _, err = missing.ProbeInventory(ctx, nil)
	assert.ErrorContains(t, err, "templateFolders[1]")

	notFolder := env.NewClient(func(cfg *vcenter.Config) {
		cfg.TemplateFolders = []string{"/DC0/vm/cds/templates/" + vcsimtest.DefaultTemplate}
	})
	_, err = notFolder.ListVirtualMachines(ctx)
	assert.ErrorContains(t, err, "(templateFolders[0]): it is a VirtualMachine, not a folder")
}

// TestScopeHoldsPlacementFolders: scoped (templateFolders set), the
// inventory reads each [[placements]] entry's folder too, by path or by
// name, so that the VMs cloned into it are listed and probed; a client
// without the entry does not see them (what the inventory missed before
// placement folders were in the scope); a placement folder that does not
// exist fails the listing naming its key.
func TestScopeHoldsPlacementFolders(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{Folder: "/DC0/vm/cds", TemplateFolder: "/DC0/vm/cds/templates"})
	ctx := env.Context()
	in := env.AddForeignVMsIn("/DC0/vm/place-b", "placed-", 3)
	env.AddForeignVMsIn("/DC0/vm/other-team", "other-", 2)

	without := env.NewClient(nil)
	vms, err := without.ListVirtualMachines(ctx)
	require.NoError(t, err)
	require.Len(t, vms, 1, "only the template: the placement's folder is not in this client's scope")

	for _, folder := range []string{"/DC0/vm/place-b", "place-b"} {
		c := env.NewClient(func(cfg *vcenter.Config) {
			cfg.Placements = []vcenter.PlacementKeys{{}, {Folder: folder}, {Folder: env.Folder}}
		})
		vms, err := c.ListVirtualMachines(ctx)
		require.NoError(t, err, folder)
		var names []string
		for _, vm := range vms {
			names = append(names, vm.Name)
		}
		assert.ElementsMatch(t, []string{vcsimtest.DefaultTemplate, "placed-00000", "placed-00001", "placed-00002"}, names, folder)
		refs, _, err := c.ProbeInventory(ctx, nil)
		require.NoError(t, err, folder)
		assert.Len(t, refs, 1+len(in), folder)
	}

	missing := env.NewClient(func(cfg *vcenter.Config) {
		cfg.Placements = []vcenter.PlacementKeys{{Folder: "/DC0/vm/place-b"}, {Folder: "/DC0/vm/nowhere"}}
	})
	_, err = missing.ListVirtualMachines(ctx)
	assert.ErrorContains(t, err, `find folder "/DC0/vm/nowhere" (placements[1].folder): no such inventory path`)
}

// TestCheckTopologyLooksForTemplatesByName: templateFolders unset, the
// topology check finds a named template of another team's folder (as a
// spawn would: discoverVM) and reports only the template that exists
// nowhere, naming the datacenter; templateFolders set, a template outside
// them is a problem naming the scope.
func TestCheckTopologyLooksForTemplatesByName(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{Folder: "/DC0/vm/cds"})
	ctx := env.Context()
	env.AddTemplate(vcsimtest.Template{Name: "golden", Folder: "/DC0/vm/team-a"})
	req := vcenter.TopologyRequest{Templates: []vcenter.ConfiguredTemplate{
		{Key: "guestCredentials[0].modelVMWare", Name: "golden"},
		{Key: "guestCredentials[1].modelVMWare", Name: "nowhere"},
	}}
	templateProblems := func(rep vcenter.TopologyReport) map[string]string {
		out := map[string]string{}
		for _, p := range rep.Problems {
			if strings.HasPrefix(p.Key, "guestCredentials") {
				out[p.Key] = p.Problem
			}
		}
		return out
	}

	rep, err := env.NewClient(nil).CheckTopology(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		"guestCredentials[1].modelVMWare": `no template "nowhere" in datacenter "DC0"; templates: ` + vcsimtest.DefaultTemplate + ", golden",
	}, templateProblems(rep))

	scoped := env.NewClient(func(cfg *vcenter.Config) { cfg.TemplateFolders = []string{"/DC0/vm/cds"} })
	rep, err = scoped.CheckTopology(ctx, req)
	require.NoError(t, err)
	probs := templateProblems(rep)
	assert.Contains(t, probs["guestCredentials[0].modelVMWare"], `no template "golden" in the hatchery's folder (folderString) or templateFolders`)
	assert.Contains(t, probs["guestCredentials[1].modelVMWare"], `no template "nowhere"`)
}
