package vcenter

import (
	"context"
	"fmt"
	"sort"

	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/vmware/govmomi/event"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// maxEvents bounds an events query: vCenter's own history is capped near
// 1000 per entity, and without MaxCount it returns only the last 10.
const maxEvents = 1000

// startProgramInGuest runs a program in the guest through the guest
// operations process manager and returns its pid.
func (c *Client) startProgramInGuest(ctx context.Context, vm types.ManagedObjectReference, auth types.BaseGuestAuthentication, spec *types.GuestProgramSpec) (int64, error) {
	if err := c.notConnected(); err != nil {
		return 0, err
	}
	if spec == nil {
		return 0, fmt.Errorf("start program in %q: nil program spec", c.vmName(vm))
	}
	pm, err := c.guestProcessManager(ctx)
	if err != nil {
		return 0, fmt.Errorf("find guest process manager for %q: %w", c.vmName(vm), err)
	}
	res, err := methods.StartProgramInGuest(ctx, c.vim, &types.StartProgramInGuest{This: pm, Vm: vm, Auth: auth, Spec: spec})
	if err != nil {
		return 0, fmt.Errorf("start %q in %q: %w", spec.ProgramPath, c.vmName(vm), err)
	}
	c.log.Debug("started program in guest", logkey.VM, c.vmName(vm), "program", spec.ProgramPath, "pid", res.Returnval)
	return res.Returnval, nil
}

// guestProcessManager returns the guest operations process manager: a
// property of the service's GuestOperationsManager that does not change,
// read once per session instead of before every guest program (two per
// spawn).
func (c *Client) guestProcessManager(ctx context.Context) (types.ManagedObjectReference, error) {
	gen := c.rl.generation()
	c.guestPMMu.Lock()
	pm, at := c.guestPM, c.guestPMGen
	c.guestPMMu.Unlock()
	if pm.Value != "" && at == gen {
		return pm, nil
	}
	var m mo.GuestOperationsManager
	if err := c.pc.RetrieveOne(ctx, *c.vim.ServiceContent.GuestOperationsManager, []string{"processManager"}, &m); err != nil {
		return types.ManagedObjectReference{}, err
	}
	if m.ProcessManager == nil {
		return types.ManagedObjectReference{}, fmt.Errorf("vcenter has no guest process manager")
	}
	c.guestPMMu.Lock()
	c.guestPM, c.guestPMGen = *m.ProcessManager, gen
	c.guestPMMu.Unlock()
	return *m.ProcessManager, nil
}

// loadVirtualMachineEvents returns the VM's events of the given types (all
// types when none), oldest first, at most the last maxEvents.
func (c *Client) loadVirtualMachineEvents(ctx context.Context, vm types.ManagedObjectReference, eventTypes ...string) ([]types.BaseEvent, error) {
	if err := c.notConnected(); err != nil {
		return nil, err
	}
	filter := types.EventFilterSpec{
		Entity: &types.EventFilterSpecByEntity{
			Entity:    vm,
			Recursion: types.EventFilterSpecRecursionOptionSelf,
		},
		EventTypeId: eventTypes,
		MaxCount:    maxEvents,
	}
	events, err := event.NewManager(c.vim).QueryEvents(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("query events of %q: %w", c.vmName(vm), err)
	}
	sort.SliceStable(events, func(i, j int) bool {
		return events[i].GetEvent().Key < events[j].GetEvent().Key
	})
	return events, nil
}
