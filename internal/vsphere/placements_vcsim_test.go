package vsphere_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/admission"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/placement"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/internal/vsphere"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
)

// plFloorGB is the datastores' floor of the placement tests.
const plFloorGB = 1

// plEnv starts a simulator with the two clusters and three datastores of
// vcsimtest.Options.Placements, every resource pool given room: vCenter
// shows a pool's unreserved memory and CPU, which vcsim keeps at a
// static 1 GB (less than one worker), so the tests set it as a real
// cluster with room would show it.
func plEnv(t *testing.T, templates ...vcsimtest.Template) *vcsimtest.Env {
	t.Helper()
	env := vcsimtest.Start(t, vcsimtest.Options{Placements: true, Templates: templates})
	sctx := env.SimContext()
	for _, o := range env.Model.Map().All("ResourcePool") {
		pool, ok := o.(*simulator.ResourcePool)
		if !ok {
			continue
		}
		sctx.WithLock(pool, func() {
			rt := pool.Runtime
			rt.Memory.UnreservedForVm = 1 << 40
			rt.Cpu.UnreservedForVm = 100000
			sctx.Update(pool, []types.PropertyChange{{Name: "runtime", Val: rt}})
		})
	}
	return env
}

// plConfig is a configuration with placements a (cluster-a, LocalDS_0 and
// LocalDS_1) and b (cluster-b, LocalDS_2), without the top-level pool and
// datastore (refused with [[placements]]).
func plConfig(env *vcsimtest.Env, hatch string, edit func(a, b *config.Placement)) *config.Config {
	cfg := env.Config()
	cfg.CommonConfiguration.Name = hatch
	cfg.ResourcePoolString, cfg.DatastoreString = "", ""
	cfg.DatastoreFloorGB = plFloorGB
	cfg.IPRange, cfg.Gateway, cfg.SubnetMask, cfg.DNS = "192.168.81.10/24", "192.168.81.1", "255.255.255.0", "192.168.81.2"
	ps := env.PlacementConfigs()
	ps[0].Datastores = []string{vcsimtest.DatastoreName, vcsimtest.DatastoreA}
	if edit != nil {
		edit(&ps[0], &ps[1])
	}
	cfg.Placements = ps
	return cfg
}

// plClock is the hatchery's clock in a test: it stands still and moves
// only by jumps (a back-off's end without waiting a minute). It does not
// follow the wall clock: a back-off must not end because a loaded machine
// took a minute over the jobs that run during it.
type plClock struct {
	base   time.Time
	offset atomic.Int64
}

func newPlClock() *plClock              { return &plClock{base: time.Now()} }
func (c *plClock) now() time.Time       { return c.base.Add(time.Duration(c.offset.Load())) }
func (c *plClock) jump(d time.Duration) { c.offset.Add(int64(d)) }
func plHatchery(t *testing.T, env *vcsimtest.Env, cfg *config.Config, clock *plClock, logs *testutil.SyncBuffer) *vsphere.HatcheryVSphere {
	t.Helper()
	return plHatcheryOver(t, env, env.Client, cfg, clock, logs)
}

// plHatcheryOver is plHatchery over client.
func plHatcheryOver(t *testing.T, env *vcsimtest.Env, client vctypes.Port, cfg *config.Config, clock *plClock, logs *testutil.SyncBuffer) *vsphere.HatcheryVSphere {
	t.Helper()
	now := time.Now
	if clock != nil {
		now = clock.now
	}
	h, err := vsphere.New(vsphere.Options{Config: cfg, Client: client, Inventory: env.InventoryOver(cfg, client), CDS: warmVcsimAPI(),
		Logger: slog.New(slog.NewTextHandler(logs, nil)), Now: now})
	require.NoError(t, err)
	return h
}

// plSpawn admits job (AllocateResources) and spawns its worker with the
// reservation, as the framework does; it returns the placement the
// admission chose and the spawn's error.
func plSpawn(ctx context.Context, t *testing.T, h *vsphere.HatcheryVSphere, hatch, job string) (string, error) {
	t.Helper()
	args := viV2Args(hatch, "w-"+job, job, "")
	res, err := h.AllocateResources(ctx, args.Model, job, nil)
	if err != nil {
		return "", err
	}
	name, _, ok := admission.PlacementOf(res)
	require.True(t, ok, "job %s: the reservation names a placement", job)
	args.Reservation = res
	return name, h.SpawnWorker(ctx, args)
}

// plRecorded returns where the worker of job is: the placement its record
// names and the cluster the simulator put it on.
func plRecorded(t *testing.T, env *vcsimtest.Env, job string) (string, string) {
	t.Helper()
	st := env.MustInspect("w-" + job)
	a, err := inventory.ParseAnnotation(st.Annotation)
	require.NoError(t, err)
	on, ok := env.PlacedOn("w-" + job)
	require.True(t, ok)
	return a.Placement, on.Cluster
}

var plCluster = map[string]string{"a": vcsimtest.ClusterA, "b": vcsimtest.ClusterB}

// TestVcsimPlacements: two placements over two clusters and three
// datastores. Jobs spread by headroom (placement a with maxVMs 4, b with
// maxVMs 2: six jobs are four and two, the seventh is refused with the
// placement code); a placement whose datastores are at their floor gets
// no clone; a cordoned one gets none; one whose hosts fail backs off while
// jobs keep starting in the other (timed), and comes back after its
// probe once healed. Each clone lands in its placement's cluster and its
// record names the placement.
func TestVcsimPlacements(t *testing.T) {
	env := plEnv(t)
	ctx := env.Context()

	// Spread by headroom.
	const h1 = "hatch-pl-spread"
	h := plHatchery(t, env, plConfig(env, h1, func(a, b *config.Placement) { a.MaxVMs, b.MaxVMs = 4, 2 }), nil, &testutil.SyncBuffer{})
	counts := map[string]int{}
	for i := range 6 {
		job := fmt.Sprintf("spread-%d", i)
		name, err := plSpawn(ctx, t, h, h1, job)
		require.NoError(t, err, job)
		rec, cluster := plRecorded(t, env, job)
		assert.Equal(t, name, rec, "%s: the record names the admission's placement", job)
		assert.Equal(t, plCluster[name], cluster, "%s: cloned into its placement's cluster", job)
		counts[rec]++
	}
	assert.Equal(t, map[string]int{"a": 4, "b": 2}, counts)
	_, err := plSpawn(ctx, t, h, h1, "spread-full")
	var r *refusal.Refusal
	require.True(t, errors.As(err, &r), "%v", err)
	assert.Equal(t, refusal.ReasonPlacement, r.Reason)
	t.Logf("spread: %v; the seventh job: %v", counts, err)

	// Datastores at their floor: b's only datastore.
	const h2 = "hatch-pl-floor"
	env.FillDatastore(vcsimtest.DatastoreB, plFloorGB<<30)
	h = plHatchery(t, env, plConfig(env, h2, nil), nil, &testutil.SyncBuffer{})
	for i := range 3 {
		name, err := plSpawn(ctx, t, h, h2, fmt.Sprintf("floor-%d", i))
		require.NoError(t, err)
		assert.Equal(t, "a", name, "b's datastore is at its floor")
	}
	st := h.Placements().Statuses()
	require.Len(t, st[1].Datastores, 1)
	assert.Equal(t, int64(plFloorGB<<30), st[1].Datastores[0].FreeBytes)
	env.FillDatastore(vcsimtest.DatastoreB, 500<<30)

	// Cordoned: a; then failing: b, while a takes the jobs.
	const h3 = "hatch-pl-cordon"
	clock := newPlClock()
	logs := &testutil.SyncBuffer{}
	cfg3 := plConfig(env, h3, nil)
	// One failure counted against the template would quarantine it and
	// refuse the jobs that follow: a fault of the placement must not count.
	cfg3.QuarantineThreshold = 1
	h = plHatchery(t, env, cfg3, clock, logs)
	require.NoError(t, h.Placements().Cordon("a", "uid 1000"))
	for i := range 3 {
		job := fmt.Sprintf("cordon-%d", i)
		name, err := plSpawn(ctx, t, h, h3, job)
		require.NoError(t, err)
		assert.Equal(t, "b", name, "a is cordoned")
		rec, _ := plRecorded(t, env, job)
		assert.Equal(t, "b", rec)
	}
	require.NoError(t, h.Placements().Uncordon("a", "uid 1000"))

	env.FailClonesInto(vcsimtest.ClusterB)
	// a has fewer VMs of this hatchery than b (none against three): the
	// jobs go to a until the two are even, then one goes to b and fails.
	failedAt := -1
	for i := range 6 {
		name, err := plSpawn(ctx, t, h, h3, fmt.Sprintf("fail-%d", i))
		if name == "b" {
			require.Error(t, err, "clones into cluster-b fail")
			failedAt = i
			break
		}
		require.NoError(t, err)
	}
	require.GreaterOrEqual(t, failedAt, 0, "a job went to b")
	assert.Equal(t, placement.StateBackingOff, h.Placements().Statuses()[1].State)
	began := time.Now()
	const during = 4
	for i := range during {
		job := fmt.Sprintf("during-%d", i)
		name, err := plSpawn(ctx, t, h, h3, job)
		require.NoError(t, err, job)
		assert.Equal(t, "a", name, "%s: b backs off", job)
	}
	took := time.Since(began)
	t.Logf("while b backed off: %d jobs started in a in %s (%s per job)", during, took, took/during)
	assert.Equal(t, placement.StateBackingOff, h.Placements().Statuses()[1].State)
	assert.Equal(t, 1, strings.Count(logs.String(), `level=ERROR msg="placement backing off"`))
	assert.NotContains(t, logs.String(), "template quarantined", "the placement's fault is not the template's")

	// Healed, and the back-off over: the next job to b is the probe; it
	// succeeds and b is active again.
	env.HealClonesInto(vcsimtest.ClusterB)
	// The snapshot shows a's new VMs before the clock jumps past the
	// reservations' release grace: with the shared inventory a lagging
	// snapshot, the grace over, counted a short and gave it the probe.
	env.WaitInventory(h.InventoryOf())
	// The jump also ends the release grace of the clone that failed in b
	// (four inventory refresh intervals with the watch and shared
	// inventories, none with listing: admission.Admission.ReleaseGrace):
	// until then its footprint counts in b's pool, b has one clone less
	// of headroom than a and the first job after the back-off goes to a
	// (docs/placements.md, "After a back-off").
	grace := admission.Admission{Config: cfg3}.ReleaseGrace()
	clock.jump(max(placement.BackoffFirst, grace) + time.Second)
	assert.Equal(t, placement.StateProbing, h.Placements().Statuses()[1].State)
	// Same headroom in both (each pool's room, vcsim's static figure), b
	// has fewer VMs: the next job goes to b and is its probe.
	name, err := plSpawn(ctx, t, h, h3, "probe")
	require.NoError(t, err)
	require.Equal(t, "b", name, "b has fewer VMs: it takes the probe")
	assert.Equal(t, placement.StateActive, h.Placements().Statuses()[1].State)
	assert.Equal(t, 1, strings.Count(logs.String(), `msg="placement back in service"`))
	assert.Equal(t, uint64(1), h.Placements().Statuses()[1].CloneFailures)
}

// plPool returns the idle warm-pool VMs of hatch by their records'
// placement.
func plPool(t *testing.T, env *vcsimtest.Env, hatch string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, v := range warmVcsimVMs(t, env) {
		if v.OwnedBy(hatch) && v.Annotation.Provisioning {
			out[v.Annotation.Placement]++
		}
	}
	return out
}

// TestVcsimCordonedPlacementPoolDrains: a cordoned placement's idle
// warm-pool VMs are still claimed as jobs come (its pool drains), while
// the refills go to the other placement.
func TestVcsimCordonedPlacementPoolDrains(t *testing.T) {
	env := plEnv(t)
	ctx := env.Context()
	const hatch = "hatch-pl-drain"
	cfg := plConfig(env, hatch, nil)
	cfg.WorkerProvisioning = []config.WorkerProvisioning{{ModelVMWare: vcsimtest.DefaultTemplate, Number: 2}}
	cfg.WorkerProvisioningPoolSize = 2
	h := plHatchery(t, env, cfg, nil, &testutil.SyncBuffer{})

	// The pool is filled in a (b cordoned meanwhile).
	require.NoError(t, h.Placements().Cordon("b", "uid 1000"))
	h.WarmProvisioningPass(ctx)
	require.Equal(t, map[string]int{"a": 2}, plPool(t, env, hatch))

	// a is cordoned: no refill goes there, jobs claim its idle VMs.
	require.NoError(t, h.Placements().Uncordon("b", "uid 1000"))
	require.NoError(t, h.Placements().Cordon("a", "uid 1000"))
	for i := range 2 {
		env.WaitInventory(h.InventoryOf())
		job := fmt.Sprintf("drain-%d", i)
		_, err := plSpawn(ctx, t, h, hatch, job)
		require.NoError(t, err, job)
		rec, cluster := plRecorded(t, env, job)
		assert.Equal(t, "a", rec, "%s: a claimed vm of a keeps its placement", job)
		assert.Equal(t, vcsimtest.ClusterA, cluster)
		env.WaitInventory(h.InventoryOf()) // the pass counts the claimed vm gone
		h.WarmProvisioningPass(ctx)
	}
	// A pass whose snapshot still showed a claimed VM idle refilled one
	// slot less: the next pass refills it, in b too.
	env.WaitInventory(h.InventoryOf())
	h.WarmProvisioningPass(ctx)
	env.WaitInventory(h.InventoryOf())
	assert.Equal(t, map[string]int{"b": 2}, plPool(t, env, hatch), "a's pool drained, refilled in b")
	for _, v := range warmVcsimVMs(t, env) {
		if v.OwnedBy(hatch) && v.Annotation.Provisioning {
			on, ok := env.PlacedOn(v.Name)
			require.True(t, ok)
			assert.Equal(t, vcsimtest.ClusterB, on.Cluster, v.Name)
		}
	}
}

// plSnapshot takes a snapshot of the template named name: its linked
// clones' base.
func plSnapshot(ctx context.Context, t *testing.T, env *vcsimtest.Env, name string) {
	t.Helper()
	tpl := env.MustInspect(name)
	task, err := object.NewVirtualMachine(env.Admin.Client, tpl.Ref).CreateSnapshot(ctx, "base", "linked clone base", false, false)
	require.NoError(t, err)
	require.NoError(t, task.Wait(ctx))
}

// TestVcsimPlacementLinkedFullAndCopy: a linked clone needs its
// template's disks on the target datastore. In a placement on the
// template's datastore (LocalDS_0) the clone is linked; in one on
// LocalDS_2, which does not hold them, it is full, said once per template
// and placement; a placement naming a copy of the template
// (templateCopies) clones the copy. The specs are read as sent: vcsim
// ignores the disk move type (clonemode_vcsim_test.go).
func TestVcsimPlacementLinkedFullAndCopy(t *testing.T) {
	const copyName = "debian12-on-b"
	env := plEnv(t, vcsimtest.Template{Name: vcsimtest.DefaultTemplate}, vcsimtest.Template{Name: copyName})
	ctx := env.Context()
	plSnapshot(ctx, t, env, vcsimtest.DefaultTemplate)
	plSnapshot(ctx, t, env, copyName)
	const hatch = "hatch-pl-linked"
	cfg := plConfig(env, hatch, func(a, b *config.Placement) { a.Datastores = []string{vcsimtest.DatastoreName} })
	c := cfg.Placements[1]
	c.Name = "c"
	c.TemplateCopies = []config.TemplateCopy{{Template: vcsimtest.DefaultTemplate, Copy: copyName}}
	cfg.Placements = append(cfg.Placements, c)
	client := &viRecordingClient{Port: env.NewClient(nil)}
	logs := &testutil.SyncBuffer{}
	h := plHatcheryOver(t, env, client, cfg, nil, logs)
	only := func(name string) {
		t.Helper()
		for _, p := range []string{"a", "b", "c"} {
			if p == name {
				require.NoError(t, h.Placements().Uncordon(p, "test"))
			} else {
				require.NoError(t, h.Placements().Cordon(p, "test"))
			}
		}
	}
	only("a")
	_, err := plSpawn(ctx, t, h, hatch, "linked-a")
	require.NoError(t, err)
	rec := client.clone(t, "w-linked-a")
	assert.False(t, rec.Req.Snapshot.IsZero(), "linked: the template's disks are on LocalDS_0")
	assert.Equal(t, env.MustInspect(vcsimtest.DefaultTemplate).Ref, rec.Source)

	only("b")
	for _, job := range []string{"full-b1", "full-b2"} {
		_, err = plSpawn(ctx, t, h, hatch, job)
		require.NoError(t, err)
		rec = client.clone(t, "w-"+job)
		assert.True(t, rec.Req.Snapshot.IsZero(), "%s: full, LocalDS_2 does not hold the template's disks", job)
		assert.False(t, rec.Req.Datastore.IsZero())
	}
	assert.Equal(t, 1, strings.Count(logs.String(), `placement=b mode=full`), "said once per template and placement:\n%s", logs.String())

	only("c")
	_, err = plSpawn(ctx, t, h, hatch, "copy-c")
	require.NoError(t, err)
	rec = client.clone(t, "w-copy-c")
	assert.Equal(t, env.MustInspect(copyName).Ref, rec.Source, "c clones the copy it names")
	on, ok := env.PlacedOn("w-copy-c")
	require.True(t, ok)
	assert.Equal(t, vcsimtest.ClusterB, on.Cluster)
}
