package vsphere

import (
	"context"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/vmware/govmomi/object"
)

// STUB — owned by the warm-pool work (issue 4).

// claimProvisionedVM picks an idle provisioned VM for model (exact flavor,
// then neutral; DESIGN §5.3), marks it as being used and returns it; nil,nil
// when none is available.
func (h *HatcheryVSphere) claimProvisionedVM(ctx context.Context, model sdk.WorkerStarterWorkerModel, flavor *FlavorConfig) (*VM, error) {
	return nil, nil
}

// prepareClaimedVM turns a claimed VM into the worker: rename to
// annot.WorkerName, write annot (and the flavor's CPU/RAM when the VM is
// neutral) while powered off, power on. On error the VM is marked for deletion.
func (h *HatcheryVSphere) prepareClaimedVM(ctx context.Context, vm *VM, annot Annotation, flavor *FlavorConfig) (*object.VirtualMachine, error) {
	return nil, nil
}

// releaseClaim forgets the claim of a provisioned VM (spawn finished or failed).
func (h *HatcheryVSphere) releaseClaim(vmName string) { h.provUsing.Remove(vmName) }
