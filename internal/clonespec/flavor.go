package clonespec

import (
	"fmt"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"
)

// ApplyFlavor writes the flavor's CPU/RAM (and disk growth of the first disk
// of devices) into spec. A nil flavor changes nothing. A diskSizeGB larger
// than the first disk adds an Edit device change growing it; an equal size
// changes nothing; a smaller size is an error (a disk is never shrunk), as
// is a diskSizeGB with no disk in devices.
func ApplyFlavor(spec *types.VirtualMachineConfigSpec, f *config.Flavor, devices object.VirtualDeviceList) error {
	if f == nil {
		return nil
	}
	if spec == nil {
		return fmt.Errorf("apply flavor %q: nil config spec", f.Name)
	}
	if f.CPUs <= 0 || f.MemoryMB <= 0 {
		return fmt.Errorf("apply flavor %q: cpus (%d) and memoryMB (%d) must be positive", f.Name, f.CPUs, f.MemoryMB)
	}
	if f.DiskSizeGB > 0 {
		change, err := growFirstDisk(f, devices)
		if err != nil {
			return err
		}
		if change != nil {
			spec.DeviceChange = append(spec.DeviceChange, change)
		}
	}
	spec.NumCPUs = f.CPUs
	spec.MemoryMB = f.MemoryMB
	return nil
}

// growFirstDisk returns the device change growing the first virtual disk of
// devices to f.DiskSizeGB, nil when it already has that size.
func growFirstDisk(f *config.Flavor, devices object.VirtualDeviceList) (*types.VirtualDeviceConfigSpec, error) {
	disks := devices.SelectByType((*types.VirtualDisk)(nil))
	if len(disks) == 0 {
		return nil, fmt.Errorf("apply flavor %q: diskSizeGB is %d but the template has no virtual disk", f.Name, f.DiskSizeGB)
	}
	disk, ok := disks[0].(*types.VirtualDisk)
	if !ok {
		return nil, fmt.Errorf("apply flavor %q: first disk has unexpected type %T", f.Name, disks[0])
	}
	current := disk.CapacityInBytes
	if current <= 0 {
		current = disk.CapacityInKB * 1024
	}
	want := f.DiskSizeGB << 30
	switch {
	case want < current:
		return nil, fmt.Errorf("apply flavor %q: diskSizeGB %d is smaller than the template's first disk (%d bytes): a disk is never shrunk", f.Name, f.DiskSizeGB, current)
	case want == current:
		return nil, nil
	}
	// A copy: the caller's device list (the template's) is left as it was.
	grown := *disk
	grown.CapacityInBytes = want
	grown.CapacityInKB = want / 1024
	return &types.VirtualDeviceConfigSpec{
		Operation: types.VirtualDeviceConfigSpecOperationEdit,
		Device:    &grown,
	}, nil
}
