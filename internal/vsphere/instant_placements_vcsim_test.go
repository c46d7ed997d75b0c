package vsphere_test

import (
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/admission"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/internal/vsphere"
)

// ipConfig is icConfig over plEnv's two placements: a (cluster-a) and b
// (cluster-b), without the top-level pool and datastore.
func ipConfig(env *vcsimtest.Env) *config.Config {
	cfg := icConfig(env)
	cfg.ResourcePoolString, cfg.DatastoreString = "", ""
	cfg.DatastoreFloorGB = plFloorGB
	cfg.Placements = env.PlacementConfigs()
	return cfg
}

// ipStart is a hatchery over an icClient whose forks' parents are
// recorded (child name → parent reference), after before (when set) and
// instant-parents passes until both placements have their ready parent
// (at most 3: build, then seen ready); it returns the parents by
// placement.
func ipStart(t *testing.T, env *vcsimtest.Env, cfg *config.Config, logs *testutil.SyncBuffer, before func(*vsphere.HatcheryVSphere, *icClient)) (*vsphere.HatcheryVSphere, *icClient, map[string]vctypes.Ref, map[string]string) {
	t.Helper()
	c := &icClient{Port: env.Client}
	var mu sync.Mutex
	parentOf := map[string]vctypes.Ref{}
	c.afterFork = func(n int, parent vctypes.Ref) {
		forks, _ := c.counts()
		mu.Lock()
		parentOf[forks[n-1]] = parent
		mu.Unlock()
	}
	h, err := vsphere.New(vsphere.Options{Config: cfg, Client: c, CDS: ciAPI(), Inventory: env.InventoryOver(cfg, c),
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	require.NoError(t, err)
	if before != nil {
		before(h, c)
	}
	parents := map[string]string{}
	for i := 0; i < 3 && len(parents) < 2; i++ {
		env.WaitInventory(h.InventoryOf())
		h.InstantParentsPass(env.Context())
		for _, p := range []string{"a", "b"} {
			if name, ok := h.InstantReadyParentAt(vcsimtest.DefaultTemplate, p); ok {
				parents[p] = name
			}
		}
	}
	require.Len(t, parents, 2, "one ready parent per placement: %v", parents)
	return h, c, parentOf, parents
}

// TestVcsimInstantPlacements: an instant model with two placements over
// two clusters. One parent is built per placement, in its placement's
// cluster, its record naming it; a job is forked from the parent of the
// placement its admission chose (the child on that cluster, its record
// naming that placement) and nothing else is cloned from the template. No
// parent is built in a cordoned placement; one already there is kept (no
// job goes there meanwhile).
// After a restart the new process adopts exactly one parent per
// placement, builds none, and once the children end nothing of ours is
// left but the two parents.
func TestVcsimInstantPlacements(t *testing.T) {
	t.Parallel()
	env := plEnv(t)
	ctx := env.Context()
	cfg := ipConfig(env)
	logs := &testutil.SyncBuffer{}
	// b cordoned at first: a pass builds a's parent only; uncordoned,
	// the next builds b's.
	h, c, parentOf, parents := ipStart(t, env, cfg, logs, func(h *vsphere.HatcheryVSphere, c *icClient) {
		require.NoError(t, h.Placements().Cordon("b", "uid 1000"))
		env.WaitInventory(h.InventoryOf())
		h.InstantParentsPass(ctx)
		_, clones := c.counts()
		require.Len(t, clones, 1, "one parent built")
		on, ok := env.PlacedOn(clones[0])
		require.True(t, ok)
		assert.Equal(t, vcsimtest.ClusterA, on.Cluster, "no parent is built in a cordoned placement")
		assert.Contains(t, logs.String(), `msg="instant parent waits for its placement" parent_key=debian12/b placement=b reason="cordoned by uid 1000"`)
		require.NoError(t, h.Placements().Uncordon("b", "uid 1000"))
	})
	for p, name := range parents {
		on, ok := env.PlacedOn(name)
		require.True(t, ok)
		assert.Equal(t, plCluster[p], on.Cluster, "the parent of %s is built in its cluster", p)
		rec := icRecord(env.MustInspect(name))
		require.NotNil(t, rec)
		assert.True(t, rec.InstantParent)
		assert.Equal(t, p, rec.Placement, "the parent's record names its own placement")
	}
	_, clones := c.counts()
	require.ElementsMatch(t, []string{parents["a"], parents["b"]}, clones, "only the two parents were cloned")

	// spawn admits job and spawns its worker with the reservation, as
	// the framework does; it returns the admission's placement.
	spawn := func(worker, job string) string {
		t.Helper()
		args := ciArgs(worker, job)
		res, err := h.AllocateResources(ctx, args.Model, job, nil)
		require.NoError(t, err)
		name, _, ok := admission.PlacementOf(res)
		require.True(t, ok, "job %s: the reservation names a placement", job)
		args.Reservation = res
		require.NoError(t, h.SpawnWorker(ctx, args), job)
		return name
	}
	check := func(worker, placementName string) {
		t.Helper()
		child := env.MustInspect(worker)
		assert.Equal(t, types.VirtualMachinePowerStatePoweredOn, child.PowerState)
		assert.Equal(t, vim.RefOf(env.MustInspect(parents[placementName]).Ref), parentOf[worker], "%s: forked from the parent of %s", worker, placementName)
		on, ok := env.PlacedOn(worker)
		require.True(t, ok)
		assert.Equal(t, plCluster[placementName], on.Cluster, "%s: on its parent's cluster", worker)
		rec := icRecord(child)
		require.NotNil(t, rec)
		assert.Equal(t, placementName, rec.Placement, "%s: its record names its placement", worker)
		assert.False(t, rec.InstantParent)
	}

	// Two jobs: the placements have the same headroom, the one with fewer
	// VMs (then the first name) takes the next.
	seen := map[string]int{}
	var workers []string
	for i := range 2 {
		w := fmt.Sprintf("worker-ip-%d", i)
		p := spawn(w, fmt.Sprintf("run-ip-%d", i))
		check(w, p)
		seen[p]++
		workers = append(workers, w)
	}
	assert.Equal(t, map[string]int{"a": 1, "b": 1}, seen, "one job in each placement")

	// a cordoned: its parent stays, the next job goes to b.
	require.NoError(t, h.Placements().Cordon("a", "uid 1000"))
	env.WaitInventory(h.InventoryOf())
	h.InstantParentsPass(ctx)
	name, ok := h.InstantReadyParentAt(vcsimtest.DefaultTemplate, "a")
	assert.True(t, ok, "the cordoned placement's parent is kept")
	assert.Equal(t, parents["a"], name)
	p := spawn("worker-ip-2", "run-ip-2")
	assert.Equal(t, "b", p)
	check("worker-ip-2", "b")
	workers = append(workers, "worker-ip-2")
	require.NoError(t, h.Placements().Uncordon("a", "uid 1000"))

	forks, clones := c.counts()
	assert.ElementsMatch(t, workers, forks, "every job's worker is a fork")
	assert.ElementsMatch(t, []string{parents["a"], parents["b"]}, clones, "no fallback clone, no parent rebuilt")
	owned, others := icOwned(t, env)
	assert.ElementsMatch(t, []string{parents["a"], parents["b"]}, owned)
	assert.ElementsMatch(t, workers, others)

	assert.NotContains(t, logs.String(), "level=WARN", "a healthy run logs no WARN")

	// Restart: a new process, same configuration and vCenter.
	h2, c2, _, adopted := ipStart(t, env, ipConfig(env), &testutil.SyncBuffer{}, nil)
	assert.Equal(t, parents, adopted, "each placement's parent is adopted, not rebuilt")
	_, clones = c2.counts()
	assert.Empty(t, clones, "nothing was built")

	// The children's workers end: their VMs power off and are reclaimed;
	// the two parents are all that is left of ours.
	for _, w := range workers {
		_, err := object.NewVirtualMachine(env.Admin.Client, env.MustInspect(w).Ref).PowerOff(ctx)
		require.NoError(t, err)
	}
	env.WaitInventory(h2.InventoryOf())
	h2.WarmKillAwolServersPass(ctx)
	env.WaitInventory(h2.InventoryOf())
	h2.InstantParentsPass(ctx)
	owned, others = icOwned(t, env)
	assert.ElementsMatch(t, []string{parents["a"], parents["b"]}, owned, "exactly one parent per placement")
	assert.Empty(t, others, "the children are reclaimed")
	_, clones = c2.counts()
	assert.Empty(t, clones, "still nothing built")
}
