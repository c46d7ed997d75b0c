package vcenter

import (
	"context"
	"fmt"
	"net"
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

// pollVM waits until done says so of props of vm, or ctx ends: it reads
// them (unless first says otherwise), then again when the wait collector (govmomi_waits.go)
// notifies a change of vm that worth accepts, at least every
// waitFallbackFactor × PollInterval, and every PollInterval while vm is
// not in the collector's view. Each read is one small RetrieveProperties.
//
// first says whether it reads at once (firstRead: readUnlessLive for a
// wait whose condition is rarely met when it begins). settles (nil: never)
// tells whether reported values end the wait as a read of them would
// (the awaited value is one the filter reports, waitProps): then the wait
// ends on them without a read when they are fresh (waitHub.state: as new
// as this client's last change of vm); values that may predate it are
// confirmed by a read.
func (c *Client) pollVM(ctx context.Context, vm types.ManagedObjectReference, what string, props []string, first firstRead,
	worth, settles func(map[string]any) bool, done func(*mo.VirtualMachine) bool) error {
	// notified: fresh reported values said the wait is over.
	notified := false
	read := func(ctx context.Context) (bool, error) {
		if notified {
			return true, nil
		}
		var o mo.VirtualMachine
		if err := c.pc.RetrieveOne(ctx, vm, props, &o); err != nil {
			return false, fmt.Errorf("wait for %s of %q: %w", what, c.vmName(vm), err)
		}
		return done(&o), nil
	}
	notify := func(vals map[string]any, fresh bool) bool {
		if !worth(vals) {
			return false
		}
		notified = fresh && settles != nil && settles(vals)
		return true
	}
	err := c.awaitObject(ctx, vm, first, c.PollInterval, read, notify)
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
	off := notifiedAs("runtime.powerState", string(types.VirtualMachinePowerStatePoweredOff))
	return c.pollVM(ctx, vm, "power off", []string{"runtime.powerState"}, readUnlessLive, off, off, func(o *mo.VirtualMachine) bool {
		return o.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOff
	})
}

// waitForGuestOperationsReady blocks until guest.guestOperationsReady is
// true or ctx ends.
func (c *Client) waitForGuestOperationsReady(ctx context.Context, vm types.ManagedObjectReference) error {
	if err := c.notConnected(); err != nil {
		return err
	}
	ready := notifiedAs("guest.guestOperationsReady", "true")
	return c.pollVM(ctx, vm, "guest operations", []string{"guest.guestOperationsReady"}, readUnlessLive, ready, ready, func(o *mo.VirtualMachine) bool {
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
	// guest.ipAddress wakes the read, the fallback catches the rest. The
	// expected address reported as guest.ipAddress is what pickIP would
	// find: no read.
	var settles func(map[string]any) bool
	if want := net.ParseIP(expectedIP); want != nil && want.To4() != nil {
		settles = func(vals map[string]any) bool {
			if got := net.ParseIP(fmt.Sprint(vals["guest.ipAddress"])); got != nil && got.Equal(want) {
				found = expectedIP
				return true
			}
			return false
		}
	}
	err := c.pollVM(ctx, vm, "ip address", []string{"guest.ipAddress", "guest.net"}, readFirst, notifiedAs("guest.ipAddress", ""), settles, func(o *mo.VirtualMachine) bool {
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
