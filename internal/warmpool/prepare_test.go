package warmpool

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/clonespec"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/task"
	"github.com/vmware/govmomi/vim25/types"
)

// claimInTable records vm as claimed, as Pool.Claim does before a
// preparation.
func claimInTable(e *poolEnv, vm inventory.VM) {
	putPhase(e.p.Life, vm.Name, lifecycle.Claimed, lifecycle.WithRef(vm.Ref.Value))
}

// isMarked tells whether name is marked for deletion.
func isMarked(p *Pool, name string) bool { return p.Life.In(name, lifecycle.Marked) }

// TestPrepareClaimedVMNeutralResized: a neutral VM is renamed and
// reconfigured with the new annotation and the flavor by one reconfigure
// while powered off (no rename task), then powered on.
func TestPrepareClaimedVMNeutralResized(t *testing.T) {
	t.Parallel()
	vm := poolVM("warmpool-v2-n", "debian12", "", time.Minute, func(v *inventory.VM) { v.Annotation.IPAddress = "10.0.0.7" })
	e := newPoolEnv(t, []inventory.VM{vm}, true)
	large := &config.Flavor{Name: "large", CPUs: 4, MemoryMB: 8192}
	devices := object.VirtualDeviceList{&types.VirtualDisk{CapacityInKB: 10 << 20}}
	want := inventory.Annotation{
		HatcheryName: testHatchery, WorkerName: "worker-1", JobID: "42", VMwareModelPath: "debian12",
		Created: testNow, IPAddress: "10.0.0.7", Flavor: "large",
	}
	wantSpec := types.VirtualMachineConfigSpec{Name: "worker-1"}
	vcenter.ApplyRecord(&wantSpec, want.Record())
	require.NoError(t, clonespec.ApplyFlavor(&wantSpec, large, devices))

	var gotSpec types.VirtualMachineConfigSpec
	gomock.InOrder(
		e.vs.EXPECT().LoadVirtualMachineDevices(gomock.Any(), refIs("warmpool-v2-n")).Return(devices, nil),
		e.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), refIs("warmpool-v2-n"), gomock.Any()).
			DoAndReturn(func(_ context.Context, _ types.ManagedObjectReference, s types.VirtualMachineConfigSpec) error {
				gotSpec = s
				return nil
			}),
		e.vs.EXPECT().StartVirtualMachine(gomock.Any(), refIs("warmpool-v2-n")).Return(nil),
	)

	claimInTable(e, vm)
	obj, err := e.p.PrepareClaimed(context.Background(), &vm,
		inventory.Annotation{WorkerName: "worker-1", JobID: "42", VMwareModelPath: "debian12", Created: testNow.Add(-5 * time.Hour), Provisioning: true}, large, nil)
	require.NoError(t, err)
	require.NotNil(t, obj)
	assert.Equal(t, wantSpec, gotSpec)
	assert.Equal(t, "worker-1", gotSpec.Name, "the reconfigure renames the vm")
	assert.Equal(t, int32(4), gotSpec.NumCPUs, "the flavor's cpus")
	assert.Equal(t, int64(8192), gotSpec.MemoryMB, "the flavor's memory")
	a, err := inventory.ParseAnnotation(gotSpec.Annotation)
	require.NoError(t, err)
	assert.False(t, a.Provisioning, "a claimed vm is no longer a provisioning vm")
	assert.Equal(t, "10.0.0.7", a.IPAddress, "the static ip stays recorded")
	assert.Equal(t, testHatchery, a.HatcheryName)
	assert.Equal(t, testNow, a.Created, "the registration window starts at the claim")
	assert.False(t, isMarked(e.p, "worker-1"))
	assert.Positive(t, e.inv.Invalidations())
}

// TestPrepareClaimedVMExactNotResized: an exact-flavor VM is already sized:
// no device load, the reconfigure carries the annotation only.
func TestPrepareClaimedVMExactNotResized(t *testing.T) {
	t.Parallel()
	vm := poolVM("warmpool-v2-l", "debian12", "large", time.Minute)
	e := newPoolEnv(t, []inventory.VM{vm}, true)
	gomock.InOrder(
		e.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), refIs("warmpool-v2-l"), gomock.Any()).
			DoAndReturn(func(_ context.Context, _ types.ManagedObjectReference, s types.VirtualMachineConfigSpec) error {
				assert.Equal(t, "worker-2", s.Name)
				assert.Zero(t, s.NumCPUs)
				assert.Zero(t, s.MemoryMB)
				assert.Empty(t, s.DeviceChange)
				return nil
			}),
		e.vs.EXPECT().StartVirtualMachine(gomock.Any(), refIs("warmpool-v2-l")).Return(nil),
	)
	claimInTable(e, vm)
	_, err := e.p.PrepareClaimed(context.Background(), &vm, inventory.Annotation{WorkerName: "worker-2", Created: testNow}, &config.Flavor{Name: "large", CPUs: 4, MemoryMB: 8192}, nil)
	require.NoError(t, err)
}

// TestPrepareClaimedVMFailures: a failed step powers the VM off, marks it
// (under the name it has now: its pool name when vCenter refused the
// renaming reconfigure, both names when that reconfigure's outcome is
// unknown) for deletion and names the step.
func TestPrepareClaimedVMFailures(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	cases := []struct {
		name      string
		setup     func(e *poolEnv)
		step      string
		markName  string
		markNames []string // also marked
		wantErr   any      // an error (errors.Is) or a vCenter fault (fault.Is)
	}{
		{"rename and reconfigure refused", func(e *poolEnv) {
			e.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), gomock.Any(), gomock.Any()).
				Return(fmt.Errorf("reconfigure %q: %w", "warmpool-v2-x", task.Error{LocalizedMethodFault: &types.LocalizedMethodFault{Fault: &types.InvalidState{}}}))
		}, `rename "warmpool-v2-x" to "worker-3" and reconfigure`, "warmpool-v2-x", nil, &types.InvalidState{}},
		{"rename and reconfigure unknown", func(e *poolEnv) {
			e.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), gomock.Any(), gomock.Any()).Return(boom)
		}, `rename "warmpool-v2-x" to "worker-3" and reconfigure`, "warmpool-v2-x", []string{"worker-3"}, boom},
		{"power on", func(e *poolEnv) {
			e.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), gomock.Any(), gomock.Any()).Return(nil)
			e.vs.EXPECT().StartVirtualMachine(gomock.Any(), gomock.Any()).Return(boom)
		}, "power on", "worker-3", nil, boom},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			vm := poolVM("warmpool-v2-x", "debian12", "", time.Minute)
			e := newPoolEnv(t, []inventory.VM{vm}, true)
			tc.setup(e)
			e.vs.EXPECT().ShutdownVirtualMachine(gomock.Any(), refIs("warmpool-v2-x")).Return(nil)
			claimInTable(e, vm)
			_, err := e.p.PrepareClaimed(context.Background(), &vm, inventory.Annotation{WorkerName: "worker-3"}, nil, nil)
			require.Error(t, err)
			if f, ok := tc.wantErr.(types.BaseMethodFault); ok {
				assert.True(t, fault.Is(err, f), "%v", err)
			} else {
				assert.ErrorIs(t, err, tc.wantErr.(error))
			}
			assert.Contains(t, err.Error(), tc.step)
			if tc.step == "power on" {
				assert.Equal(t, metrics.SpawnFailurePowerOn, metrics.SpawnFailureReasonOf(err), "spawns_failed's reason")
			} else {
				assert.Equal(t, metrics.SpawnFailureOther, metrics.SpawnFailureReasonOf(err), "unmarked here: the spawn marks its creation of the vm")
			}
			assert.True(t, isMarked(e.p, tc.markName))
			for _, n := range tc.markNames {
				assert.True(t, isMarked(e.p, n), "%s marked", n)
			}
			if tc.markName != "worker-3" && len(tc.markNames) == 0 {
				assert.False(t, isMarked(e.p, "worker-3"), "never renamed: the worker name is free")
			}
		})
	}
}

// TestPrepareClaimedVMCanceledStillPoweredOff: a spawn whose context ends
// while its claimed VM powers on (shutdown, the job gone) still powers the
// VM off, on a context of its own bounded by guest.Readiness.Cleanup, as
// a failed hot VM is: the VM does not run on, holding its capacity, until
// the cleanup destroys it.
func TestPrepareClaimedVMCanceledStillPoweredOff(t *testing.T) {
	t.Parallel()
	vm := poolVM("warmpool-v2-x", "debian12", "", time.Minute)
	e := newPoolEnv(t, []inventory.VM{vm}, true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), refIs("warmpool-v2-x"), gomock.Any()).Return(nil)
	e.vs.EXPECT().StartVirtualMachine(gomock.Any(), refIs("warmpool-v2-x")).
		DoAndReturn(func(context.Context, vctypes.Ref) error {
			cancel()
			return context.Canceled
		})
	var offErr error
	var offDeadline bool
	e.vs.EXPECT().ShutdownVirtualMachine(gomock.Any(), refIs("warmpool-v2-x")).
		DoAndReturn(func(ctx context.Context, _ vctypes.Ref) error {
			_, offDeadline = ctx.Deadline()
			offErr = ctx.Err()
			return ctx.Err()
		})
	claimInTable(e, vm)
	_, err := e.p.PrepareClaimed(ctx, &vm, inventory.Annotation{WorkerName: "worker-3"}, nil, nil)
	require.ErrorIs(t, err, context.Canceled)
	assert.NoError(t, offErr, "the power-off is not cut short by the spawn's end")
	assert.True(t, offDeadline, "the power-off is bounded")
	assert.True(t, isMarked(e.p, "worker-3"))
}

// TestPrepareClaimedVMRefusesForeign: no call reaches vCenter for a VM that
// is not ours (the strict mock fails on any).
func TestPrepareClaimedVMRefusesForeign(t *testing.T) {
	t.Parallel()
	other := poolVM("warmpool-v2-b", "debian12", "", time.Minute)
	other.Annotation.HatcheryName = "hatch-b"
	bare := inventory.VM{Ref: refOf("warmpool-v2-bare"), Name: "warmpool-v2-bare"}
	tpl := poolVM("warmpool-v2-tpl", "debian12", "", time.Minute, template)
	e := newPoolEnv(t, []inventory.VM{other, bare, tpl}, true)
	for _, vm := range []inventory.VM{other, bare, tpl} {
		_, err := e.p.PrepareClaimed(context.Background(), &vm, inventory.Annotation{WorkerName: "worker-x"}, nil, nil)
		require.Error(t, err, vm.Name)
	}
	_, err := e.p.PrepareClaimed(context.Background(), nil, inventory.Annotation{WorkerName: "worker-x"}, nil, nil)
	require.Error(t, err)
	assert.Zero(t, len(e.p.Life.List(lifecycle.Marked)))
}

// TestPrepareClaimedVMWorkerNameTaken: a worker name the lifecycle table
// already holds is refused before any vCenter call, and the claimed VM is
// idle again (not left claimed, out of its pool, for good).
func TestPrepareClaimedVMWorkerNameTaken(t *testing.T) {
	t.Parallel()
	idle := poolVM("warmpool-v2-a", "debian12", "", time.Minute)
	e := newPoolEnv(t, []inventory.VM{idle}, true) // no vCenter call expected but the compare-and-swap
	got, err := e.p.Claim(context.Background(), v2Model("debian12"), nil, true)
	require.NoError(t, err)
	require.NotNil(t, got)
	putPhase(e.p.Life, "worker-x", lifecycle.Marked)

	_, err = e.p.PrepareClaimed(context.Background(), got, inventory.Annotation{WorkerName: "worker-x"}, nil, nil)
	require.ErrorIs(t, err, lifecycle.ErrWrongPhase)
	assert.Equal(t, lifecycle.Marked, e.p.Life.Phase("worker-x"), "the other VM's entry is untouched")
	assert.True(t, e.p.IdleProvisioned(idle), "the claimed vm is idle again")
}

// TestPreparedVMKeepsItsPhaseUnderItsPoolName: a VM claimed and prepared
// under its worker name is one lifecycle entry, keyed by its reference.
// A lagging snapshot that still shows it idle under its pool name never
// offers it to a claim or the surplus removal, nor counts it in its pool;
// and the worker name reads the same phase. Keyed by name, the pool name
// would read Gone once the entry took the worker name, and the VM would be
// claimed twice.
func TestPreparedVMKeepsItsPhaseUnderItsPoolName(t *testing.T) {
	t.Parallel()
	idle := poolVM("warmpool-v2-a", "debian12", "", time.Minute)
	e := newPoolEnv(t, []inventory.VM{idle}, true) // the claim's compare-and-swap
	got, err := e.p.Claim(context.Background(), v2Model("debian12"), nil, false)
	require.NoError(t, err)
	require.NotNil(t, got)
	e.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), refIs("warmpool-v2-a"), gomock.Any()).Return(nil) // rename and record
	e.vs.EXPECT().StartVirtualMachine(gomock.Any(), refIs("warmpool-v2-a")).Return(nil)
	_, err = e.p.PrepareClaimed(context.Background(), got, inventory.Annotation{WorkerName: "worker-1", JobID: "42"}, nil, nil)
	require.NoError(t, err)

	lagging := lifecycle.VM{Ref: idle.Ref.Value, Name: idle.Name}
	assert.Equal(t, lifecycle.Preparing, e.p.Life.PhaseOf(lagging), "the pool name of a lagging snapshot")
	assert.Equal(t, lifecycle.Preparing, e.p.Life.Phase("worker-1"))
	assert.False(t, e.p.IdleProvisioned(idle), "not idle for a claim or the surplus removal")
	assert.Zero(t, e.p.Counts([]inventory.VM{idle})[Key{Model: "debian12"}], "not counted in its pool")
	again, err := e.p.Claim(context.Background(), v2Model("debian12"), nil, false)
	require.NoError(t, err)
	assert.Nil(t, again, "never claimed twice")
	assert.Len(t, e.p.Life.Snapshot(), 1, "one entry for the VM")
}
