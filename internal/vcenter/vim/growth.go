package vim

import (
	"fmt"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// ApplyGrowth writes g's CPUs and memory (and the growth of the first
// disk of devices) into spec. A nil g changes nothing. A DiskSizeGB
// larger than the first disk adds an Edit device change growing it; an
// equal size changes nothing; a smaller size is an error (a disk is never
// shrunk), as is a DiskSizeGB with no disk in devices. On error spec is
// left as it was.
func ApplyGrowth(spec *types.VirtualMachineConfigSpec, g *vctypes.Growth, devices object.VirtualDeviceList) error {
	if g == nil {
		return nil
	}
	if spec == nil {
		return fmt.Errorf("apply flavor %q: nil config spec", g.Flavor)
	}
	if g.CPUs <= 0 || g.MemoryMB <= 0 {
		return fmt.Errorf("apply flavor %q: cpus (%d) and memoryMB (%d) must be positive", g.Flavor, g.CPUs, g.MemoryMB)
	}
	if g.DiskSizeGB > 0 {
		change, err := GrowFirstDisk(*g, devices)
		if err != nil {
			return err
		}
		if change != nil {
			spec.DeviceChange = append(spec.DeviceChange, change)
		}
	}
	spec.NumCPUs = g.CPUs
	spec.MemoryMB = g.MemoryMB
	return nil
}

// GrowFirstDisk returns the device change growing the first virtual disk
// of devices to g.DiskSizeGB, nil when it already has that size; an error
// when it is larger (never shrunk) or there is no disk.
func GrowFirstDisk(g vctypes.Growth, devices object.VirtualDeviceList) (*types.VirtualDeviceConfigSpec, error) {
	disks := devices.SelectByType((*types.VirtualDisk)(nil))
	if len(disks) == 0 {
		return nil, fmt.Errorf("apply flavor %q: diskSizeGB is %d but the template has no virtual disk", g.Flavor, g.DiskSizeGB)
	}
	disk, ok := disks[0].(*types.VirtualDisk)
	if !ok {
		return nil, fmt.Errorf("apply flavor %q: first disk has unexpected type %T", g.Flavor, disks[0])
	}
	current := disk.CapacityInBytes
	if current <= 0 {
		current = disk.CapacityInKB * 1024
	}
	want := g.DiskSizeGB << 30
	switch {
	case want < current:
		return nil, fmt.Errorf("apply flavor %q: diskSizeGB %d is smaller than the template's first disk (%d bytes): a disk is never shrunk", g.Flavor, g.DiskSizeGB, current)
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
