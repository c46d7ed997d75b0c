package warmpool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/task"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// putPhase puts name in phase p, whatever it was in.
func putPhase(l *lifecycle.Table, name string, p lifecycle.Phase, opts ...lifecycle.Option) {
	if l.Set(name, p, opts...) {
		return
	}
	if p == lifecycle.Preparing && l.Phase(name) == lifecycle.Gone {
		// A VM is prepared once claimed (Pool.PrepareClaimed).
		if _, err := l.MoveAny(name, lifecycle.Claimed, opts...); err != nil {
			panic(err)
		}
	}
	if _, err := l.MoveAny(name, p, opts...); err != nil {
		panic(err)
	}
}

func poweredOn(v *inventory.VM) { v.PowerState = vctypes.PoweredOn }
func template(v *inventory.VM)  { v.Template = true }

// idleIn records a hot idle state on a pool VM and puts the VM in the
// power state that state waits in.
func idleIn(state string) func(*inventory.VM) {
	return func(v *inventory.VM) {
		v.Annotation.IdleState = state
		v.PowerState = vctypes.PowerState(IdlePowerState(v.Annotation))
	}
}

// TestClaimProvisionedVMOrder: exact flavor first, then neutral, never a VM
// pre-sized for another flavor, never a VM that is not idle or not ours.
func TestClaimProvisionedVMOrder(t *testing.T) {
	t.Parallel()
	large := &config.Flavor{Name: "large", CPUs: 4, MemoryMB: 8192}
	small := &config.Flavor{Name: "small", CPUs: 1, MemoryMB: 1024}
	foreign := poolVM("warmpool-v2-foreign", "debian12", "large", time.Minute)
	foreign.Annotation.HatcheryName = "hatch-b"
	notIdle := []inventory.VM{
		poolVM("warmpool-v2-on", "debian12", "large", time.Minute, poweredOn),
		poolVM("warmpool-v2-pending", "debian12", "large", time.Minute),
		poolVM("warmpool-v2-deleted", "debian12", "large", time.Minute),
		poolVM("warmpool-v2-used", "debian12", "large", time.Minute),
		foreign,
		poolVM("warmpool-v2-tpl", "debian12", "large", time.Minute, template),
		poolVM("warmpool-v2-other-model", "ubuntu", "large", time.Minute),
		poolVM("w-renamed", "debian12", "large", time.Minute), // no warmpool- prefix: not in the pool
	}
	exactOld := poolVM("warmpool-v2-large-old", "debian12", "LARGE", 2*time.Hour)
	exactNew := poolVM("warmpool-v2-large-new", "debian12", "large", time.Hour)
	neutral := poolVM("warmpool-v2-neutral", "debian12", "", time.Minute)
	otherFlavor := poolVM("warmpool-v2-small", "debian12", "small", time.Minute)

	cases := []struct {
		name   string
		vms    []inventory.VM
		flavor *config.Flavor
		want   []string // successive claims, "" = none
	}{
		{"exact then neutral then none", append([]inventory.VM{neutral, exactNew, otherFlavor, exactOld}, notIdle...), large,
			[]string{"warmpool-v2-large-old", "warmpool-v2-large-new", "warmpool-v2-neutral", ""}},
		{"neutral when no exact", []inventory.VM{otherFlavor, neutral}, large, []string{"warmpool-v2-neutral", ""}},
		{"never another flavor", []inventory.VM{otherFlavor, exactOld}, &config.Flavor{Name: "medium"}, []string{""}},
		{"no flavor takes only neutral", []inventory.VM{exactOld, otherFlavor, neutral}, nil, []string{"warmpool-v2-neutral", ""}},
		{"small flavor exact", []inventory.VM{neutral, otherFlavor}, small, []string{"warmpool-v2-small", "warmpool-v2-neutral", ""}},
		{"nothing for the model", notIdle, large, []string{""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newPoolEnv(t, tc.vms, true)
			putPhase(e.p.Life, "warmpool-v2-pending", lifecycle.Provisioning)
			e.p.Custody.MarkToDelete("warmpool-v2-deleted")
			putPhase(e.p.Life, "warmpool-v2-used", lifecycle.Claimed, lifecycle.WithRef("vm-warmpool-v2-used")) // a claim records the reference
			for _, want := range tc.want {
				got, err := e.p.Claim(context.Background(), v2Model("debian12"), tc.flavor, true)
				require.NoError(t, err)
				if want == "" {
					assert.Nil(t, got)
					continue
				}
				require.NotNil(t, got, "want %s", want)
				assert.Equal(t, want, got.Name)
				assert.True(t, e.p.Life.In(want, lifecycle.Claimed), "claimed vm must be marked as used")
			}
		})
	}
}

// TestClaimProvisionedVMV1 matches V1 pools on the model path.
func TestClaimProvisionedVMV1(t *testing.T) {
	t.Parallel()
	v1vm := poolVM("warmpool-v1-abc", "", "", time.Minute, func(v *inventory.VM) { v.Annotation.WorkerModelPath = "grp/m1" })
	v2vm := poolVM("warmpool-v2-abc", "m1", "", time.Minute)
	e := newPoolEnv(t, []inventory.VM{v2vm, v1vm}, true)
	got, err := e.p.Claim(context.Background(), v1Model("grp", "m1"), nil, true)
	require.NoError(t, err)
	require.NotNil(t, got)
	assert.Equal(t, "warmpool-v1-abc", got.Name)
	got, err = e.p.Claim(context.Background(), v1Model("grp", "m1"), nil, true)
	require.NoError(t, err)
	assert.Nil(t, got)
}

// TestClaimProvisionedVMListError names the model.
func TestClaimProvisionedVMListError(t *testing.T) {
	t.Parallel()
	e := newPoolEnv(t, nil, true)
	e.inv.SetErr(errors.New("vcenter down"))
	_, err := e.p.Claim(context.Background(), v2Model("debian12"), nil, true)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"debian12"`)
}

// TestClaimProvisionedVMConcurrent: concurrent claims never get the same
// VM, and every idle VM is handed out once (run with -race).
func TestClaimProvisionedVMConcurrent(t *testing.T) {
	t.Parallel()
	const pool, claimers = 5, 16
	var vms []inventory.VM
	for i := range pool {
		vms = append(vms, poolVM(fmt.Sprintf("warmpool-v2-%02d", i), "debian12", "", time.Minute))
	}
	e := newPoolEnv(t, vms, true)

	var (
		mu  sync.Mutex
		got []string
		wg  sync.WaitGroup
	)
	start := make(chan struct{})
	for range claimers {
		wg.Go(func() {
			<-start
			vm, err := e.p.Claim(context.Background(), v2Model("debian12"), nil, true)
			if err != nil || vm == nil {
				return
			}
			mu.Lock()
			got = append(got, vm.Name)
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()

	assert.Len(t, got, pool)
	seen := map[string]bool{}
	for _, n := range got {
		assert.False(t, seen[n], "%s claimed twice", n)
		seen[n] = true
	}
}

// A shared inventory lags behind the hatchery's own writes: after a claimed
// VM became a worker, a stale snapshot can still show it as an idle
// provisioned VM. It must never be claimed twice, nor counted in its pool,
// nor removed as surplus, until the inventory shows what it became.
func TestClaimedVMIsNeverOfferedAgainFromAStaleSnapshot(t *testing.T) {
	t.Parallel()
	idle := poolVM("warmpool-v2-a", "debian12", "", time.Minute)
	e := newPoolEnv(t, []inventory.VM{idle}, true)
	ctx := context.Background()

	got, err := e.p.Claim(ctx, v2Model("debian12"), nil, true)
	require.NoError(t, err)
	require.NotNil(t, got)
	// The spawn ended; the snapshot is still stale.

	again, err := e.p.Claim(ctx, v2Model("debian12"), nil, true)
	require.NoError(t, err)
	require.Nil(t, again, "the stale entry of a claimed VM is not claimable")
	require.False(t, e.p.IdleProvisioned(idle), "nor idle for the surplus removal")
	require.Zero(t, e.p.Counts([]inventory.VM{idle})[Key{Model: "debian12"}], "nor counted in its pool")

	// The inventory catches up: the VM is a worker now. The mark is dropped,
	// and a new provisioned VM with a new reference is claimable.
	worker := inventory.VM{Ref: idle.Ref, Name: "worker-1", PowerState: vctypes.PoweredOn,
		Annotation: &inventory.Annotation{HatcheryName: testHatchery, WorkerName: "worker-1", Created: testNow.Add(-time.Minute)}}
	fresh := poolVM("warmpool-v2-b", "debian12", "", time.Minute)
	e.inv.Set(worker, fresh)
	next, err := e.p.Claim(ctx, v2Model("debian12"), nil, true)
	require.NoError(t, err)
	require.NotNil(t, next)
	require.Equal(t, "warmpool-v2-b", next.Name)
	require.False(t, e.p.Life.RefIn(idle.Ref.Value, lifecycle.Claimed), "the mark of a VM shown as a worker is forgotten")
	require.Equal(t, vctypes.PoweredOff, next.PowerState)
}

// concurrentAccessFault is the error the adapter returns when vCenter
// refuses a reconfigure whose changeVersion is stale: a task fault wrapped
// with the VM's name.
func concurrentAccessFault(name string) error {
	return fmt.Errorf("reconfigure %q: %w", name, task.Error{LocalizedMethodFault: &types.LocalizedMethodFault{
		Fault: &types.ConcurrentAccess{}, LocalizedMessage: "The object has already been modified."}})
}

// TestClaimLostCASMovesOnToNextVM: another instance claimed the oldest
// idle VM first (vCenter refuses the compare-and-swap with ConcurrentAccess):
// the claim takes the next VM, is not an error, and leaves the lost VM
// to the winner (no rename, no power-on, not claimable again here).
func TestClaimLostCASMovesOnToNextVM(t *testing.T) {
	t.Parallel()
	first := poolVM("warmpool-v2-first", "debian12", "", 2*time.Hour)
	second := poolVM("warmpool-v2-second", "debian12", "", time.Hour)
	e := newPoolEnv(t, []inventory.VM{second, first}, false)
	gomock.InOrder(
		e.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), refIs("warmpool-v2-first"), casAt("cv-warmpool-v2-first")).
			Return(concurrentAccessFault("warmpool-v2-first")),
		e.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), refIs("warmpool-v2-second"), casAt("cv-warmpool-v2-second")).
			Return(nil),
	)
	got, err := e.p.Claim(context.Background(), v2Model("debian12"), nil, false)
	require.NoError(t, err)
	require.NotNil(t, got)
	assert.Equal(t, "warmpool-v2-second", got.Name)
	assert.True(t, e.p.Life.In("warmpool-v2-second", lifecycle.Claimed))
	assert.False(t, e.p.Life.In("warmpool-v2-first", lifecycle.Claimed), "the lost vm is not ours")
}

// TestClaimVMGoneMovesOnToNextVM: the oldest idle VM was destroyed since
// the listing (another instance claimed it and its job ended, or removed
// it as surplus): vCenter answers ManagedObjectNotFound to the
// compare-and-swap. The claim takes the next VM and is not an error.
func TestClaimVMGoneMovesOnToNextVM(t *testing.T) {
	t.Parallel()
	first := poolVM("warmpool-v2-first", "debian12", "", 2*time.Hour)
	second := poolVM("warmpool-v2-second", "debian12", "", time.Hour)
	e := newPoolEnv(t, []inventory.VM{second, first}, false)
	gone := fmt.Errorf("reconfigure %q: %w", "warmpool-v2-first", soap.WrapSoapFault(&soap.Fault{
		String: "managed object not found", Detail: struct {
			Fault types.AnyType `xml:",any,typeattr"`
		}{Fault: &types.ManagedObjectNotFound{Obj: types.ManagedObjectReference{Type: first.Ref.Type, Value: first.Ref.Value}}}}))
	gomock.InOrder(
		e.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), refIs("warmpool-v2-first"), casAt("cv-warmpool-v2-first")).
			Return(gone),
		e.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), refIs("warmpool-v2-second"), casAt("cv-warmpool-v2-second")).
			Return(nil),
	)
	got, err := e.p.Claim(context.Background(), v2Model("debian12"), nil, false)
	require.NoError(t, err)
	require.NotNil(t, got)
	assert.Equal(t, "warmpool-v2-second", got.Name)
	assert.False(t, e.p.Life.In("warmpool-v2-first", lifecycle.Claimed), "the gone vm is not ours")
}

// TestClaimCASOtherFaultIsAnError: a reconfigure failing for another
// reason is not a lost race: the claim returns the error (the spawn clones
// instead) and frees the VM for a later claim.
func TestClaimCASOtherFaultIsAnError(t *testing.T) {
	t.Parallel()
	vm := poolVM("warmpool-v2-only", "debian12", "", time.Minute)
	e := newPoolEnv(t, []inventory.VM{vm}, false)
	e.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), refIs("warmpool-v2-only"), casAt("cv-warmpool-v2-only")).
		Return(errors.New("connection reset"))
	got, err := e.p.Claim(context.Background(), v2Model("debian12"), nil, false)
	require.Error(t, err)
	assert.Nil(t, got)
	assert.NotErrorIs(t, err, errClaimLost)
	assert.Contains(t, err.Error(), `"warmpool-v2-only"`)
	assert.False(t, e.p.Life.In("warmpool-v2-only", lifecycle.Claimed))
}

// TestClaimOrderHot: exact flavor hot (suspended or running, oldest first)
// → exact flavor powered off → neutral powered off → none; a hot VM not in
// its recorded state, of another flavor or without a flavor is never
// taken; a spawn that cannot use a hot VM (hotOK false) skips them.
func TestClaimOrderHot(t *testing.T) {
	t.Parallel()
	large := &config.Flavor{Name: "large", CPUs: 4, MemoryMB: 8192}
	vms := []inventory.VM{
		poolVM("warmpool-v2-neutral", "debian12", "", 4*time.Hour),
		poolVM("warmpool-v2-off", "debian12", "large", 3*time.Hour),
		poolVM("warmpool-v2-susp", "debian12", "large", time.Hour, idleIn(config.IdleStateSuspended)),
		poolVM("warmpool-v2-run", "debian12", "large", 2*time.Hour, idleIn(config.IdleStatePoweredOn)),
		// Recorded suspended, found powered off: broken, not idle.
		poolVM("warmpool-v2-broken", "debian12", "large", time.Minute, func(v *inventory.VM) { v.Annotation.IdleState = config.IdleStateSuspended }),
		poolVM("warmpool-v2-small-hot", "debian12", "small", time.Minute, idleIn(config.IdleStateSuspended)),
		poolVM("warmpool-v2-neutral-hot", "debian12", "", time.Minute, idleIn(config.IdleStateSuspended)),
	}
	cases := []struct {
		name  string
		hotOK bool
		want  []string
	}{
		{"hot first", true, []string{"warmpool-v2-run", "warmpool-v2-susp", "warmpool-v2-off", "warmpool-v2-neutral", ""}},
		{"no hot for cloud-init", false, []string{"warmpool-v2-off", "warmpool-v2-neutral", ""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newPoolEnv(t, vms, true)
			for _, want := range tc.want {
				got, err := e.p.Claim(context.Background(), v2Model("debian12"), large, tc.hotOK)
				require.NoError(t, err)
				if want == "" {
					assert.Nil(t, got)
					continue
				}
				require.NotNil(t, got, "want %s", want)
				assert.Equal(t, want, got.Name)
			}
		})
	}
}

// TestClaimedEntryOutlivesItsClaimRecord: the claim's compare-and-swap
// takes the pool flag off the VM's record in vCenter before the spawn
// prepares the VM. A claim by another spawn in between whose inventory
// already shows that record (a listing inventory reads vCenter afresh)
// keeps the first claim's entry: the preparation moves that entry on
// (claimed -> preparing) and would fail were it dropped ("it is gone").
func TestClaimedEntryOutlivesItsClaimRecord(t *testing.T) {
	t.Parallel()
	idle := poolVM("warmpool-v2-a", "debian12", "", time.Minute)
	e := newPoolEnv(t, []inventory.VM{idle}, true)
	ctx := context.Background()

	got, err := e.p.Claim(ctx, v2Model("debian12"), nil, true)
	require.NoError(t, err)
	require.NotNil(t, got)

	claimed := idle
	rec := *idle.Annotation
	rec.Provisioning = false // what claimInVCenter wrote
	claimed.Annotation = &rec
	e.inv.Set(claimed)
	again, err := e.p.Claim(ctx, v2Model("debian12"), nil, true)
	require.NoError(t, err)
	require.Nil(t, again)
	assert.True(t, e.p.Life.RefIn(idle.Ref.Value, lifecycle.Claimed), "the first claim's entry is kept for its preparation")
}
