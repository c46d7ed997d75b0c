package vcheck

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/object"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// TestCloneModeFollowsThePlacementsDatastore: the check decides each
// placement's clone mode by the spawn's rule (clonespec.PlacementCloneMode):
// a template with a snapshot is cloned linked into a placement on the
// datastore that holds its disks (LocalDS_0) and full into one whose
// datastore does not (DatastoreB), the line saying why.
func TestCloneModeFollowsThePlacementsDatastore(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{Placements: true})
	ctx := env.Context()
	tpl := env.MustInspect(vcsimtest.DefaultTemplate)
	task, err := object.NewVirtualMachine(env.Admin.Client, tpl.Ref).CreateSnapshot(ctx, "base", "linked clone base", false, false)
	require.NoError(t, err)
	require.NoError(t, task.Wait(ctx))
	cfg := envConfig(env, false)
	ps := env.PlacementConfigs()
	ps[0].Datastores = []string{vcsimtest.DatastoreName}
	cfg.Placements = ps
	rep := Run(context.Background(), cfg, envDialer(env), Options{RunID: "pl", NotifyTimeout: time.Minute})
	t.Logf("report:\n%s", text(rep))
	clones := map[string]Result{}
	for _, r := range rep.Results {
		if r.Capability == "clone" {
			clones[r.Object] = r
		}
	}
	a, b := clones[vcsimtest.DefaultTemplate+" -> "+ps[0].Name], clones[vcsimtest.DefaultTemplate+" -> "+ps[1].Name]
	assert.Equal(t, Pass, a.Status)
	assert.Equal(t, "linked clone", a.Detail, "the template's disks are on the placement's datastore")
	assert.Equal(t, Pass, b.Status)
	assert.True(t, strings.Contains(b.Detail, "not on datastore") && strings.Contains(b.Detail, vcsimtest.DatastoreB), b.Detail)
	assert.Empty(t, scratchLeft(t, env))
}

// TestPlacementClonesFromItsTemplateCopy: a placement naming a copy of
// the template (templateCopies) is cloned from its copy, as a spawn's
// clone is (the copy's one CPU, not the template's two, is the clone's),
// the other from the template; a copy vCenter does not have fails that
// placement's clone naming its key, and the other placement's clone
// still carries the check.
func TestPlacementClonesFromItsTemplateCopy(t *testing.T) {
	t.Parallel()
	const cp = "debian12-copy-b"
	env := vcsimtest.Start(t, vcsimtest.Options{Placements: true,
		Templates: []vcsimtest.Template{{Name: vcsimtest.DefaultTemplate}, {Name: cp, CPUs: 1}}})
	cfg := envConfig(env, false)
	ps := env.PlacementConfigs()
	ps[1].TemplateCopies = []config.TemplateCopy{{Template: vcsimtest.DefaultTemplate, Copy: cp}}
	cfg.Placements = ps
	rep := Run(context.Background(), cfg, envDialer(env), Options{RunID: "copies", Keep: true})
	t.Logf("report:\n%s", text(rep))
	clones := lines(rep, "clone")
	require.Len(t, clones, 2)
	assert.Equal(t, Pass, clones[0].Status)
	assert.NotContains(t, clones[0].Detail, "copy")
	assert.Equal(t, Pass, clones[1].Status)
	assert.True(t, strings.HasPrefix(clones[1].Detail, "from the placement's copy "+cp+": "), clones[1].Detail)
	assert.Equal(t, int32(2), env.MustInspect(FolderPrefix+"copies-0-"+vcsimtest.DefaultTemplate).NumCPU)
	assert.Equal(t, int32(1), env.MustInspect(FolderPrefix+"copies-1-"+vcsimtest.DefaultTemplate).NumCPU, "cloned from the copy")
	assert.False(t, rep.Failed())

	ps[1].TemplateCopies[0].Copy = "no-such-copy"
	rep = Run(context.Background(), cfg, envDialer(env), Options{RunID: "nocopy"})
	t.Logf("report:\n%s", text(rep))
	clones = lines(rep, "clone")
	require.Len(t, clones, 2)
	assert.Equal(t, Pass, clones[0].Status)
	assert.Equal(t, Fail, clones[1].Status)
	assert.Equal(t, vcsimtest.DefaultTemplate+" -> b", clones[1].Object)
	assert.Contains(t, clones[1].Fix, config.KeyPrefix+".placements[1].templateCopies[0].copy")
	assert.Equal(t, Pass, one(t, rep, "guest program").Status)
	assert.True(t, rep.Failed())
	assert.Empty(t, scratchLeft(t, env), "the second run removed the first's kept VMs too")
}
