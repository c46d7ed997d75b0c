package vcenter

import (
	"context"
	"fmt"
	"net"
	"sort"

	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/vmware/govmomi/event"
	"github.com/vmware/govmomi/guest"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// maxEvents bounds an events query: vCenter's own history is capped near
// 1000 per entity, and without MaxCount it returns only the last 10.
const maxEvents = 1000

// pollVM waits until done says so of props of vm, or ctx ends: it reads
// them at once, then again when the wait collector (govmomi_waits.go)
// notifies a change of vm that worth accepts (nil: any change), at least
// every waitFallbackFactor × PollInterval, and every PollInterval while vm
// is not in the collector's view. Each read is one small RetrieveProperties.
func (c *Client) pollVM(ctx context.Context, vm types.ManagedObjectReference, what string, props []string, worth func(map[string]any) bool, done func(*mo.VirtualMachine) bool) error {
	read := func(ctx context.Context) (bool, error) {
		var o mo.VirtualMachine
		if err := c.pc.RetrieveOne(ctx, vm, props, &o); err != nil {
			return false, fmt.Errorf("wait for %s of %q: %w", what, c.vmName(vm), err)
		}
		return done(&o), nil
	}
	err := c.awaitObject(ctx, vm, false, c.PollInterval, read, worth)
	if err != nil && ctx.Err() != nil && err == ctx.Err() {
		return fmt.Errorf("wait for %s of %q: %w", what, c.vmName(vm), err)
	}
	return err
}

// notifiedAs returns a worth function for pollVM: a notification is worth
// a read when prop's reported value, as text, is want ("" : any value but
// the empty one).
func notifiedAs(prop, want string) func(map[string]any) bool {
	return func(vals map[string]any) bool {
		v, ok := vals[prop]
		if !ok || v == nil {
			return false
		}
		s := fmt.Sprint(v)
		if want == "" {
			return s != ""
		}
		return s == want
	}
}

// waitForVirtualMachineShutdown blocks until the VM is powered off or ctx ends.
func (c *Client) waitForVirtualMachineShutdown(ctx context.Context, vm types.ManagedObjectReference) error {
	if err := c.notConnected(); err != nil {
		return err
	}
	return c.pollVM(ctx, vm, "power off", []string{"runtime.powerState"}, notifiedAs("runtime.powerState", string(types.VirtualMachinePowerStatePoweredOff)), func(o *mo.VirtualMachine) bool {
		return o.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOff
	})
}

// waitForGuestOperationsReady blocks until guest.guestOperationsReady is
// true or ctx ends.
func (c *Client) waitForGuestOperationsReady(ctx context.Context, vm types.ManagedObjectReference) error {
	if err := c.notConnected(); err != nil {
		return err
	}
	return c.pollVM(ctx, vm, "guest operations", []string{"guest.guestOperationsReady"}, notifiedAs("guest.guestOperationsReady", "true"), func(o *mo.VirtualMachine) bool {
		return o.Guest != nil && o.Guest.GuestOperationsReady != nil && *o.Guest.GuestOperationsReady
	})
}

// waitForVirtualMachineIP blocks until the guest reports an IPv4 address
// in guest.net or guest.ipAddress — expectedIP when not empty — or ctx
// ends, and returns it. Link-local and loopback addresses are skipped, so
// a container bridge or APIPA address is never taken for the VM's address.
func (c *Client) waitForVirtualMachineIP(ctx context.Context, vm types.ManagedObjectReference, expectedIP string) (string, error) {
	if err := c.notConnected(); err != nil {
		return "", err
	}
	var found string
	// guest.net is a list, not watched (scalars only): a change of
	// guest.ipAddress wakes the read, the fallback catches the rest.
	err := c.pollVM(ctx, vm, "ip address", []string{"guest.ipAddress", "guest.net"}, notifiedAs("guest.ipAddress", ""), func(o *mo.VirtualMachine) bool {
		found = pickIP(o.Guest, expectedIP)
		return found != ""
	})
	if err != nil {
		return "", err
	}
	return found, nil
}

// pickIP returns expected when the guest reports it, else ("" expected)
// the first usable IPv4 address: guest.net first, then guest.ipAddress.
func pickIP(g *types.GuestInfo, expected string) string {
	if g == nil {
		return ""
	}
	candidates := make([]string, 0, 4)
	for _, n := range g.Net {
		candidates = append(candidates, n.IpAddress...)
	}
	candidates = append(candidates, g.IpAddress)
	for _, s := range candidates {
		ip := net.ParseIP(s)
		if ip == nil || ip.To4() == nil {
			continue
		}
		if expected != "" {
			if ip.Equal(net.ParseIP(expected)) {
				return expected
			}
			continue
		}
		if ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsUnspecified() {
			continue
		}
		return ip.String()
	}
	return ""
}

// startProgramInGuest runs a program in the guest through the guest
// operations process manager and returns its pid.
func (c *Client) startProgramInGuest(ctx context.Context, vm types.ManagedObjectReference, auth types.BaseGuestAuthentication, spec *types.GuestProgramSpec) (int64, error) {
	if err := c.notConnected(); err != nil {
		return 0, err
	}
	if spec == nil {
		return 0, fmt.Errorf("start program in %q: nil program spec", c.vmName(vm))
	}
	pm, err := guest.NewOperationsManager(c.vim, vm).ProcessManager(ctx)
	if err != nil {
		return 0, fmt.Errorf("find guest process manager for %q: %w", c.vmName(vm), err)
	}
	pid, err := pm.StartProgram(ctx, auth, spec)
	if err != nil {
		return 0, fmt.Errorf("start %q in %q: %w", spec.ProgramPath, c.vmName(vm), err)
	}
	c.log.Debug("started program in guest", logkey.VM, c.vmName(vm), "program", spec.ProgramPath, "pid", pid)
	return pid, nil
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
