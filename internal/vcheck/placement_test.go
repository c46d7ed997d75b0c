package vcheck

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/object"

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
