package vsphere

import (
	"context"
	"errors"

	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
	"github.com/vmware/govmomi/object"
)

// STUB — owned by the spawn-path work (issue 3).

// SpawnWorker starts one worker (001 §6.2).
func (h *HatcheryVSphere) SpawnWorker(ctx context.Context, args hatchery.SpawnArguments) error {
	return errors.New("not implemented")
}

// cloneVM clones templateName into a new VM vmName carrying annot (IP
// allocated and recorded in annot when a range is configured) with the
// flavor applied, powered on. On failure nothing is left holding an IP and a
// half-made VM is marked for deletion.
func (h *HatcheryVSphere) cloneVM(ctx context.Context, templateName, vmName string, annot *Annotation, flavor *FlavorConfig) (*object.VirtualMachine, error) {
	return nil, errors.New("not implemented")
}
