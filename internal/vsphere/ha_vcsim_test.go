package vsphere_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/internal/vsphere"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// TestVcsimReconfigureChangeVersionIsCAS: vcsim does not enforce
// config.changeVersion; vcsimtest extends it to vCenter's documented
// behaviour (a stale ChangeVersion fails the reconfigure with
// ConcurrentAccess). This pins the extension the claim tests below rely
// on, through the real adapter.
func TestVcsimReconfigureChangeVersionIsCAS(t *testing.T) {
	env := warmVcsimEnv(t)
	ctx := env.Context()
	h := newWarmVcsimHatchery(t, env, warmVcsimConfig(env, config.WorkerProvisioning{ModelVMWare: "debian12", Number: 1}), time.Now)
	h.WarmProvisioningPass(ctx)
	pool := warmPool(warmVcsimVMs(t, env), "debian12")
	require.Len(t, pool, 1)
	ref, err := env.Client.LoadVirtualMachine(ctx, pool[0].Name)
	require.NoError(t, err)
	vm := vcenter.MORef(ref)
	objs, err := env.Client.RetrieveVirtualMachines(ctx, []vctypes.Ref{ref})
	require.NoError(t, err)
	require.Len(t, objs, 1)
	read := objs[0].ChangeVersion
	require.NotEmpty(t, read)

	require.NoError(t, env.Client.ReconfigureVirtualMachine(ctx, vm, types.VirtualMachineConfigSpec{ChangeVersion: read, Annotation: "first"}))
	err = env.Client.ReconfigureVirtualMachine(ctx, vm, types.VirtualMachineConfigSpec{ChangeVersion: read, Annotation: "second"})
	require.Error(t, err, "a reconfigure carrying the version read before the first must be refused")
	assert.True(t, fault.Is(err, &types.ConcurrentAccess{}), "refused with ConcurrentAccess: %v", err)
	// Without a ChangeVersion nothing is checked.
	require.NoError(t, env.Client.ReconfigureVirtualMachine(ctx, vm, types.VirtualMachineConfigSpec{Annotation: "third"}))
}

// TestVcsimTwoInstancesNeverClaimOneVMTwice: two instances of one
// hatchery (two processes: own inventory, own session) see the same idle
// pool and claim at once. The claims' compare-and-swap on changeVersion
// (enforced by the vcsimtest extension above) hands each VM out once, and
// the pool is used up: every VM is claimed by exactly one instance.
func TestVcsimTwoInstancesNeverClaimOneVMTwice(t *testing.T) {
	env := warmVcsimEnv(t)
	const pool = 3
	cfg := warmVcsimConfig(env, config.WorkerProvisioning{ModelVMWare: "debian12", Number: pool})
	a := newWarmVcsimHatchery(t, env, cfg, time.Now)
	cfgB := warmVcsimConfig(env, config.WorkerProvisioning{ModelVMWare: "debian12", Number: pool})
	b := newWarmVcsimHatchery(t, env, cfgB, time.Now)
	ctx := env.Context()
	a.WarmProvisioningPass(ctx)
	require.Len(t, warmPool(warmVcsimVMs(t, env), "debian12"), pool)
	// Both instances see the whole idle pool before claiming.
	env.WaitInventory(a.WarmInventory())
	env.WaitInventory(b.WarmInventory())

	model := sdk.WorkerStarterWorkerModel{ModelV2: &sdk.V2WorkerModel{Name: "debian"}, VSphereSpec: sdk.V2WorkerModelVSphereSpec{Image: "debian12"}}
	var (
		mu  sync.Mutex
		got []string
		wg  sync.WaitGroup
	)
	start := make(chan struct{})
	for range pool {
		for _, h := range []*vsphere.HatcheryVSphere{a, b} {
			wg.Go(func() {
				<-start
				vm, err := h.WarmClaim(ctx, model, nil)
				if err != nil || vm == nil {
					return
				}
				mu.Lock()
				got = append(got, vm.Name)
				mu.Unlock()
			})
		}
	}
	close(start)
	wg.Wait()

	seen := map[string]bool{}
	for _, n := range got {
		assert.False(t, seen[n], "%s claimed twice", n)
		seen[n] = true
	}
	assert.Len(t, seen, pool, "every idle vm claimed once: %v", got)
	assert.Empty(t, warmPool(warmVcsimVMs(t, env), "debian12"), "no vm left idle in the pool after the claims")
}

// TestVcsimTwoInstancesFillOnePoolOnce: two instances of one hatchery see
// the same empty pool and refill it at the same moment. Both clone into
// the pool's slot names; vCenter (vcsim keeps names unique) lets one clone
// of each name succeed, the other instance's fails with DuplicateName and
// counts the slot as filled: the pool holds its number, not twice it, and
// every VM left is a finished pool VM (none marked, none half-made). The
// instances share one address range: each address is taken through its
// lock, so no two pool VMs hold one address.
func TestVcsimTwoInstancesFillOnePoolOnce(t *testing.T) {
	env := warmVcsimEnv(t)
	const pool = 3
	cfgA := warmVcsimConfig(env, config.WorkerProvisioning{ModelVMWare: "debian12", Number: pool})
	cfgA.WorkerProvisioningPoolSize = pool
	cfgB := warmVcsimConfig(env, config.WorkerProvisioning{ModelVMWare: "debian12", Number: pool})
	cfgB.WorkerProvisioningPoolSize = pool
	a := newWarmVcsimHatchery(t, env, cfgA, time.Now)
	b := newWarmVcsimHatchery(t, env, cfgB, time.Now)
	ctx := env.Context()

	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, h := range []*vsphere.HatcheryVSphere{a, b} {
		wg.Go(func() {
			<-start
			h.WarmProvisioningPass(ctx)
		})
	}
	close(start)
	wg.Wait()

	got := warmPool(warmVcsimVMs(t, env), "debian12")
	require.Len(t, got, pool, "the pool holds its number, not more: %v", warmNames(got))
	holder := map[string]string{}
	for _, v := range got {
		assert.False(t, v.PoweredOn(), "%s is a finished pool vm", v.Name)
		ip := v.Annotation.IPAddress
		require.NotEmpty(t, ip, v.Name)
		if other, dup := holder[ip]; dup {
			t.Errorf("%s and %s both hold %s", v.Name, other, ip)
		}
		holder[ip] = v.Name
	}
}
