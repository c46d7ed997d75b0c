package vsphere

import (
	"fmt"
	"strings"

	"github.com/cds-contrib/hatchery-vsphere/internal/capacity"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"
)

// UnknownFlavorError is returned when a job or model asks for a flavor the
// hatchery configuration does not define. It is a spawn error reported to
// the job (docs/design.md#flavor-resolution): there is never a silent fallback to another size.
type UnknownFlavorError struct {
	// Name is the flavor as it was asked for.
	Name string
	// Defined lists the configured flavor names, in configuration order.
	Defined []string
}

// Error names the flavor and the flavors that exist.
func (e *UnknownFlavorError) Error() string {
	defined := "none"
	if len(e.Defined) > 0 {
		defined = strings.Join(e.Defined, ", ")
	}
	return fmt.Sprintf("flavor %q is not defined in hatchery configuration (defined: %s)", e.Name, defined)
}

// resolveFlavor returns the flavor a worker gets (docs/design.md#flavor-resolution), nil for
// none (template resources). An unknown flavor name is an
// *UnknownFlavorError that names it. The result is a copy: callers may not
// change the configuration through it.
func (h *HatcheryVSphere) resolveFlavor(model sdk.WorkerStarterWorkerModel, reqs []sdk.Requirement) (*config.Flavor, error) {
	return lookupFlavor(h.cfg.Flavors, model.GetFlavor(reqs, h.cfg.DefaultFlavor))
}

// lookupFlavor finds name (case-insensitive) among flavors; "" is no flavor.
func lookupFlavor(flavors []config.Flavor, name string) (*config.Flavor, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return nil, nil
	}
	for _, f := range flavors {
		if strings.EqualFold(f.Name, name) {
			c := f
			return &c, nil
		}
	}
	e := &UnknownFlavorError{Name: name}
	for _, f := range flavors {
		e.Defined = append(e.Defined, f.Name)
	}
	return nil, e
}

// smallestSmallerFlavor returns the flavor kept in reserve when f is spawned
// (docs/design.md#starvation-prevention): among the
// flavors with fewer CPUs than f, the one with the fewest CPUs, ties broken
// by less memory, then by name for a stable answer. ok is false when f is
// (one of) the smallest: no reserve applies.
func smallestSmallerFlavor(flavors []config.Flavor, f config.Flavor) (smallest config.Flavor, ok bool) {
	s, ok := capacity.SmallestSmaller(capacityFlavors(flavors), *capacityFlavor(&f))
	if !ok {
		return config.Flavor{}, false
	}
	for _, c := range flavors {
		if c.Name == s.Name {
			return c, true
		}
	}
	return config.Flavor{}, false
}

// applyFlavor writes the flavor's CPU/RAM (and disk growth of the first disk
// of devices) into spec. A nil flavor changes nothing. A diskSizeGB larger
// than the first disk adds an Edit device change growing it; an equal size
// changes nothing; a smaller size is an error (a disk is never shrunk), as
// is a diskSizeGB with no disk in devices.
func applyFlavor(spec *types.VirtualMachineConfigSpec, f *config.Flavor, devices object.VirtualDeviceList) error {
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
