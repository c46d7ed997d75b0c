package vcenter

import (
	"context"

	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// The govmomi-level reads behind InventorySource, for the external tests
// that check what vCenter was asked and answered (only the leaf
// properties, the change sets' raw values, the watch's filters); the
// port's face (adapter_port.go) converts them with vocabulary.go, which
// TestInventorySourceSpeaksVocabulary checks.

// ListVirtualMachineObjects is ListVirtualMachines before conversion.
func (c *Client) ListVirtualMachineObjects(ctx context.Context) ([]mo.VirtualMachine, error) {
	return c.listVirtualMachines(ctx)
}

// ProbeInventoryRefs is ProbeInventory before conversion.
func (c *Client) ProbeInventoryRefs(ctx context.Context, pool *types.ManagedObjectReference) ([]types.ManagedObjectReference, *types.ResourcePoolRuntimeInfo, error) {
	return c.col.ProbeInventory(ctx, pool)
}

// RetrieveVirtualMachineObjects is RetrieveVirtualMachines before conversion.
func (c *Client) RetrieveVirtualMachineObjects(ctx context.Context, refs []types.ManagedObjectReference) ([]mo.VirtualMachine, error) {
	return c.retrieveVirtualMachines(ctx, refs)
}

// WatchVirtualMachineRefs is WatchVirtualMachines before conversion.
func (c *Client) WatchVirtualMachineRefs(ctx context.Context, refs []types.ManagedObjectReference) error {
	return c.col.WatchVirtualMachines(ctx, refs)
}

// UnwatchVirtualMachineRefs is UnwatchVirtualMachines before conversion.
func (c *Client) UnwatchVirtualMachineRefs(ctx context.Context, refs []types.ManagedObjectReference) error {
	return c.col.UnwatchVirtualMachines(ctx, refs)
}

// VirtualMachineObjectUpdates is VirtualMachineChanges before conversion.
func (c *Client) VirtualMachineObjectUpdates(ctx context.Context) ([]types.ObjectUpdate, error) {
	return c.col.VirtualMachineChanges(ctx)
}
