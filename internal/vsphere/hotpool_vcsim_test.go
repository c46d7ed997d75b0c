package vsphere_test

import (
	"testing"
	"time"

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
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// The simulator suspends and resumes VMs (SuspendVM, PowerOnVM from
// suspended) but has no guest to resume; vcsimtest's readiness handler
// plays vCenter's documented behaviour (no boot, no first-boot cloud-init,
// tools back within the resume delay, the address kept) and FailResume a
// guest that does not come back.

// hotVcsimHatchery builds a hatchery on env with its own inventory (in
// vcsimtest.InventoryMode()), returned to wait on it.
func hotVcsimHatchery(t *testing.T, env *vcsimtest.Env, cfg *config.Config) (*vsphere.HatcheryVSphere, inventory.Inventory) {
	t.Helper()
	inv := env.Inventory(cfg)
	h, err := vsphere.New(vsphere.Options{
		Config: cfg, Client: env.Client, Inventory: inv, CDS: warmVcsimAPI(),
		Logger: testutil.DiscardLogger(), Now: time.Now,
	})
	require.NoError(t, err)
	return h, inv
}

// hotSpawnArgs is a spawn of a debian12 worker named name (the default
// flavor of hotVcsimConfig applies).
func hotSpawnArgs(name, job string) spawn.Arguments {
	wc := spawn.WorkerConfig{Name: name, HatcheryName: warmVcsimHatchery, APIEndpoint: "http://api", APIToken: "jwt", RunJobID: job, Model: "m"}
	return spawn.Arguments{
		WorkerName: name, JobID: job, HatcheryName: warmVcsimHatchery, WorkerConfig: wc,
		Model: sdk.WorkerStarterWorkerModel{
			ModelV2:     &sdk.V2WorkerModel{Name: "m", Type: sdk.VSphere},
			VSphereSpec: sdk.V2WorkerModelVSphereSpec{Image: "debian12", Username: vcsimtest.DefaultGuestUser, Password: vcsimtest.DefaultGuestPassword},
			Cmd:         "./worker --name={{.Name}}",
		},
	}
}

// hotVcsimConfig is one suspended pool of n large debian12 VMs; large is
// the default flavor.
func hotVcsimConfig(env *vcsimtest.Env, n int) *config.Config {
	cfg := warmVcsimConfig(env, config.WorkerProvisioning{ModelVMWare: "debian12", Number: n, Flavor: "large", IdleState: config.IdleStateSuspended})
	cfg.DefaultFlavor = "large"
	return cfg
}

func launched(env *vcsimtest.Env, name string) bool {
	for _, c := range env.Guest.CallsFor(name) {
		if c.ProgramPath == "/bin/echo" && c.Fault == nil {
			return true
		}
	}
	return false
}

// TestVcsimHotPoolSuspendedClaim: a provisioning pass leaves a suspended VM
// recording its idle state and IP; a restarted hatchery (a new process on
// the same vCenter) counts it from its annotation (no clone), its cleanup
// keeps it, and a spawn claims it: resumed, checked, renamed and launched,
// with no clone and no rename task.
func TestVcsimHotPoolSuspendedClaim(t *testing.T) {
	env := warmVcsimEnv(t)
	cfg := hotVcsimConfig(env, 1)
	ctx := env.Context()
	h1, inv1 := hotVcsimHatchery(t, env, cfg)
	h1.WarmProvisioningPass(ctx)
	env.WaitInventory(inv1)

	pool := warmPool(warmVcsimVMs(t, env), "debian12")
	require.Len(t, pool, 1)
	hot := pool[0]
	assert.Equal(t, vctypes.Suspended, hot.PowerState)
	assert.Equal(t, config.IdleStateSuspended, hot.Annotation.IdleState)
	assert.Equal(t, "large", hot.Annotation.Flavor)
	require.NotEmpty(t, hot.Annotation.IPAddress)

	// Restart: nothing in memory, the annotation speaks.
	h2, inv2 := hotVcsimHatchery(t, env, cfg)
	env.WaitInventory(inv2)
	h2.WarmProvisioningPass(ctx)
	h2.WarmKillAwolServersPass(ctx)
	require.Equal(t, warmNames(pool), warmNames(warmPool(warmVcsimVMs(t, env), "debian12")), "the restarted hatchery neither clones nor removes")

	before := env.Client.Stats()
	require.NoError(t, h2.SpawnWorker(ctx, hotSpawnArgs("worker-hot-1", "job-1")))
	sent := env.Client.Stats().Sub(before)
	assert.Zero(t, sent["Rename_Task"].Requests, "the rename rides on the record's reconfigure")
	assert.EqualValues(t, 3, sent["ReconfigVM_Task"].Requests, "the claim's compare-and-swap, the rename with the worker's record, the worker start")
	assert.Zero(t, sent["CloneVM_Task"].Requests)
	st := env.MustInspect("worker-hot-1")
	assert.Equal(t, hot.Ref.Value, st.Ref.Value, "the pool vm became the worker")
	assert.Equal(t, types.VirtualMachinePowerStatePoweredOn, st.PowerState)
	a, err := inventory.ParseAnnotation(st.ExtraConfig[inventory.AnnotationMirrorKey])
	require.NoError(t, err)
	assert.False(t, a.Provisioning)
	assert.Empty(t, a.IdleState)
	assert.Equal(t, hot.Annotation.IPAddress, a.IPAddress)
	assert.NotNil(t, a.WorkerStarted)
	assert.True(t, launched(env, "worker-hot-1"))
	assert.Len(t, warmVcsimVMs(t, env), len(pool)+2, "two templates and the worker: no clone")
}

// TestVcsimHotPoolFailedResumeDiscarded: the suspended VM's guest does not
// come back after the resume: the check fails, the VM is marked (the next
// cleanup destroys it, nothing reuses it) and the job still gets a worker,
// from a fresh clone.
func TestVcsimHotPoolFailedResumeDiscarded(t *testing.T) {
	env := warmVcsimEnv(t)
	cfg := hotVcsimConfig(env, 1)
	ctx := env.Context()
	h, inv := hotVcsimHatchery(t, env, cfg)
	h.WarmProvisioningPass(ctx)
	env.WaitInventory(inv)
	pool := warmPool(warmVcsimVMs(t, env), "debian12")
	require.Len(t, pool, 1)
	bad := pool[0]
	env.FailResume(bad.Name)
	vsphere.FaultsShortenReadiness(t, time.Second)

	require.NoError(t, h.SpawnWorker(ctx, hotSpawnArgs("worker-hot-2", "job-2")))
	st := env.MustInspect("worker-hot-2")
	assert.NotEqual(t, bad.Ref.Value, st.Ref.Value, "the worker is a fresh clone")
	assert.True(t, launched(env, "worker-hot-2"))
	assert.False(t, launched(env, bad.Name), "nothing launched in the discarded vm")

	h.WarmKillAwolServersPass(ctx)
	for _, v := range warmVcsimVMs(t, env) {
		assert.NotEqual(t, bad.Ref.Value, v.Ref.Value, "the discarded vm is destroyed, not reused (%s)", v.Name)
	}
}
