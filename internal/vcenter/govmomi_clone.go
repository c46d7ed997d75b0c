package vcenter

import (
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// TemplateOf is what a clone needs of the template o (read with
// config.hardware.device and snapshot, LoadTemplate) in the project's
// terms: its network cards counted, its disks' sizes and datastores, its
// snapshots depth first and the current one.
func TemplateOf(ref types.ManagedObjectReference, o mo.VirtualMachine) vctypes.Template {
	t := vctypes.Template{Ref: RefOf(ref)}
	if o.Config != nil {
		devices := object.VirtualDeviceList(o.Config.Hardware.Device)
		t.NICs = len(devices.SelectByType((*types.VirtualEthernetCard)(nil)))
		for _, d := range devices.SelectByType((*types.VirtualDisk)(nil)) {
			if disk, ok := d.(*types.VirtualDisk); ok {
				t.Disks = append(t.Disks, diskOf(disk))
			}
		}
	}
	if o.Snapshot == nil {
		return t
	}
	if o.Snapshot.CurrentSnapshot != nil {
		t.CurrentSnapshot = RefOf(*o.Snapshot.CurrentSnapshot)
	}
	var walk func([]types.VirtualMachineSnapshotTree)
	walk = func(nodes []types.VirtualMachineSnapshotTree) {
		for _, n := range nodes {
			t.Snapshots = append(t.Snapshots, vctypes.Snapshot{Name: n.Name, Ref: RefOf(n.Snapshot)})
			walk(n.ChildSnapshotList)
		}
	}
	walk(o.Snapshot.RootSnapshotList)
	return t
}

// diskOf is a virtual disk's size (capacityInBytes, else capacityInKB)
// and the datastore of its backing file.
func diskOf(disk *types.VirtualDisk) vctypes.Disk {
	d := vctypes.Disk{CapacityBytes: disk.CapacityInBytes}
	if d.CapacityBytes <= 0 {
		d.CapacityBytes = disk.CapacityInKB * 1024
	}
	if fb, ok := disk.Backing.(types.BaseVirtualDeviceFileBackingInfo); ok {
		if ds := fb.GetVirtualDeviceFileBackingInfo().Datastore; ds != nil {
			d.Datastore = RefOf(*ds)
		}
	}
	return d
}
