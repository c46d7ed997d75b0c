package vsphere

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/clonespec"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/task"
	"github.com/vmware/govmomi/vim25/types"
)

func v2Model(image string) sdk.WorkerStarterWorkerModel {
	return sdk.WorkerStarterWorkerModel{
		ModelV2:     &sdk.V2WorkerModel{Name: "my-model", Type: sdk.VSphere},
		VSphereSpec: sdk.V2WorkerModelVSphereSpec{Image: image},
	}
}

func v1Model(group, name string) sdk.WorkerStarterWorkerModel {
	return sdk.WorkerStarterWorkerModel{ModelV1: &sdk.Model{Name: name, Type: sdk.VSphere, Group: &sdk.Group{Name: group}}}
}

// idleDebianPool is n idle V2 pool VMs of the model debian12.
func idleDebianPool(n int) []inventory.VM {
	var vms []inventory.VM
	for i := range n {
		vms = append(vms, warmProvVM(fmt.Sprintf("provision-v2-%02d", i), "debian12", ""))
	}
	return vms
}

// startClaimers starts n goroutines (joined through wg) that each claim one
// debian12 VM once start is closed, appending what they got to got under mu.
func startClaimers(e *warmEnv, n int, start <-chan struct{}, wg *sync.WaitGroup, mu *sync.Mutex, got *[]string) {
	for range n {
		wg.Go(func() {
			<-start
			vm, err := e.h.pool.Claim(context.Background(), v2Model("debian12"), nil, true)
			if err != nil || vm == nil {
				return
			}
			mu.Lock()
			*got = append(*got, vm.Name)
			mu.Unlock()
		})
	}
}

// TestClaimsRaceSurplusRemoval: claims and the surplus removal race on the
// same idle VMs; each VM is either claimed once or destroyed, never both
// (run with -race). The inventory here never catches up: a claim listing
// it after a destroy must not take the destroyed VM.
func TestClaimsRaceSurplusRemoval(t *testing.T) {
	t.Parallel()
	const pool, claimers = 6, 8
	vms := idleDebianPool(pool)
	e := newWarmEnv(t, warmConfig(), vms, nil)
	var (
		mu        sync.Mutex
		claimed   []string
		destroyed []string
		wg        sync.WaitGroup
	)
	e.vs.EXPECT().DestroyVirtualMachine(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, ref types.ManagedObjectReference) error {
		mu.Lock()
		defer mu.Unlock()
		destroyed = append(destroyed, strings.TrimPrefix(ref.Value, "vm-"))
		return nil
	}).AnyTimes()
	start := make(chan struct{})
	startClaimers(e, claimers, start, &wg, &mu, &claimed)
	wg.Go(func() {
		<-start
		// The pool is configured to zero: every idle VM is surplus.
		e.h.pool.RemoveSurplus(context.Background(), vms, e.h.pool.Counts(vms), nil)
	})
	close(start)
	wg.Wait()

	taken := map[string]int{}
	for _, n := range append(claimed, destroyed...) {
		taken[n]++
	}
	assert.Len(t, taken, pool, "every idle vm is claimed or destroyed")
	for n, c := range taken {
		assert.Equal(t, 1, c, "%s claimed or destroyed more than once", n)
	}
	for _, n := range destroyed {
		// A snapshot taken before the destroy still shows it: never
		// offered again until a listing no longer does.
		assert.Equal(t, lifecycle.Destroyed, e.h.life.Phase(n), "%s destroyed", n)
	}
	for _, n := range claimed {
		assert.Equal(t, lifecycle.Claimed, e.h.life.Phase(n))
	}
}

// TestPrepareClaimedVMNeutralResized: a neutral VM is renamed and
// reconfigured with the new annotation and the flavor by one reconfigure
// while powered off (no rename task), then powered on.
func TestPrepareClaimedVMNeutralResized(t *testing.T) {
	t.Parallel()
	vm := warmProvVM("provision-v2-n", "debian12", "", wAnnot(func(a *inventory.Annotation) { a.IPAddress = "10.0.0.7" }))
	e := newWarmEnv(t, warmConfig(), []inventory.VM{vm}, nil)
	large := &config.Flavor{Name: "large", CPUs: 4, MemoryMB: 8192}
	devices := object.VirtualDeviceList{&types.VirtualDisk{CapacityInKB: 10 << 20}}
	want := inventory.Annotation{
		HatcheryName: warmHatcheryName, WorkerName: "worker-1", JobID: "42", VMwareModelPath: "debian12",
		Created: warmNow, IPAddress: "10.0.0.7", Flavor: "large",
	}
	wantSpec := types.VirtualMachineConfigSpec{Name: "worker-1"}
	want.ApplyTo(&wantSpec)
	require.NoError(t, clonespec.ApplyFlavor(&wantSpec, large, devices))

	var gotSpec types.VirtualMachineConfigSpec
	gomock.InOrder(
		e.vs.EXPECT().LoadVirtualMachineDevices(gomock.Any(), warmRefIs("provision-v2-n")).Return(devices, nil),
		e.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), warmRefIs("provision-v2-n"), gomock.Any()).
			DoAndReturn(func(_ context.Context, _ types.ManagedObjectReference, s types.VirtualMachineConfigSpec) error {
				gotSpec = s
				return nil
			}),
		e.vs.EXPECT().StartVirtualMachine(gomock.Any(), warmRefIs("provision-v2-n")).Return(nil),
	)

	obj, err := e.h.pool.PrepareClaimed(context.Background(), &vm,
		inventory.Annotation{WorkerName: "worker-1", JobID: "42", VMwareModelPath: "debian12", Created: warmNow.Add(-5 * time.Hour), Provisioning: true}, large, nil)
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
	assert.Equal(t, warmHatcheryName, a.HatcheryName)
	assert.Equal(t, warmNow, a.Created, "the registration window starts at the claim")
	assert.False(t, isMarked(e.h, "worker-1"))
	assert.Positive(t, e.inv.invalidated.Load())
}

// TestPrepareClaimedVMExactNotResized: an exact-flavor VM is already sized:
// no device load, the reconfigure carries the annotation only.
func TestPrepareClaimedVMExactNotResized(t *testing.T) {
	t.Parallel()
	vm := warmProvVM("provision-v2-l", "debian12", "large")
	e := newWarmEnv(t, warmConfig(), []inventory.VM{vm}, nil)
	gomock.InOrder(
		e.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), warmRefIs("provision-v2-l"), gomock.Any()).
			DoAndReturn(func(_ context.Context, _ types.ManagedObjectReference, s types.VirtualMachineConfigSpec) error {
				assert.Equal(t, "worker-2", s.Name)
				assert.Zero(t, s.NumCPUs)
				assert.Zero(t, s.MemoryMB)
				assert.Empty(t, s.DeviceChange)
				return nil
			}),
		e.vs.EXPECT().StartVirtualMachine(gomock.Any(), warmRefIs("provision-v2-l")).Return(nil),
	)
	_, err := e.h.pool.PrepareClaimed(context.Background(), &vm, inventory.Annotation{WorkerName: "worker-2", Created: warmNow}, &config.Flavor{Name: "large", CPUs: 4, MemoryMB: 8192}, nil)
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
		setup     func(e *warmEnv)
		step      string
		markName  string
		markNames []string // also marked
		wantErr   any      // an error (errors.Is) or a vCenter fault (fault.Is)
	}{
		{"rename and reconfigure refused", func(e *warmEnv) {
			e.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), gomock.Any(), gomock.Any()).
				Return(fmt.Errorf("reconfigure %q: %w", "provision-v2-x", task.Error{LocalizedMethodFault: &types.LocalizedMethodFault{Fault: &types.InvalidState{}}}))
		}, `rename "provision-v2-x" to "worker-3" and reconfigure`, "provision-v2-x", nil, &types.InvalidState{}},
		{"rename and reconfigure unknown", func(e *warmEnv) {
			e.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), gomock.Any(), gomock.Any()).Return(boom)
		}, `rename "provision-v2-x" to "worker-3" and reconfigure`, "provision-v2-x", []string{"worker-3"}, boom},
		{"power on", func(e *warmEnv) {
			e.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), gomock.Any(), gomock.Any()).Return(nil)
			e.vs.EXPECT().StartVirtualMachine(gomock.Any(), gomock.Any()).Return(boom)
		}, "power on", "worker-3", nil, boom},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			vm := warmProvVM("provision-v2-x", "debian12", "")
			e := newWarmEnv(t, warmConfig(), []inventory.VM{vm}, nil)
			tc.setup(e)
			e.vs.EXPECT().ShutdownVirtualMachine(gomock.Any(), warmRefIs("provision-v2-x")).Return(nil)
			_, err := e.h.pool.PrepareClaimed(context.Background(), &vm, inventory.Annotation{WorkerName: "worker-3"}, nil, nil)
			require.Error(t, err)
			if f, ok := tc.wantErr.(types.BaseMethodFault); ok {
				assert.True(t, fault.Is(err, f), "%v", err)
			} else {
				assert.ErrorIs(t, err, tc.wantErr.(error))
			}
			assert.Contains(t, err.Error(), tc.step)
			assert.True(t, isMarked(e.h, tc.markName))
			for _, n := range tc.markNames {
				assert.True(t, isMarked(e.h, n), "%s marked", n)
			}
			if tc.markName != "worker-3" && len(tc.markNames) == 0 {
				assert.False(t, isMarked(e.h, "worker-3"), "never renamed: the worker name is free")
			}
		})
	}
}

// TestPrepareClaimedVMRefusesForeign: no call reaches vCenter for a VM that
// is not ours (the strict mock fails on any).
func TestPrepareClaimedVMRefusesForeign(t *testing.T) {
	t.Parallel()
	other := warmProvVM("provision-v2-b", "debian12", "")
	other.Annotation.HatcheryName = "hatch-b"
	bare := inventory.VM{Ref: warmRef("provision-v2-bare"), Name: "provision-v2-bare"}
	tpl := warmProvVM("provision-v2-tpl", "debian12", "", wTemplate)
	e := newWarmEnv(t, warmConfig(), []inventory.VM{other, bare, tpl}, nil)
	for _, vm := range []inventory.VM{other, bare, tpl} {
		_, err := e.h.pool.PrepareClaimed(context.Background(), &vm, inventory.Annotation{WorkerName: "worker-x"}, nil, nil)
		require.Error(t, err, vm.Name)
	}
	_, err := e.h.pool.PrepareClaimed(context.Background(), nil, inventory.Annotation{WorkerName: "worker-x"}, nil, nil)
	require.Error(t, err)
	assert.Zero(t, len(markedNames(e.h)))
}

// TestPrepareClaimedVMWorkerNameTaken: a worker name the lifecycle table
// already holds is refused before any vCenter call, and the claimed VM is
// idle again (not left claimed, out of its pool, for good).
func TestPrepareClaimedVMWorkerNameTaken(t *testing.T) {
	t.Parallel()
	idle := warmProvVM("provision-v2-a", "debian12", "")
	e := newWarmEnv(t, warmConfig(), []inventory.VM{idle}, nil) // no vCenter call expected
	got, err := e.h.pool.Claim(context.Background(), v2Model("debian12"), nil, true)
	require.NoError(t, err)
	require.NotNil(t, got)
	putPhase(e.h, "worker-x", lifecycle.Marked)

	_, err = e.h.pool.PrepareClaimed(context.Background(), got, inventory.Annotation{WorkerName: "worker-x"}, nil, nil)
	require.ErrorIs(t, err, lifecycle.ErrWrongPhase)
	assert.Equal(t, lifecycle.Marked, e.h.life.Phase("worker-x"), "the other VM's entry is untouched")
	assert.True(t, e.h.pool.IdleProvisioned(idle), "the claimed vm is idle again")
}

// concurrentAccessFault is the error the adapter returns when vCenter
// refuses a reconfigure whose changeVersion is stale: a task fault wrapped
// with the VM's name.
