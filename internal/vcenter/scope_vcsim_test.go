package vcenter_test

import (
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
