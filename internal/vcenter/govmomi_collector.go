package vcenter

import (
	"context"

	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// The property-collector side is internal/vcenter/vim's Collector (the
// scope's views and listing, the VM change watch and the scope's
// membership, the probe, the wait collector and its waits), made at
// Connect; the Client checks the connection and classifies the errors
// (adapter_port.go) around it.

// ResetVirtualMachineWatch drops the VM change watch (its collector is
// destroyed, best effort, when it belongs to the current session) and
// starts an empty one: a new property collector and its baseline version.
// Cost: 2 requests (3 when an old collector is destroyed).
func (c *Client) ResetVirtualMachineWatch(ctx context.Context) error {
	if err := c.notConnected(); err != nil {
		return err
	}
	return c.col.ResetVirtualMachineWatch(ctx)
}

// listVirtualMachines lists every VM and template of the inventory's scope
// (govmomi_scope.go), VMProperties read, in one RetrieveProperties.
func (c *Client) listVirtualMachines(ctx context.Context) ([]mo.VirtualMachine, error) {
	if err := c.notConnected(); err != nil {
		return nil, err
	}
	return c.col.ListVirtualMachines(ctx)
}

// retrieveVirtualMachines reads VMProperties of the given VMs by
// reference; VMs that no longer exist are left out.
func (c *Client) retrieveVirtualMachines(ctx context.Context, refs []types.ManagedObjectReference) ([]mo.VirtualMachine, error) {
	if err := c.notConnected(); err != nil {
		return nil, err
	}
	return c.col.RetrieveVirtualMachines(ctx, refs)
}
