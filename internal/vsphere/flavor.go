package vsphere

import (
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"
)

// STUB — owned by the capacity/flavor work (issue 5).

// resolveFlavor returns the flavor a worker gets (DESIGN §5.2), nil for
// none (template resources). An unknown flavor name is an error that names it.
func (h *HatcheryVSphere) resolveFlavor(model sdk.WorkerStarterWorkerModel, reqs []sdk.Requirement) (*FlavorConfig, error) {
	return nil, nil
}

// applyFlavor writes the flavor's CPU/RAM (and disk growth of the first disk
// of devices) into spec. A nil flavor changes nothing.
func applyFlavor(spec *types.VirtualMachineConfigSpec, f *FlavorConfig, devices object.VirtualDeviceList) error {
	return nil
}
