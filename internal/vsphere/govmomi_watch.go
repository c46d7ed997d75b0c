package vsphere

import (
	"context"
	"errors"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// STUB: replaced by the adapter implementation.
var errWatchNotImplemented = errors.New("not implemented")

// ProbeInventory implements VSphereClient.
func (c *GovmomiClient) ProbeInventory(ctx context.Context, pool *object.ResourcePool) ([]types.ManagedObjectReference, *types.ResourcePoolRuntimeInfo, error) {
	return nil, nil, errWatchNotImplemented
}

// RetrieveVirtualMachines implements VSphereClient.
func (c *GovmomiClient) RetrieveVirtualMachines(ctx context.Context, refs []types.ManagedObjectReference) ([]mo.VirtualMachine, error) {
	return nil, errWatchNotImplemented
}

// ResetVirtualMachineWatch implements VSphereClient.
func (c *GovmomiClient) ResetVirtualMachineWatch(ctx context.Context) error {
	return errWatchNotImplemented
}

// WatchVirtualMachines implements VSphereClient.
func (c *GovmomiClient) WatchVirtualMachines(ctx context.Context, refs []types.ManagedObjectReference) error {
	return errWatchNotImplemented
}

// UnwatchVirtualMachines implements VSphereClient.
func (c *GovmomiClient) UnwatchVirtualMachines(ctx context.Context, refs []types.ManagedObjectReference) error {
	return errWatchNotImplemented
}

// VirtualMachineChanges implements VSphereClient.
func (c *GovmomiClient) VirtualMachineChanges(ctx context.Context) ([]types.ObjectUpdate, error) {
	return nil, errWatchNotImplemented
}
