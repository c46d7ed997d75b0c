package vsphere_test

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/modelref"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/internal/vsphere"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient/cdsclienttest"
)

// warmVcsimAPI is a CDS API that knows no worker (enough for cleanup):
// any call but the worker and model lists panics.
func warmVcsimAPI() *cdsclienttest.Fake {
	return &cdsclienttest.Fake{Allow: []string{"WorkerList", "V2WorkerList", "WorkerModelsEnabled"}}
}

const warmVcsimHatchery = "hatch-vcsim"

// warmVcsimEnv starts a simulator with the debian12 and ubuntu templates.
func warmVcsimEnv(t *testing.T) *vcsimtest.Env {
	t.Helper()
	return vcsimtest.Start(t, vcsimtest.Options{Templates: []vcsimtest.Template{{Name: "debian12"}, {Name: "ubuntu"}}})
}

// warmVcsimConfig is a hatchery configuration on env with a static IP range.
func warmVcsimConfig(env *vcsimtest.Env, pools ...config.WorkerProvisioning) *config.Config {
	cfg := env.Config()
	cfg.CommonConfiguration.Name = warmVcsimHatchery
	cfg.WorkerTTL = 120
	cfg.WorkerRegistrationTTL = 10
	cfg.WorkerProvisioningInterval = 60
	cfg.WorkerProvisioningPoolSize = 2
	cfg.IPRange = "10.10.0.10/24"
	cfg.Gateway = "10.10.0.1"
	cfg.DNS = "10.10.0.2"
	cfg.SubnetMask = "255.255.255.0"
	cfg.Flavors = []config.Flavor{{Name: "small", CPUs: 1, MemoryMB: 1024}, {Name: "large", CPUs: 4, MemoryMB: 8192}}
	cfg.WorkerProvisioning = pools
	return cfg
}

// newWarmVcsimHatchery builds a hatchery on env, its inventory in the mode
// of vcsimtest.InventoryMode().
func newWarmVcsimHatchery(t *testing.T, env *vcsimtest.Env, cfg *config.Config, now func() time.Time) *vsphere.HatcheryVSphere {
	t.Helper()
	h, err := vsphere.New(vsphere.Options{
		Config:    cfg,
		Client:    env.Client,
		Inventory: env.Inventory(cfg),
		CDS:       warmVcsimAPI(),
		Logger:    testutil.DiscardLogger(),
		Now:       now,
	})
	require.NoError(t, err)
	return h
}

// warmVcsimVMs lists the datacenter through the hatchery's own view.
func warmVcsimVMs(t *testing.T, env *vcsimtest.Env) []inventory.VM {
	t.Helper()
	objs, err := env.Client.ListVirtualMachines(env.Context())
	require.NoError(t, err)
	var out []inventory.VM
	for _, o := range objs {
		out = append(out, inventory.VMFromInfo(o))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// warmPool returns our provisioned VMs of model.
func warmPool(vms []inventory.VM, model string) []inventory.VM {
	var out []inventory.VM
	for _, v := range vms {
		if v.OwnedBy(warmVcsimHatchery) && v.Annotation.Provisioning && v.HasPrefix("warmpool-v2-") && v.Annotation.VMwareModelPath == model {
			out = append(out, v)
		}
	}
	return out
}

func warmNames(vms []inventory.VM) []string {
	var out []string
	for _, v := range vms {
		out = append(out, v.Name)
	}
	return out
}

// The vcsim tests do not run in parallel: vcsim v0.56.0 races on shared
// state while two simulators are being created.

// TestVcsimProvisioningFillsTwoPools: one pass fills both pools to their
// number, powered off, pre-sized when the entry has a flavor; a second pass
// clones nothing more.
func TestVcsimProvisioningFillsTwoPools(t *testing.T) {
	env := warmVcsimEnv(t)
	cfg := warmVcsimConfig(env,
		config.WorkerProvisioning{ModelVMWare: "debian12", Number: 2},
		config.WorkerProvisioning{ModelVMWare: "ubuntu", Number: 3, Flavor: "small"},
	)
	h := newWarmVcsimHatchery(t, env, cfg, time.Now)
	ctx := env.Context()

	h.WarmProvisioningPass(ctx)

	vms := warmVcsimVMs(t, env)
	debian, ubuntu := warmPool(vms, "debian12"), warmPool(vms, "ubuntu")
	require.Len(t, debian, 2, "debian12 pool: %v", warmNames(vms))
	require.Len(t, ubuntu, 3, "ubuntu pool: %v", warmNames(vms))
	for _, v := range append(debian, ubuntu...) {
		assert.Equal(t, vctypes.PoweredOff, v.PowerState, v.Name)
		assert.NotEmpty(t, v.Annotation.IPAddress, "%s keeps its static ip", v.Name)
	}
	for _, v := range debian {
		assert.Empty(t, v.Annotation.Flavor)
		assert.Equal(t, int32(2), v.NumCPU, "neutral: template size")
	}
	for _, v := range ubuntu {
		assert.Equal(t, "small", v.Annotation.Flavor)
		assert.Equal(t, int32(1), v.NumCPU)
		assert.Equal(t, int32(1024), v.MemoryMB)
	}

	h.WarmProvisioningPass(ctx)
	vms2 := warmVcsimVMs(t, env)
	assert.Equal(t, warmNames(debian), warmNames(warmPool(vms2, "debian12")))
	assert.Equal(t, warmNames(ubuntu), warmNames(warmPool(vms2, "ubuntu")))
}

// TestVcsimClaimNeutralResized: a claimed neutral VM is renamed,
// reconfigured with the new annotation and the flavor, and powered on: the
// rename rides on the one reconfigure (VirtualMachineConfigSpec.Name, which
// vCenter and vcsim apply as a rename), no Rename_Task is sent.
func TestVcsimClaimNeutralResized(t *testing.T) {
	env := warmVcsimEnv(t)
	cfg := warmVcsimConfig(env, config.WorkerProvisioning{ModelVMWare: "debian12", Number: 1})
	h := newWarmVcsimHatchery(t, env, cfg, time.Now)
	ctx := env.Context()
	h.WarmProvisioningPass(ctx)
	env.WaitInventory(h.InventoryOf()) // a claim reads the inventory
	pool := warmPool(warmVcsimVMs(t, env), "debian12")
	require.Len(t, pool, 1)

	model := sdk.WorkerStarterWorkerModel{
		ModelV2:     &sdk.V2WorkerModel{Name: "debian", Type: sdk.VSphere},
		VSphereSpec: sdk.V2WorkerModelVSphereSpec{Image: "debian12"},
	}
	large := h.WarmFlavor("large")
	vm, err := h.WarmClaim(ctx, model, large)
	require.NoError(t, err)
	require.NotNil(t, vm)
	assert.Equal(t, pool[0].Name, vm.Name)
	again, err := h.WarmClaim(ctx, model, large)
	require.NoError(t, err)
	assert.Nil(t, again, "the only vm is claimed")

	before := env.Client.Stats()
	obj, err := h.WarmPrepareClaimed(ctx, vm, inventory.Annotation{
		HatcheryName: warmVcsimHatchery, WorkerName: "worker-job-7", JobID: "7", VMwareModelPath: "debian12",
	}, large)
	require.NoError(t, err)
	require.NotNil(t, obj)
	sent := env.Client.Stats().Sub(before)
	assert.Zero(t, sent["Rename_Task"].Requests, "no rename task")
	assert.EqualValues(t, 1, sent["ReconfigVM_Task"].Requests, "one reconfigure renames, annotates and resizes")
	assert.EqualValues(t, 1, sent["PowerOnVM_Task"].Requests)

	_, stillThere := env.Inspect(pool[0].Name)
	assert.False(t, stillThere, "renamed")
	assert.Contains(t, warmNames(warmVcsimVMs(t, env)), "worker-job-7", "listed under its new name")
	st := env.MustInspect("worker-job-7")
	assert.Equal(t, types.VirtualMachinePowerStatePoweredOn, st.PowerState)
	assert.Equal(t, int32(4), st.NumCPU)
	assert.Equal(t, int32(8192), st.MemoryMB)
	a, err := inventory.ParseAnnotation(st.Annotation)
	require.NoError(t, err)
	assert.False(t, a.Provisioning)
	assert.Equal(t, "worker-job-7", a.WorkerName)
	assert.Equal(t, "7", a.JobID)
	assert.Equal(t, "large", a.Flavor)
	assert.Equal(t, pool[0].Annotation.IPAddress, a.IPAddress)
	mirror, err := inventory.ParseAnnotation(st.ExtraConfig[inventory.AnnotationMirrorKey])
	require.NoError(t, err)
	assert.Equal(t, *a, *mirror)
}

// TestVcsimLowerNumberRemovesOnlyIdleSurplus: lowering a pool's number
// destroys idle VMs only: a claimed VM, another pool, another hatchery's
// provisioned VM and unannotated VMs stay.
func TestVcsimLowerNumberRemovesOnlyIdleSurplus(t *testing.T) {
	env := warmVcsimEnv(t)
	other := inventory.Annotation{HatcheryName: "hatch-other", WorkerName: "warmpool-v2-other", Provisioning: true, VMwareModelPath: "debian12", Created: time.Now().Add(-time.Hour)}
	env.AddVMs([]vcsimtest.ForeignVM{
		{Name: "warmpool-v2-other", Annotation: other.Marshal(), NumCPU: 2, MemoryMB: 4096},
		{Name: "warmpool-v2-bare", NumCPU: 2, MemoryMB: 4096},
	})
	cfg := warmVcsimConfig(env,
		config.WorkerProvisioning{ModelVMWare: "debian12", Number: 4},
		config.WorkerProvisioning{ModelVMWare: "ubuntu", Number: 1},
	)
	h := newWarmVcsimHatchery(t, env, cfg, time.Now)
	ctx := env.Context()
	h.WarmProvisioningPass(ctx)
	require.Len(t, warmPool(warmVcsimVMs(t, env), "debian12"), 4)
	ubuntu := warmNames(warmPool(warmVcsimVMs(t, env), "ubuntu"))
	require.Len(t, ubuntu, 1)

	// A claim takes what the inventory shows: let it see the new pool.
	env.WaitInventory(h.WarmInventory())
	claimed, err := h.WarmClaim(ctx, sdk.WorkerStarterWorkerModel{
		ModelV2: &sdk.V2WorkerModel{Name: "debian"}, VSphereSpec: sdk.V2WorkerModelVSphereSpec{Image: "debian12"},
	}, nil)
	require.NoError(t, err)
	require.NotNil(t, claimed)

	cfg.WorkerProvisioning[0].Number = 1
	// The surplus removal acts on what the inventory shows: let it see the
	// pool the first pass made (a shared inventory lags by design).
	env.WaitInventory(h.WarmInventory())
	h.WarmProvisioningPass(ctx)

	vms := warmVcsimVMs(t, env)
	left := warmPool(vms, "debian12")
	// The claim's compare-and-swap took the claimed vm out of the pool in
	// vCenter (its annotation is no longer a provisioning one): one idle
	// vm is left in the pool, and the claimed vm is still there.
	require.Len(t, left, 1, "one idle vm: %v", warmNames(left))
	assert.NotContains(t, warmNames(left), claimed.Name)
	assert.Equal(t, ubuntu, warmNames(warmPool(vms, "ubuntu")))
	names := warmNames(vms)
	assert.Contains(t, names, claimed.Name, "the claimed vm is never removed as surplus")
	assert.Contains(t, names, "warmpool-v2-other")
	assert.Contains(t, names, "warmpool-v2-bare")
}

// TestVcsimCrashBetweenCloneAndShutdownNoLeak: the hatchery stops between
// a clone and its power-off; a new hatchery on the same vCenter, with no
// cache, removes the half-provisioned VM in one cleanup pass, and leaves
// the finished ones in the pool.
func TestVcsimCrashBetweenCloneAndShutdownNoLeak(t *testing.T) {
	env := warmVcsimEnv(t)
	cfg := warmVcsimConfig(env, config.WorkerProvisioning{ModelVMWare: "debian12", Number: 2})
	cfg.WorkerProvisioningPoolSize = 1

	// First life: one VM provisioned fully, the second interrupted.
	h1 := newWarmVcsimHatchery(t, env, cfg, time.Now)
	runCtx, crash := context.WithCancel(env.Context())
	clones := 0
	h1.WarmWrapClone(func(next vsphere.WarmCloneFunc) vsphere.WarmCloneFunc {
		return func(ctx context.Context, tpl modelref.Template, name string, a *inventory.Annotation, f *config.Flavor) (vctypes.Ref, error) {
			vm, err := next(ctx, tpl, name, a, f)
			clones++
			if clones == 2 {
				crash() // the process dies: no wait for ip, no power off
			}
			return vm, err
		}
	})
	h1.WarmProvisioningPass(runCtx)
	require.Equal(t, 2, clones)

	pool := warmPool(warmVcsimVMs(t, env), "debian12")
	require.Len(t, pool, 2)
	var half, done []string
	for _, v := range pool {
		if v.PoweredOn() {
			half = append(half, v.Name)
		} else {
			done = append(done, v.Name)
		}
	}
	require.Len(t, half, 1, "one vm left powered on by the crash")
	require.Len(t, done, 1)

	// Second life, later than the provisioning bound (workerRegistrationTTL).
	later := time.Now().Add(cfg.WorkerRegistrationTTLDuration() + time.Minute)
	h2 := newWarmVcsimHatchery(t, env, cfg, func() time.Time { return later })
	h2.WarmKillAwolServersPass(env.Context())

	_, leaked := env.Inspect(half[0])
	assert.False(t, leaked, "half-provisioned vm %s leaked", half[0])
	assert.Equal(t, done, warmNames(warmPool(warmVcsimVMs(t, env), "debian12")), "the finished vm stays in the pool")

	// And the pool is refilled by the new hatchery, once its inventory
	// shows the deletion.
	env.WaitInventory(h2.InventoryOf())
	h2.WarmProvisioningPass(env.Context())
	assert.Len(t, warmPool(warmVcsimVMs(t, env), "debian12"), 2)
	for _, v := range warmPool(warmVcsimVMs(t, env), "debian12") {
		assert.False(t, v.PoweredOn(), v.Name)
		assert.True(t, strings.HasPrefix(v.Name, "warmpool-v2-"))
	}
}
