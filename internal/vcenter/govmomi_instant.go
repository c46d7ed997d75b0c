package vcenter

import (
	"context"
	"fmt"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"
)

// instantCloneTaskTimeout bounds an instant clone task: the fork copies no
// disk (the child's disks are delta disks on the parent's) and shares the
// parent's memory, so vCenter ends it in a few seconds; two minutes cover a
// queued host and a stun of a large parent, as powerTaskTimeout does for a
// power-on, and still free the job for another attempt long before a full
// clone's bound would.
const instantCloneTaskTimeout = 2 * time.Minute

// instantCloneVirtualMachine forks spec.Name from the running parent
// (InstantClone_Task, vSphere 6.7 and later) and waits for the task
// (instantCloneTaskTimeout) under a task slot, as CloneVirtualMachine does;
// it returns the child's reference. The child exists powered on when the
// task ends; its guest re-identifies from spec.Config's guestinfo. A
// parent that is not powered on fails with InvalidPowerState, a taken name
// with DuplicateName (Classify: vctypes.FaultInvalidPowerState,
// FaultDuplicateName).
func (c *Client) instantCloneVirtualMachine(ctx context.Context, parent types.ManagedObjectReference, spec types.VirtualMachineInstantCloneSpec) (*types.ManagedObjectReference, error) {
	if err := c.notConnected(); err != nil {
		return nil, err
	}
	res, err := c.runTask(ctx, instantCloneTaskTimeout, func(ctx context.Context) (*object.Task, error) {
		return c.vm(parent).InstantClone(ctx, spec)
	})
	if err != nil {
		return nil, fmt.Errorf("instant clone %q from parent %q: %w", spec.Name, c.vmName(parent), err)
	}
	ref, ok := res.(types.ManagedObjectReference)
	if !ok {
		return nil, fmt.Errorf("instant clone %q from parent %q: task result is %T, not a reference", spec.Name, c.vmName(parent), res)
	}
	c.col.LearnName(ref, spec.Name)
	c.log.Debug("instant cloned", logkey.VM, spec.Name, "parent", c.vmName(parent))
	return &ref, nil
}
