package clonespec

import (
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
)

// ApplyFlavor writes the flavor's CPU/RAM (and disk growth of the first
// disk of devices) into a clone's spec: the growth rule is the adapter's
// (vcenter.ApplyGrowth, which the reconfigure applies too). A nil flavor
// changes nothing.
func ApplyFlavor(spec *types.VirtualMachineConfigSpec, f *config.Flavor, devices object.VirtualDeviceList) error {
	return vcenter.ApplyGrowth(spec, f.Growth(), devices)
}

// growFirstDisk returns the device change growing the first virtual disk of
// devices to f.DiskSizeGB, nil when it already has that size
// (vcenter.GrowFirstDisk).
func growFirstDisk(f *config.Flavor, devices object.VirtualDeviceList) (*types.VirtualDeviceConfigSpec, error) {
	return vcenter.GrowFirstDisk(*f.Growth(), devices)
}
