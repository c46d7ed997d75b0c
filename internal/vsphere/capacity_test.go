package vsphere

import (
	"context"
	"fmt"
	"github.com/cds-contrib/hatchery-vsphere/internal/capacity"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
	"github.com/stretchr/testify/require"
)

// capUsedVMs returns n powered-on owned VMs of cpus/memMB each.
func capUsedVMs(n int, cpus, memMB int32) []inventory.VM {
	var out []inventory.VM
	for i := range n {
		out = append(out, capVM(fmt.Sprintf("worker-%d", i), fmt.Sprintf("old-%d", i), cpus, memMB))
	}
	return out
}

// TestCapacityStrategyMatrix walks the strategy matrix of
// docs/flavors-and-capacity.md. maxWorker is the framework's
// count (checked before CanAllocateResources): here it is only set to show
// that CanAllocateResources does not count workers itself.
func TestCapacityStrategyMatrix(t *testing.T) {
	t.Parallel()
	type step struct {
		name       string
		used       []inventory.VM
		poolMemMB  int64
		poolCPUMHz int64
		flavor     string
		want       bool
		wantReason string
	}
	cases := []struct {
		name        string
		maxWorker   int
		maxCPUs     int
		maxMemoryMB int64
		steps       []step
	}{
		{name: "count-based only: resource pool is a safety net", maxWorker: 10, steps: []step{
			{name: "many VMs, pool has room", used: capUsedVMs(30, 8, 16384), poolMemMB: 64 << 10, poolCPUMHz: 4000, flavor: "large", want: true, wantReason: capacity.DetailFits},
			{name: "pool memory short", poolMemMB: 16383, poolCPUMHz: 4000, flavor: "large", want: false, wantReason: capacity.DetailPoolMemory},
			{name: "pool memory exact", poolMemMB: 16384, poolCPUMHz: 4000, flavor: "large", want: true, wantReason: capacity.DetailFits},
			{name: "pool cpu exhausted", poolMemMB: 64 << 10, poolCPUMHz: 0, flavor: "small", want: false, wantReason: capacity.DetailPoolCPU},
		}},
		{name: "resource pool only", maxWorker: 0, steps: []step{
			{name: "pool has room", used: capUsedVMs(100, 2, 4096), poolMemMB: 8192, poolCPUMHz: 1, flavor: "medium", want: true, wantReason: capacity.DetailFits},
			{name: "pool memory short", poolMemMB: 8191, poolCPUMHz: 1, flavor: "medium", want: false, wantReason: capacity.DetailPoolMemory},
		}},
		{name: "resource-based: static limits and pool", maxWorker: 0, maxCPUs: 16, maxMemoryMB: 32768, steps: []step{
			{name: "fits both", used: capUsedVMs(1, 8, 16384), poolMemMB: 64 << 10, poolCPUMHz: 4000, flavor: "large", want: true, wantReason: capacity.DetailFits},
			{name: "cpu limit", used: capUsedVMs(1, 10, 4096), poolMemMB: 64 << 10, poolCPUMHz: 4000, flavor: "large", want: false, wantReason: capacity.DetailCPULimit},
			{name: "memory limit", used: capUsedVMs(1, 2, 20000), poolMemMB: 64 << 10, poolCPUMHz: 4000, flavor: "large", want: false, wantReason: capacity.DetailMemoryLimit},
			{name: "pool refuses although static limits fit", used: nil, poolMemMB: 8192, poolCPUMHz: 4000, flavor: "large", want: false, wantReason: capacity.DetailPoolMemory},
		}},
		{name: "belt and suspenders", maxWorker: 20, maxCPUs: 64, maxMemoryMB: 131072, steps: []step{
			{name: "fits", used: capUsedVMs(7, 8, 16384), poolMemMB: 64 << 10, poolCPUMHz: 4000, flavor: "large", want: true, wantReason: capacity.DetailFits},
			{name: "cpu limit", used: capUsedVMs(8, 8, 8192), poolMemMB: 64 << 10, poolCPUMHz: 4000, flavor: "small", want: false, wantReason: capacity.DetailCPULimit},
			{name: "pool guardrail", used: capUsedVMs(2, 8, 16384), poolMemMB: 1024, poolCPUMHz: 4000, flavor: "small", want: false, wantReason: capacity.DetailPoolMemory},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := config.Config{MaxCPUs: tc.maxCPUs, MaxMemoryMB: tc.maxMemoryMB, Flavors: capFlavors()}
			cfg.CommonConfiguration.Provision.MaxWorker = tc.maxWorker
			env := newCapEnv(t, cfg)
			for i, s := range tc.steps {
				env.inv.Set(s.used...)
				env.pool.set(s.poolMemMB, s.poolCPUMHz)
				jobID := fmt.Sprintf("job-%d", i)
				ok, err := env.h.CanAllocateResources(context.Background(), capV2(s.flavor), jobID, nil)
				require.NoError(t, err, s.name)
				require.Equal(t, s.want, ok, s.name)
				recs := env.logs.records(t, "capacity decision")
				require.Equal(t, s.wantReason, recs[len(recs)-1]["detail"], s.name)
				require.Equal(t, capCode(s.wantReason), recs[len(recs)-1]["reason"], s.name)
				env.h.releaseCapacity(jobID) // each step independent
			}
		})
	}
}

// TestStarvationPrevention (docs/design.md#starvation-prevention): large (8) + 2 × small (2) = 12.
func TestStarvationPrevention(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name        string
		maxCPUs     int
		maxMemoryMB int64
		count       int
		used        []inventory.VM
		flavor      string
		want        bool
		wantReason  string
	}{
		{name: "large with 12 vCPUs left", maxCPUs: 20, count: 2, used: capUsedVMs(1, 8, 1024), flavor: "large", want: true, wantReason: capacity.DetailFits},
		{name: "large with 11 vCPUs left", maxCPUs: 19, count: 2, used: capUsedVMs(1, 8, 1024), flavor: "large", want: false, wantReason: capacity.DetailCPUStarvation},
		{name: "no reserve without countSmallerFlavorToKeep", maxCPUs: 16, count: 0, used: capUsedVMs(1, 8, 1024), flavor: "large", want: true, wantReason: capacity.DetailFits},
		{name: "smallest flavor keeps no reserve", maxCPUs: 10, count: 2, used: capUsedVMs(1, 8, 1024), flavor: "small", want: true, wantReason: capacity.DetailFits},
		{name: "medium keeps 2 small: 4+4 = 8 needed, 7 left", maxCPUs: 15, count: 2, used: capUsedVMs(1, 8, 1024), flavor: "medium", want: false, wantReason: capacity.DetailCPUStarvation},
		{name: "memory reserve: 16384 + 2×4096 fits 24576 left", maxMemoryMB: 32768, count: 2, used: capUsedVMs(1, 2, 8192), flavor: "large", want: true, wantReason: capacity.DetailFits},
		{name: "memory reserve: 24575 left", maxMemoryMB: 32767, count: 2, used: capUsedVMs(1, 2, 8192), flavor: "large", want: false, wantReason: capacity.DetailMemoryStarvation},
		{name: "template resources: no reserve", maxCPUs: 9, count: 2, used: capUsedVMs(1, 4, 1024), flavor: "", want: true, wantReason: capacity.DetailFits},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := newCapEnv(t, config.Config{MaxCPUs: tc.maxCPUs, MaxMemoryMB: tc.maxMemoryMB, Flavors: capFlavors(), CountSmallerFlavorToKeep: tc.count})
			tmpl := inventory.VM{Name: "debian12", Template: true, NumCPU: 4, MemoryMB: 4096}
			env.inv.Set(append(tc.used, tmpl)...)
			ok, err := env.h.CanAllocateResources(context.Background(), capV2(tc.flavor), "job", nil)
			require.NoError(t, err)
			require.Equal(t, tc.want, ok)
			recs := env.logs.records(t, "capacity decision")
			require.Len(t, recs, 1)
			require.Equal(t, tc.wantReason, recs[0]["detail"])
			require.Equal(t, capCode(tc.wantReason), recs[0]["reason"])
		})
	}
}

func TestCanAllocateResourcesFootprint(t *testing.T) {
	t.Parallel()
	v1 := sdk.WorkerStarterWorkerModel{ModelV1: &sdk.Model{Name: "mymodel", Type: sdk.VSphere, Group: &sdk.Group{Name: "shared.infra"},
		ModelVirtualMachine: sdk.ModelVirtualMachine{Image: "debian12"}}}
	cases := []struct {
		name       string
		vms        []inventory.VM
		model      sdk.WorkerStarterWorkerModel
		reqs       []sdk.Requirement
		maxCPUs    int
		want       bool
		wantReason string
		wantNext   float64
	}{
		{name: "flavor footprint", model: capV2("large"), maxCPUs: 8, want: true, wantReason: capacity.DetailFits, wantNext: 8},
		{name: "flavor requirement footprint", model: v1, reqs: []sdk.Requirement{{Type: sdk.FlavorRequirement, Value: "medium"}}, maxCPUs: 3, want: false, wantReason: capacity.DetailCPULimit, wantNext: 4},
		{name: "v2 template footprint", vms: []inventory.VM{{Name: "debian12", Template: true, NumCPU: 6, MemoryMB: 2048}}, model: capV2(""), maxCPUs: 5, want: false, wantReason: capacity.DetailCPULimit, wantNext: 6},
		{name: "v1 model template preferred over base image", vms: []inventory.VM{
			{Name: "debian12", Template: true, NumCPU: 6, MemoryMB: 2048},
			// The model's template as its registration leaves it: ours,
			// recorded as a model template (modelref.OfV1).
			{Name: "mymodel", Template: true, NumCPU: 3, MemoryMB: 2048, Annotation: &inventory.Annotation{HatcheryName: capHatcheryName, Model: true}},
		}, model: v1, maxCPUs: 5, want: true, wantReason: capacity.DetailFits, wantNext: 3},
		{name: "v1 base image while the model template is not built", vms: []inventory.VM{{Name: "debian12", Template: true, NumCPU: 6, MemoryMB: 2048}},
			model: v1, maxCPUs: 5, want: false, wantReason: capacity.DetailCPULimit, wantNext: 6},
		{name: "unknown footprint allowed within counts", vms: capUsedVMs(1, 4, 1024), model: capV2(""), maxCPUs: 5, want: true, wantReason: capacity.DetailFootprintUnknown, wantNext: 0},
		{name: "unknown footprint refused when the limit is reached", vms: capUsedVMs(1, 5, 1024), model: capV2(""), maxCPUs: 5, want: false, wantReason: capacity.DetailCPULimit, wantNext: 0},
		{name: "unknown flavor allowed so the spawn reports it", model: capV2("huge"), maxCPUs: 1, want: true, wantReason: capacity.DetailUnknownFlavor},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := newCapEnv(t, config.Config{MaxCPUs: tc.maxCPUs, Flavors: capFlavors()})
			env.inv.Set(tc.vms...)
			ok, err := env.h.CanAllocateResources(context.Background(), tc.model, "job", tc.reqs)
			require.NoError(t, err)
			require.Equal(t, tc.want, ok)
			recs := env.logs.records(t, "capacity decision")
			require.Len(t, recs, 1)
			require.Equal(t, tc.wantReason, recs[0]["detail"])
			require.Equal(t, capCode(tc.wantReason), recs[0]["reason"])
			if tc.wantReason != capacity.DetailUnknownFlavor {
				require.Equal(t, tc.wantNext, recs[0]["next_cpus"])
			}
			u, err := env.h.CapacityUsage(context.Background())
			require.NoError(t, err)
			if tc.want && tc.wantNext > 0 {
				require.Equal(t, 1, u.InFlight, "an allowed known footprint is reserved")
			} else {
				require.Equal(t, 0, u.InFlight, "nothing reserved")
			}
		})
	}
}

func TestCountAllocatedResources(t *testing.T) {
	t.Parallel()
	off := capVM("off", "j-off", 8, 8192)
	off.PowerState = vctypes.PoweredOff
	foreign := capVM("foreign", "j-f", 8, 8192)
	foreign.Annotation = &inventory.Annotation{HatcheryName: "other-hatchery", JobID: "j-f"}
	unannotated := inventory.VM{Name: "someone", NumCPU: 32, MemoryMB: 65536, PowerState: vctypes.PoweredOn}
	tmpl := capVM("tmpl", "", 4, 4096)
	tmpl.Template = true
	suspended := capVM("susp", "j-s", 8, 8192)
	suspended.PowerState = vctypes.Suspended
	vms := []inventory.VM{capVM("a", "j-a", 2, 4096), capVM("b", "j-b", 4, 8192), off, foreign, unannotated, tmpl, suspended}

	env := newCapEnv(t, config.Config{MaxCPUs: 8, Flavors: capFlavors()})
	require.Equal(t, capHatcheryName, env.h.Name())
	u := capacity.Count(env.h.admission().VMUsages(vms))
	require.Equal(t, capacity.Footprint{CPUs: 6, MemoryMB: 12288}, u.Footprint)
	require.Equal(t, 2, u.VMs)
	require.Equal(t, map[string]bool{"j-a": true, "j-b": true}, u.Keys)

	// Through CanAllocateResources: 6 used of 8, small (2) fits, medium not.
	env.inv.Set(vms...)
	ok, err := env.h.CanAllocateResources(context.Background(), capV2("medium"), "j1", nil)
	require.NoError(t, err)
	require.False(t, ok)
	ok, err = env.h.CanAllocateResources(context.Background(), capV2("small"), "j2", nil)
	require.NoError(t, err)
	require.True(t, ok)
}

// TestResourcePoolUnreadable: static limits still apply and the outage is
// logged once, not per decision; recovery is logged once too.
func TestResourcePoolUnreadable(t *testing.T) {
	t.Parallel()
	env := newCapEnv(t, config.Config{MaxCPUs: 16, Flavors: capFlavors()})
	ctx := context.Background()
	env.pool.setErr(capError("session expired"))
	env.pool.mu.Lock()
	env.pool.loadFailures = 3 // and the pool cannot even be found at first
	env.pool.mu.Unlock()

	allowed := 0
	for i := range 50 {
		ok, err := env.h.CanAllocateResources(ctx, capV2("large"), fmt.Sprintf("job-%d", i), nil)
		require.NoError(t, err)
		if ok {
			allowed++
		}
	}
	require.Equal(t, 2, allowed, "maxCpus 16 still applies: two large in flight")
	require.Len(t, env.logs.records(t, "resource pool unreadable: capacity checks continue with static limits only"), 1)
	require.Empty(t, env.logs.records(t, "resource pool readable again"))
	for _, r := range env.logs.records(t, "capacity decision") {
		require.Equal(t, false, r["pool_readable"])
	}
	lines := env.h.Status(ctx)
	require.Equal(t, sdk.MonitoringStatusWarn, capLine(t, lines, "vsphere/capacity/resource-pool").Status)
	require.Contains(t, capLine(t, lines, "vsphere/capacity/resource-pool").Value, "session expired")

	env.pool.setErr(nil)
	for i := range 10 {
		_, err := env.h.CanAllocateResources(ctx, capV2("small"), fmt.Sprintf("again-%d", i), nil)
		require.NoError(t, err)
	}
	require.Len(t, env.logs.records(t, "resource pool readable again"), 1)
	require.Equal(t, sdk.MonitoringStatusOK, capLine(t, env.h.Status(ctx), "vsphere/capacity/resource-pool").Status)

	// A second outage is a new warning.
	env.pool.setErr(capError("gone again"))
	for range 5 {
		_, err := env.h.CanAllocateResources(ctx, capV2("small"), "x", nil)
		require.NoError(t, err)
	}
	require.Len(t, env.logs.records(t, "resource pool unreadable: capacity checks continue with static limits only"), 2)
}

func TestCanAllocateResourcesInventoryError(t *testing.T) {
	t.Parallel()
	env := newCapEnv(t, config.Config{MaxCPUs: 16, Flavors: capFlavors()})
	env.inv.SetErr(capError("vcenter down"))
	ok, err := env.h.CanAllocateResources(context.Background(), capV2("small"), "job-1", nil)
	require.False(t, ok)
	require.ErrorContains(t, err, `can allocate resources for job "job-1": list vms: vcenter down`)
}

// TestConcurrentReservationsPreventOvershoot: 40 concurrent decisions for
// large (8 vCPU) under maxCpus 16 → exactly 2 allowed (run with -race).
func TestConcurrentReservationsPreventOvershoot(t *testing.T) {
	t.Parallel()
	env := newCapEnv(t, config.Config{MaxCPUs: 16, Flavors: capFlavors()})
	var allowed atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ok, err := env.h.CanAllocateResources(context.Background(), capV2("large"), fmt.Sprintf("job-%d", i), nil)
			if err == nil && ok {
				allowed.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	require.Equal(t, int32(2), allowed.Load())
	require.Len(t, env.logs.records(t, "capacity decision"), 40, "one line per decision")
	u, err := env.h.CapacityUsage(context.Background())
	require.NoError(t, err)
	require.Equal(t, int64(16), u.CPUs)
	require.Equal(t, 2, u.InFlight)
}

// TestReservationLifecycle: release frees, expiry frees, a visible VM is
// not counted twice, and a release racing a decision's snapshot is still
// counted by that decision.
func TestReservationLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	can := func(t *testing.T, env *capEnv, flavor, job string) bool {
		t.Helper()
		ok, err := env.h.CanAllocateResources(ctx, capV2(flavor), job, nil)
		require.NoError(t, err)
		return ok
	}
	cfg := config.Config{MaxCPUs: 16, Flavors: capFlavors()}

	t.Run("release frees", func(t *testing.T) {
		t.Parallel()
		env := newCapEnv(t, cfg)
		require.True(t, can(t, env, "large", "j1"))
		require.True(t, can(t, env, "large", "j2"))
		require.False(t, can(t, env, "large", "j3"))
		env.h.releaseCapacity("j1") // spawn failed: no VM
		require.True(t, can(t, env, "large", "j3"))
		env.h.releaseCapacity("unknown-job") // harmless
		require.False(t, can(t, env, "large", "j4"))
	})

	t.Run("expiry frees", func(t *testing.T) {
		t.Parallel()
		env := newCapEnv(t, cfg)
		require.True(t, can(t, env, "large", "j1"))
		require.True(t, can(t, env, "large", "j2"))
		env.clock.Advance(capacity.ReservationTTL - time.Second)
		require.False(t, can(t, env, "large", "j3"))
		env.clock.Advance(time.Second)
		require.True(t, can(t, env, "large", "j3"))
		require.Len(t, env.logs.records(t, "in-flight capacity reservation expired"), 2)
		// j3 reserved now: one more large fits, then none.
		require.True(t, can(t, env, "large", "j4"))
		require.False(t, can(t, env, "large", "j5"))
	})

	t.Run("same job asked twice is reserved once", func(t *testing.T) {
		t.Parallel()
		env := newCapEnv(t, cfg)
		require.True(t, can(t, env, "large", "j1"))
		require.True(t, can(t, env, "large", "j1"))
		require.True(t, can(t, env, "large", "j2"))
		require.False(t, can(t, env, "large", "j3"))
	})

	t.Run("visible powered-on VM is not counted twice", func(t *testing.T) {
		t.Parallel()
		env := newCapEnv(t, cfg)
		require.True(t, can(t, env, "large", "j1"))
		// j1's VM is cloned but powered off: its reservation still counts.
		vm := capVM("worker-j1", "j1", 8, 16384)
		vm.PowerState = vctypes.PoweredOff
		env.inv.Set(vm)
		require.True(t, can(t, env, "large", "j2"))
		require.False(t, can(t, env, "small", "j3"), "8 (j1 reserved) + 8 (j2)")
		// Powered on and visible, not yet released: counted once.
		vm.PowerState = vctypes.PoweredOn
		env.inv.Set(vm)
		u, err := env.h.CapacityUsage(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(16), u.CPUs)
		env.h.releaseCapacity("j1")
		env.h.releaseCapacity("j2")
		u, err = env.h.CapacityUsage(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(8), u.CPUs)
		require.Equal(t, 0, u.InFlight)
	})

	t.Run("release during a decision's inventory read is still counted", func(t *testing.T) {
		t.Parallel()
		env := newCapEnv(t, cfg)
		require.True(t, can(t, env, "large", "j1"))
		require.True(t, can(t, env, "large", "j2"))
		// The next decision reads a stale inventory (j1's VM not there yet)
		// while j1's spawn finishes and releases.
		env.inv.SetHook(func(context.Context) error { env.h.releaseCapacity("j1"); return nil })
		require.False(t, can(t, env, "large", "j3"), "j1 released after the snapshot: still counted")
		env.inv.SetHook(nil)
		// Now the inventory shows j1's VM powered on: j1 counted through it.
		env.inv.Set(capVM("worker-j1", "j1", 8, 16384))
		require.False(t, can(t, env, "large", "j3"))
		env.h.releaseCapacity("j2")
		require.True(t, can(t, env, "large", "j3"))
		n := env.h.capacity.Ledger().Len()
		require.Equal(t, 1, n, "released reservations are forgotten once no decision needs them")
	})

	t.Run("shared inventory: a released spawn counts until its VM shows or the grace ends", func(t *testing.T) {
		t.Parallel()
		shared := cfg
		shared.InventoryMode = config.InventoryShared
		shared.InventoryRefreshInterval = 15 // grace 4 × 15 s
		env := newCapEnv(t, shared)
		require.Equal(t, time.Minute, env.h.releaseGrace())
		// j1 and j2 spawned and released; the inventory lags and shows neither.
		require.True(t, can(t, env, "large", "j1"))
		require.True(t, can(t, env, "large", "j2"))
		env.h.releaseCapacity("j1")
		env.h.releaseCapacity("j2")
		require.False(t, can(t, env, "small", "j3"), "lagging snapshot: both still counted")
		// The inventory catches up with j1's VM: counted once, through the VM.
		env.inv.Set(capVM("worker-j1", "j1", 8, 16384))
		require.False(t, can(t, env, "small", "j3"))
		// j2's spawn had failed (no VM ever): its footprint is held for the grace only.
		env.clock.Advance(time.Minute - time.Second)
		require.False(t, can(t, env, "small", "j3"))
		env.clock.Advance(time.Second)
		require.True(t, can(t, env, "large", "j3"))
		env.h.releaseCapacity("j3")
		env.clock.Advance(time.Minute)
		// Everything released is forgotten: j1 counts through its VM alone.
		require.True(t, can(t, env, "large", "j4"))
		env.h.releaseCapacity("j4")
		env.clock.Advance(time.Minute)
		require.True(t, can(t, env, "small", "j5")) // gc runs at the end of each decision
		n := env.h.capacity.Ledger().Len()
		require.Equal(t, 1, n, "only j5's reservation is left")
	})

	t.Run("registration without job id", func(t *testing.T) {
		t.Parallel()
		env := newCapEnv(t, cfg)
		require.True(t, can(t, env, "large", ""))
		require.True(t, can(t, env, "large", ""))
		require.False(t, can(t, env, "large", ""))
		env.h.releaseCapacity("")
		require.True(t, can(t, env, "large", ""))
	})
}

func capLine(t *testing.T, lines []sdk.MonitoringStatusLine, component string) sdk.MonitoringStatusLine {
	t.Helper()
	for _, l := range lines {
		if l.Component == component {
			return l
		}
	}
	require.Failf(t, "no status line", "component %q in %+v", component, lines)
	return sdk.MonitoringStatusLine{}
}

// The hatchery satisfies the framework's interface with the real methods.
var _ hatchery.Interface = (*HatcheryVSphere)(nil)
