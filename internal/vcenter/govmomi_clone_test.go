package vcenter_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// TestTemplateOf: a template read with config.hardware.device and
// snapshot becomes its cards counted, its disks (capacityInBytes, else
// capacityInKB; the backing's datastore, zero when it names none) and
// its snapshots depth first with the current one.
func TestTemplateOf(t *testing.T) {
	t.Parallel()
	ds := types.ManagedObjectReference{Type: "Datastore", Value: "datastore-1"}
	devices := testutil.TemplateDevices(2) // a 10 GB disk in KB, two cards
	devices[0].(*types.VirtualDisk).Backing = &types.VirtualDiskFlatVer2BackingInfo{
		VirtualDeviceFileBackingInfo: types.VirtualDeviceFileBackingInfo{FileName: "[ds] t/t.vmdk", Datastore: &ds},
	}
	devices = append(devices, &types.VirtualDisk{VirtualDevice: types.VirtualDevice{Key: 2001}, CapacityInBytes: 1 << 30})
	snap := func(id string) types.ManagedObjectReference {
		return types.ManagedObjectReference{Type: "VirtualMachineSnapshot", Value: id}
	}
	cur := snap("snapshot-3")
	o := mo.VirtualMachine{
		Config: &types.VirtualMachineConfigInfo{Hardware: types.VirtualHardware{Device: devices}},
		Snapshot: &types.VirtualMachineSnapshotInfo{CurrentSnapshot: &cur, RootSnapshotList: []types.VirtualMachineSnapshotTree{
			{Name: "base", Snapshot: snap("snapshot-1"), ChildSnapshotList: []types.VirtualMachineSnapshotTree{{Name: "child", Snapshot: snap("snapshot-2")}}},
			{Name: "golden", Snapshot: cur},
		}},
	}
	ref := types.ManagedObjectReference{Type: "VirtualMachine", Value: "vm-7"}
	got := vcenter.TemplateOf(ref, o)
	assert.Equal(t, vctypes.Ref{Type: "VirtualMachine", Value: "vm-7"}, got.Ref)
	assert.Equal(t, 2, got.NICs)
	assert.Equal(t, []vctypes.Disk{
		{CapacityBytes: 10 << 30, Datastore: vctypes.Ref{Type: "Datastore", Value: "datastore-1"}},
		{CapacityBytes: 1 << 30},
	}, got.Disks)
	assert.Equal(t, vcenter.RefOf(cur), got.CurrentSnapshot)
	var names []string
	for _, s := range got.Snapshots {
		names = append(names, s.Name)
	}
	assert.Equal(t, []string{"base", "child", "golden"}, names, "depth first")
	assert.Equal(t, vctypes.Ref{Type: "VirtualMachineSnapshot", Value: "snapshot-2"}, got.Snapshots[1].Ref)

	empty := vcenter.TemplateOf(ref, mo.VirtualMachine{})
	assert.Zero(t, empty.NICs)
	assert.True(t, empty.CurrentSnapshot.IsZero())
}
