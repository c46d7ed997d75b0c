package vsphere_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/cloudinit"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/internal/vsphere"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient/cdsclienttest"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// icClient is the real adapter with the forks and the clones counted, and
// a hook run after each successful fork (the test kills the parent).
type icClient struct {
	vctypes.Port

	mu        sync.Mutex
	forks     []string // children forked
	clones    []string // VMs cloned from a template
	afterFork func(n int, parent vctypes.Ref)
}

func (c *icClient) InstantCloneVirtualMachine(ctx context.Context, parent vctypes.Ref, req vctypes.InstantClone) (vctypes.Ref, error) {
	ref, err := c.Port.InstantCloneVirtualMachine(ctx, parent, req)
	if err != nil {
		return ref, err
	}
	c.mu.Lock()
	c.forks = append(c.forks, req.Name)
	n, hook := len(c.forks), c.afterFork
	c.mu.Unlock()
	if hook != nil {
		hook(n, parent)
	}
	return ref, err
}

func (c *icClient) CloneVirtualMachine(ctx context.Context, req vctypes.Clone) (vctypes.Ref, error) {
	ref, err := c.Port.CloneVirtualMachine(ctx, req)
	if err == nil {
		c.mu.Lock()
		c.clones = append(c.clones, req.Name)
		c.mu.Unlock()
	}
	return ref, err
}

func (c *icClient) counts() (forks, clones []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.forks...), append([]string(nil), c.clones...)
}

// icConfig is ciConfig with the model instant (cloud-init, Linux).
func icConfig(env *vcsimtest.Env) *config.Config {
	cfg := ciConfig(env)
	cfg.GuestCredentials[0].CloneMode = config.CloneModeInstant
	cfg.FinishedWorkerGracePeriod = 0
	return cfg
}

// icStart is a hatchery on env over an icClient, its parent built and
// ready (two passes: build, then seen ready).
func icStart(t *testing.T, env *vcsimtest.Env, cfg *config.Config, api *cdsclienttest.Fake) (*vsphere.HatcheryVSphere, *icClient, string) {
	t.Helper()
	c := &icClient{Port: env.Client}
	h, err := vsphere.New(vsphere.Options{Config: cfg, Client: c, CDS: api, Inventory: env.InventoryOver(cfg, c)})
	require.NoError(t, err)
	parent := icPass(t, env, h)
	return h, c, parent
}

// icPass runs instant-parents passes until the template's parent is
// ready (a build, then a pass that sees it up), at most 3.
func icPass(t *testing.T, env *vcsimtest.Env, h *vsphere.HatcheryVSphere) string {
	t.Helper()
	for i := 0; i < 3; i++ {
		env.WaitInventory(h.InventoryOf())
		h.InstantParentsPass(env.Context())
		if name, ok := h.InstantReadyParent(vcsimtest.DefaultTemplate); ok {
			return name
		}
	}
	t.Fatal("no instant parent ready after 3 passes")
	return ""
}

// icOwned returns the names of the simulator's VMs carrying hatch-ci's
// record, parents apart.
func icOwned(t *testing.T, env *vcsimtest.Env) (parents, others []string) {
	t.Helper()
	for _, vm := range env.VMs() {
		st, ok := env.Inspect(vm.Name)
		if !ok || st.Template {
			continue
		}
		rec := icRecord(st)
		if rec == nil || rec.HatcheryName != "hatch-ci" {
			continue
		}
		if rec.InstantParent && rec.WorkerName == st.Name {
			parents = append(parents, st.Name)
		} else {
			others = append(others, st.Name)
		}
	}
	return parents, others
}

func icRecord(st vcsimtest.VMState) *inventory.Annotation {
	rec, err := inventory.ParseAnnotation(st.Annotation)
	if err != nil {
		rec, _ = inventory.ParseAnnotation(st.ExtraConfig[inventory.AnnotationMirrorKey])
	}
	return rec
}

// icUserdataConfig decodes the worker config a VM's userdata writes.
func icUserdataConfig(t *testing.T, st vcsimtest.VMState) spawn.WorkerConfig {
	t.Helper()
	raw, err := cloudinit.DecodeGuestinfo(st.ExtraConfig[cloudinit.GuestinfoUserdata], st.ExtraConfig[cloudinit.GuestinfoUserdataEncoding])
	require.NoError(t, err)
	ud, err := cloudinit.ParseCloudConfig(raw)
	require.NoError(t, err)
	for _, f := range ud.WriteFiles {
		if f.Path == cloudinit.ConfigPath {
			wc, err := spawn.DecodeWorkerConfig(f.Content)
			require.NoError(t, err)
			return wc
		}
	}
	t.Fatalf("no worker config in the userdata of %q", st.Name)
	return spawn.WorkerConfig{}
}

// TestVcsimInstantCloneServesJob: the hatchery builds the model's parent
// (running, its record in the mirror only, no guestinfo identity), and a
// job is served by an instant clone of it (no clone from the template):
// the child has its own address (not the parent's), its own hostname, its
// own record and its own worker config.
func TestVcsimInstantCloneServesJob(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	cfg := icConfig(env)
	h, c, parentName := icStart(t, env, cfg, ciAPI())
	parent := env.MustInspect(parentName)
	assert.Equal(t, types.VirtualMachinePowerStatePoweredOn, parent.PowerState)
	_, err := inventory.ParseAnnotation(parent.Annotation)
	assert.Error(t, err, "the parent's Notes hold no record a child would inherit")
	require.NotNil(t, icRecord(parent))
	assert.True(t, icRecord(parent).InstantParent)
	assert.Empty(t, parent.ExtraConfig[cloudinit.GuestinfoUserdata], "no userdata on the parent")
	require.NotEmpty(t, parent.IPAddress)

	args := ciArgs("worker-ic-1", "run-ic-1")
	require.NoError(t, h.SpawnWorker(env.Context(), args))
	forks, clones := c.counts()
	assert.Equal(t, []string{"worker-ic-1"}, forks, "the job's worker is a fork")
	assert.Equal(t, []string{parentName}, clones, "only the parent was cloned from the template")

	child := env.MustInspect("worker-ic-1")
	assert.Equal(t, types.VirtualMachinePowerStatePoweredOn, child.PowerState)
	require.NotEmpty(t, child.IPAddress)
	assert.NotEqual(t, parent.IPAddress, child.IPAddress, "the child has its own address")
	rec := icRecord(child)
	require.NotNil(t, rec)
	assert.Equal(t, "worker-ic-1", rec.WorkerName)
	assert.Equal(t, "run-ic-1", rec.JobID)
	assert.False(t, rec.InstantParent)
	assert.Equal(t, child.IPAddress, rec.IPAddress)
	assert.Equal(t, args.WorkerConfig, icUserdataConfig(t, child), "its own worker config and token")
	raw, err := cloudinit.DecodeGuestinfo(child.ExtraConfig[cloudinit.GuestinfoMetadata], child.ExtraConfig[cloudinit.GuestinfoMetadataEncoding])
	require.NoError(t, err)
	md, err := cloudinit.ParseMetadata(raw)
	require.NoError(t, err)
	assert.Equal(t, "worker-ic-1", md.LocalHostname)
}

// TestVcsimInstantParentKilledMidBurst: a burst of 8 jobs; the parent is
// powered off after its 2nd child: the forks from it then fail with a
// vCenter fault, those jobs fall back to clones from the template in the
// same spawn, all 8 end with a worker; the next pass destroys the failed
// parent and builds another, which serves the next job.
func TestVcsimInstantParentKilledMidBurst(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{SerialTasks: true})
	cfg := icConfig(env)
	h, c, parentName := icStart(t, env, cfg, ciAPI())
	var killOnce sync.Once
	c.mu.Lock()
	c.afterFork = func(n int, parent vctypes.Ref) {
		if n == 2 {
			killOnce.Do(func() {
				_, err := object.NewVirtualMachine(env.Admin.Client, vim.MORef(parent)).PowerOff(env.Context())
				require.NoError(t, err)
			})
		}
	}
	c.mu.Unlock()

	// Two forks first, then the rest of the burst at once.
	for i := 1; i <= 2; i++ {
		require.NoError(t, h.SpawnWorker(env.Context(), ciArgs(fmt.Sprintf("worker-kill-%d", i), fmt.Sprintf("run-kill-%d", i))))
	}
	var wg sync.WaitGroup
	errs := make([]error, 9)
	for i := 3; i <= 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs[i] = h.SpawnWorker(env.Context(), ciArgs(fmt.Sprintf("worker-kill-%d", i), fmt.Sprintf("run-kill-%d", i)))
		}(i)
	}
	wg.Wait()
	for i := 3; i <= 8; i++ {
		assert.NoError(t, errs[i], "job %d ends with a worker", i)
	}
	forks, clones := c.counts()
	assert.Len(t, forks, 2, "no fork after the parent died")
	assert.Len(t, clones, 1+6, "the parent, then the 6 fallbacks")
	for i := 1; i <= 8; i++ {
		st := env.MustInspect(fmt.Sprintf("worker-kill-%d", i))
		assert.Equal(t, types.VirtualMachinePowerStatePoweredOn, st.PowerState, st.Name)
	}

	rebuilt := icPass(t, env, h)
	assert.NotEqual(t, parentName, rebuilt, "the failed parent is replaced")
	_, stillThere := env.Inspect(parentName)
	assert.False(t, stillThere, "the failed parent is destroyed")
	require.NoError(t, h.SpawnWorker(env.Context(), ciArgs("worker-kill-9", "run-kill-9")))
	forks, _ = c.counts()
	assert.Equal(t, "worker-kill-9", forks[len(forks)-1], "the rebuilt parent serves")
}

// TestVcsimInstantRestartFindsParentsAndChildren: after a restart (a new
// hatchery on the same vCenter) the parent is found from its record and
// adopted, not rebuilt; the children are ordinary workers: once finished
// (powered off) the cleanup reclaims them and keeps the parent; once no
// model is instant the parent is destroyed: nothing of ours is left.
func TestVcsimInstantRestartFindsParentsAndChildren(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	cfg := icConfig(env)
	h1, _, parentName := icStart(t, env, cfg, ciAPI())
	for i := 1; i <= 2; i++ {
		require.NoError(t, h1.SpawnWorker(env.Context(), ciArgs(fmt.Sprintf("worker-rs-%d", i), fmt.Sprintf("run-rs-%d", i))))
	}
	parents, others := icOwned(t, env)
	require.Equal(t, []string{parentName}, parents)
	require.ElementsMatch(t, []string{"worker-rs-1", "worker-rs-2"}, others)

	// Restart: a new process, same configuration and vCenter.
	h2, c2, adopted := icStart(t, env, icConfig(env), ciAPI())
	assert.Equal(t, parentName, adopted, "the parent is adopted, not rebuilt")
	_, clones := c2.counts()
	assert.Empty(t, clones, "nothing was built")

	// The children's workers end: their VMs power off.
	for _, name := range others {
		_, err := object.NewVirtualMachine(env.Admin.Client, env.MustInspect(name).Ref).PowerOff(env.Context())
		require.NoError(t, err)
	}
	env.WaitInventory(h2.InventoryOf())
	h2.WarmKillAwolServersPass(env.Context())
	parents, others = icOwned(t, env)
	assert.Equal(t, []string{parentName}, parents, "the parent in use is never reclaimed")
	assert.Empty(t, others, "the children are reclaimed")

	// The model is no longer instant (a reload): its parent goes.
	off := icConfig(env)
	off.GuestCredentials[0].CloneMode = ""
	h2.Reconfigure(off)
	env.WaitInventory(h2.InventoryOf())
	h2.WarmKillAwolServersPass(env.Context())
	parents, others = icOwned(t, env)
	assert.Empty(t, parents, "an unused parent is destroyed")
	assert.Empty(t, others)
	for _, vm := range env.VMs() {
		assert.False(t, strings.HasPrefix(vm.Name, "worker-rs-"), "leaked %s", vm.Name)
	}
}
