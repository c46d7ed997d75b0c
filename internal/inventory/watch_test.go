package inventory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/mock_vsphere"
)

// watchVC is a vCenter for the watch inventory's unit tests, behind the
// mock: VMs by reference, the change queue VirtualMachineChanges drains,
// and the calls made, in order.
type watchVC struct {
	mu       sync.Mutex
	vms      map[types.ManagedObjectReference]mo.VirtualMachine
	watched  map[types.ManagedObjectReference]bool
	changes  []types.ObjectUpdate
	calls    []string
	reads    [][]types.ManagedObjectReference // RetrieveVirtualMachines arguments
	lost     bool                             // VirtualMachineChanges fails with vctypes.ErrWatchLost
	probeErr error
	pool     types.ResourcePoolRuntimeInfo
}

func wref(name string) types.ManagedObjectReference {
	return types.ManagedObjectReference{Type: "VirtualMachine", Value: name}
}

func watchedObj(name string, power types.VirtualMachinePowerState, changeVersion string) mo.VirtualMachine {
	o := mo.VirtualMachine{}
	o.Self, o.Name = wref(name), name
	o.Runtime.PowerState = power
	o.Config = &types.VirtualMachineConfigInfo{ChangeVersion: changeVersion}
	return o
}

func newWatchVC(t *testing.T, names ...string) (*watchVC, *mock_vsphere.MockPort) {
	t.Helper()
	f := &watchVC{vms: map[types.ManagedObjectReference]mo.VirtualMachine{}, watched: map[types.ManagedObjectReference]bool{}}
	for _, n := range names {
		f.vms[wref(n)] = watchedObj(n, types.VirtualMachinePowerStatePoweredOff, "1")
	}
	f.pool.Memory.UnreservedForVm = 1 << 30
	vs := mock_vsphere.NewMockPort(gomock.NewController(t))
	vs.EXPECT().LoadResourcePool(gomock.Any()).DoAndReturn(func(context.Context) (vctypes.Ref, error) {
		f.call("LoadResourcePool")
		return vctypes.Ref{Type: "ResourcePool", Value: "pool"}, nil
	}).AnyTimes()
	vs.EXPECT().ResetVirtualMachineWatch(gomock.Any()).DoAndReturn(func(context.Context) error {
		f.call("Reset")
		f.mu.Lock()
		defer f.mu.Unlock()
		f.watched, f.changes, f.lost = map[types.ManagedObjectReference]bool{}, nil, false
		return nil
	}).AnyTimes()
	vs.EXPECT().ProbeInventory(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, pool *vctypes.Ref) ([]vctypes.Ref, *vctypes.PoolRuntime, error) {
		f.call("Probe")
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.probeErr != nil {
			return nil, nil, f.probeErr
		}
		var refs []types.ManagedObjectReference
		for r := range f.vms {
			refs = append(refs, r)
		}
		var rt *types.ResourcePoolRuntimeInfo
		if pool != nil {
			cp := f.pool
			rt = &cp
		}
		return vim.RefsOf(refs), vim.PoolRuntimeOf(rt), nil
	}).AnyTimes()
	vs.EXPECT().WatchVirtualMachines(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, refs []vctypes.Ref) error {
		f.call(fmt.Sprintf("Watch %d", len(refs)))
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, r := range vim.MORefs(refs) {
			f.watched[r] = true
		}
		return nil
	}).AnyTimes()
	vs.EXPECT().UnwatchVirtualMachines(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, refs []vctypes.Ref) error {
		f.call(fmt.Sprintf("Unwatch %d", len(refs)))
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, r := range vim.MORefs(refs) {
			delete(f.watched, r)
		}
		return nil
	}).AnyTimes()
	vs.EXPECT().VirtualMachineChanges(gomock.Any()).DoAndReturn(func(context.Context) ([]vctypes.VMUpdate, error) {
		f.call("Changes")
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.lost {
			return nil, fmt.Errorf("wait for updates: %w", vctypes.ErrWatchLost)
		}
		var out []vctypes.VMUpdate
		for _, u := range f.changes {
			out = append(out, vim.VMUpdateOf(u))
		}
		f.changes = nil
		return out, nil
	}).AnyTimes()
	vs.EXPECT().ListVirtualMachines(gomock.Any()).DoAndReturn(func(context.Context) ([]vctypes.VMInfo, error) {
		f.call("List")
		f.mu.Lock()
		defer f.mu.Unlock()
		var out []mo.VirtualMachine
		for _, o := range f.vms {
			out = append(out, o)
		}
		return vim.VMInfosOf(out), nil
	}).AnyTimes()
	vs.EXPECT().RetrieveVirtualMachines(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, refs []vctypes.Ref) ([]vctypes.VMInfo, error) {
		f.call(fmt.Sprintf("Retrieve %d", len(refs)))
		f.mu.Lock()
		defer f.mu.Unlock()
		f.reads = append(f.reads, slices.Clone(vim.MORefs(refs)))
		var out []mo.VirtualMachine
		for _, r := range vim.MORefs(refs) {
			if o, ok := f.vms[r]; ok {
				out = append(out, o)
			}
		}
		return vim.VMInfosOf(out), nil
	}).AnyTimes()
	return f, vs
}

func (f *watchVC) call(c string) {
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()
}

// takeCalls returns the calls since the last take.
func (f *watchVC) takeCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.calls
	f.calls = nil
	return out
}

func (f *watchVC) takeReads() [][]types.ManagedObjectReference {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.reads
	f.reads = nil
	return out
}

// set changes a VM in vCenter and queues what the watch reports of it.
func (f *watchVC) set(o mo.VirtualMachine, report ...types.PropertyChange) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, existed := f.vms[o.Self]
	f.vms[o.Self] = o
	if !f.watched[o.Self] {
		return
	}
	kind := types.ObjectUpdateKindModify
	if !existed {
		kind = types.ObjectUpdateKindEnter
	}
	f.changes = append(f.changes, types.ObjectUpdate{Obj: o.Self, Kind: kind, ChangeSet: report})
}

func (f *watchVC) remove(name string, leave bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := wref(name)
	delete(f.vms, r)
	if leave && f.watched[r] {
		f.changes = append(f.changes, types.ObjectUpdate{Obj: r, Kind: types.ObjectUpdateKindLeave})
	}
}

// newTestWatchInventory is a watch inventory refreshed by hand (no Run).
func newTestWatchInventory(vs vctypes.Port) *Shared {
	return NewWatch(vs, time.Minute, time.Millisecond, nil)
}

func snapshotNames(t *testing.T, inv *Shared) map[string]VM {
	t.Helper()
	vms, err := inv.VMs(context.Background())
	require.NoError(t, err)
	out := map[string]VM{}
	for _, v := range vms {
		out[v.Name] = v
	}
	return out
}

func TestWatchInventoryIdleRefreshIsTwoRequestsAndNoRead(t *testing.T) {
	t.Parallel()
	f, vs := newWatchVC(t, "a", "b", "c")
	inv := newTestWatchInventory(vs)
	ctx := context.Background()

	inv.refresh(ctx)
	assert.Equal(t, []string{"Reset", "LoadResourcePool", "Probe", "Watch 3", "List"}, f.takeCalls(), "first refresh: a resync, the watch started before the listing")
	require.Len(t, snapshotNames(t, inv), 3)

	for range 3 {
		inv.refresh(ctx)
		assert.Equal(t, []string{"Changes", "Probe"}, f.takeCalls(), "idle refresh: the changes and the probe, nothing listed or read")
	}
	rt, at := inv.PoolRuntime()
	require.NotNil(t, rt)
	assert.Equal(t, int64(1<<30), rt.MemoryUnreservedBytes)
	assert.False(t, at.IsZero())
}

func TestWatchInventoryReadsOnlyVMsWhoseSignalsMoved(t *testing.T) {
	t.Parallel()
	f, vs := newWatchVC(t, "a", "b", "c")
	inv := newTestWatchInventory(vs)
	ctx := context.Background()
	inv.refresh(ctx)
	f.takeCalls()

	// b powers on: reported, read, shown.
	f.set(watchedObj("b", types.VirtualMachinePowerStatePoweredOn, "1"),
		types.PropertyChange{Name: "runtime.powerState", Op: types.PropertyChangeOpAssign, Val: types.VirtualMachinePowerStatePoweredOn})
	// c is reported with the values already read (a filter's first report
	// of a VM read just before): nothing to read.
	f.set(watchedObj("c", types.VirtualMachinePowerStatePoweredOff, "1"),
		types.PropertyChange{Name: "name", Val: "c"},
		types.PropertyChange{Name: "config.changeVersion", Val: "1"},
		types.PropertyChange{Name: "runtime.powerState", Val: types.VirtualMachinePowerStatePoweredOff})
	inv.refresh(ctx)
	assert.Equal(t, []string{"Changes", "Probe", "Retrieve 1"}, f.takeCalls())
	assert.Equal(t, [][]types.ManagedObjectReference{{wref("b")}}, f.takeReads())
	assert.True(t, snapshotNames(t, inv)["b"].PoweredOn())

	// a is reconfigured: only config.changeVersion is reported (what vcsim
	// does); the new annotation comes with the read.
	a := watchedObj("a", types.VirtualMachinePowerStatePoweredOff, "2")
	a.Config.Annotation = `{"hatcheryName":"h"}`
	f.set(a, types.PropertyChange{Name: "config.changeVersion", Val: "2"})
	inv.refresh(ctx)
	assert.Equal(t, [][]types.ManagedObjectReference{{wref("a")}}, f.takeReads())

	// A change of a property the watch does not know is read, not guessed.
	f.set(watchedObj("c", types.VirtualMachinePowerStatePoweredOff, "1"), types.PropertyChange{Name: "summary.quickStats", Val: 3})
	inv.refresh(ctx)
	assert.Equal(t, [][]types.ManagedObjectReference{{wref("c")}}, f.takeReads())
}

func TestWatchInventoryNewVMIsWatchedBeforeItIsRead(t *testing.T) {
	t.Parallel()
	f, vs := newWatchVC(t, "a")
	inv := newTestWatchInventory(vs)
	ctx := context.Background()
	inv.refresh(ctx)
	f.takeCalls()

	f.set(watchedObj("new", types.VirtualMachinePowerStatePoweredOn, "1")) // not watched yet: no report
	inv.refresh(ctx)
	assert.Equal(t, []string{"Changes", "Probe", "Watch 1"}, f.takeCalls(), "watched at once, read by the next refresh")
	assert.NotContains(t, snapshotNames(t, inv), "new")
	select {
	case <-inv.kick:
	default:
		t.Fatal("a refresh is asked for, to read the new vm soon")
	}
	inv.refresh(ctx)
	assert.Equal(t, []string{"Changes", "Probe", "Retrieve 1"}, f.takeCalls())
	assert.Contains(t, snapshotNames(t, inv), "new")

	// Its first report by the watch carries what was read: no second read.
	f.set(watchedObj("new", types.VirtualMachinePowerStatePoweredOn, "1"),
		types.PropertyChange{Name: "runtime.powerState", Val: types.VirtualMachinePowerStatePoweredOn})
	inv.refresh(ctx)
	assert.Equal(t, []string{"Changes", "Probe"}, f.takeCalls())
}

func TestWatchInventoryDropsGoneVMs(t *testing.T) {
	t.Parallel()
	f, vs := newWatchVC(t, "a", "b", "c")
	inv := newTestWatchInventory(vs)
	ctx := context.Background()
	inv.refresh(ctx)
	f.takeCalls()

	f.remove("a", true)  // reported as left
	f.remove("b", false) // only missing from the probe
	inv.refresh(ctx)
	got := snapshotNames(t, inv)
	assert.NotContains(t, got, "a")
	assert.NotContains(t, got, "b")
	assert.Contains(t, got, "c")
	assert.Equal(t, []string{"Changes", "Probe", "Unwatch 1"}, f.takeCalls(), "a left the watch itself; b is unwatched")
}

func TestWatchInventoryInvalidatedVMIsReadAgain(t *testing.T) {
	t.Parallel()
	f, vs := newWatchVC(t, "a", "b")
	inv := newTestWatchInventory(vs)
	ctx := context.Background()
	inv.refresh(ctx)
	f.takeCalls()

	// vcsim's MarkAsTemplate reports nothing: the hatchery names the VM.
	tpl := watchedObj("b", types.VirtualMachinePowerStatePoweredOff, "1")
	tpl.Config.Template = true
	f.set(tpl)
	f.mu.Lock()
	f.changes = nil
	f.mu.Unlock()
	inv.Invalidate(vim.RefOf(wref("b")))
	inv.refresh(ctx)
	assert.Equal(t, [][]types.ManagedObjectReference{{wref("b")}}, f.takeReads())
	assert.True(t, snapshotNames(t, inv)["b"].Template)
}

func TestWatchInventoryResyncsWhenTheWatchIsLost(t *testing.T) {
	t.Parallel()
	f, vs := newWatchVC(t, "a")
	inv := newTestWatchInventory(vs)
	ctx := context.Background()
	inv.refresh(ctx)
	f.takeCalls()

	f.mu.Lock()
	f.lost = true
	f.vms[wref("z")] = watchedObj("z", types.VirtualMachinePowerStatePoweredOn, "1")
	f.mu.Unlock()
	inv.refresh(ctx)
	assert.Equal(t, []string{"Changes", "Reset", "Probe", "Watch 2", "List"}, f.takeCalls())
	require.NoError(t, inv.Stats().LastErr)
	assert.Contains(t, snapshotNames(t, inv), "z")
}

func TestWatchInventoryErrorKeepsSnapshotAndResyncsNext(t *testing.T) {
	t.Parallel()
	f, vs := newWatchVC(t, "a")
	inv := newTestWatchInventory(vs)
	ctx := context.Background()
	inv.refresh(ctx)
	f.takeCalls()

	// The changes are drained, then the probe fails: a's change must not
	// be lost.
	f.set(watchedObj("a", types.VirtualMachinePowerStatePoweredOn, "1"), types.PropertyChange{Name: "runtime.powerState", Val: types.VirtualMachinePowerStatePoweredOn})
	f.mu.Lock()
	f.probeErr = errors.New("connection refused")
	f.mu.Unlock()
	inv.refresh(ctx)
	require.Error(t, inv.Stats().LastErr)
	assert.False(t, snapshotNames(t, inv)["a"].PoweredOn(), "the last snapshot is kept")

	f.mu.Lock()
	f.probeErr = nil
	f.mu.Unlock()
	f.takeCalls()
	inv.refresh(ctx)
	assert.Equal(t, []string{"Reset", "Probe", "Watch 1", "List"}, f.takeCalls(), "after an error the next refresh starts again from a listing")
	assert.True(t, snapshotNames(t, inv)["a"].PoweredOn())
}

func TestWatchInventoryPeriodicResync(t *testing.T) {
	t.Parallel()
	f, vs := newWatchVC(t, "a")
	inv := newTestWatchInventory(vs)
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	inv.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	ctx := context.Background()
	inv.refresh(ctx)
	f.takeCalls()

	mu.Lock()
	now = now.Add(WatchResyncInterval - time.Second)
	mu.Unlock()
	inv.refresh(ctx)
	assert.Equal(t, []string{"Changes", "Probe"}, f.takeCalls())
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	inv.refresh(ctx)
	assert.Equal(t, []string{"Reset", "Probe", "Watch 1", "List"}, f.takeCalls())
}

func TestVMSignalsApply(t *testing.T) {
	t.Parallel()
	base := vmSignals{name: "a", changeVersion: "1", powerState: vctypes.PoweredOff}
	got, ok := base.apply(changesOf(
		types.PropertyChange{Name: "name", Val: "b"},
		types.PropertyChange{Name: "guest.ipAddress", Val: "10.0.0.5"},
		types.PropertyChange{Name: "guest.guestOperationsReady", Val: true},
		types.PropertyChange{Name: "runtime.powerState", Val: "poweredOn"},
		types.PropertyChange{Name: "config.template", Val: false},
	))
	require.True(t, ok)
	assert.Equal(t, vmSignals{name: "b", changeVersion: "1", powerState: vctypes.PoweredOn, ipAddress: "10.0.0.5", opsReady: true}, got)

	got, ok = got.apply(changesOf(types.PropertyChange{Name: "guest.ipAddress", Op: types.PropertyChangeOpRemove}))
	require.True(t, ok)
	assert.Empty(t, got.ipAddress)

	_, ok = base.apply(changesOf(types.PropertyChange{Name: "config.changeVersion", Val: 7}))
	assert.False(t, ok, "a value of the wrong type is not guessed")

	got, ok = base.apply(changesOf(types.PropertyChange{Name: "runtime.powerState", Val: types.VirtualMachinePowerStateSuspended}))
	require.True(t, ok)
	assert.Equal(t, vctypes.Suspended, got.powerState, "govmomi's power state comes as the project's")
}

// changesOf is a change set as the adapter hands it to the inventory
// (vim.VMUpdateOf).
func changesOf(cs ...types.PropertyChange) []vctypes.PropertyChange {
	return vim.VMUpdateOf(types.ObjectUpdate{ChangeSet: cs}).Changes
}
