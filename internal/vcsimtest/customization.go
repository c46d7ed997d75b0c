package vcsimtest

import (
	"fmt"
	"sync"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

// customLeases plays the DHCP side of a customized clone, which the
// simulator lacks. On vCenter a clone customized by LinuxPrep or sysprep
// takes, at its first boot, the fixed address of its adapter mapping
// (CustomizationFixedIp) or asks the network's DHCP server for one
// (CustomizationDhcpIpGenerator); VMware Tools then report it in
// guest.ipAddress and guest.net. The simulator applies the customization
// when the clone powers on (guest.customizationInfo becomes
// TOOLSDEPLOYPKG_SUCCEEDED) and sets the fixed address itself, but gives
// a DHCP card nothing. The handler remembers a clone whose customization
// succeeded and, when its guest becomes ready (readiness), gives its
// first card a fake DHCP lease when it has no address: a guest whose
// Tools never run reports none. Env.SetDHCP(false) plays a network
// without a DHCP server: the guest gets no lease.
type customLeases struct {
	mu sync.Mutex
	// customized are the VMs whose customization succeeded at their last
	// power on, not yet given their guest's address.
	customized map[types.ManagedObjectReference]bool
	// noDHCP: the VMs' network has no DHCP server.
	noDHCP bool
	next   int
}

// SetDHCP tells whether the VMs' network has a DHCP server (true unless
// set): without one, a clone customized with DHCP gets no address, as on
// a vCenter network without DHCP. cloud-init's boots (FakeCloudInit) are
// not affected.
func (e *Env) SetDHCP(serving bool) {
	l := &e.ready.leases
	l.mu.Lock()
	defer l.mu.Unlock()
	l.noDHCP = !serving
}

// note records, from a change set of vm, that its customization
// succeeded.
func (l *customLeases) note(vm types.ManagedObjectReference, changes []types.PropertyChange) {
	for _, ch := range changes {
		if ch.Name != "guest.customizationInfo" {
			continue
		}
		info, ok := ch.Val.(*types.GuestInfoCustomizationInfo)
		if !ok || info.CustomizationStatus != string(types.GuestInfoCustomizationStatusTOOLSDEPLOYPKG_SUCCEEDED) {
			continue
		}
		l.mu.Lock()
		if l.customized == nil {
			l.customized = map[types.ManagedObjectReference]bool{}
		}
		l.customized[vm] = true
		l.mu.Unlock()
	}
}

// forget drops vm (destroyed).
func (l *customLeases) forget(vm types.ManagedObjectReference) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.customized, vm)
}

// ready gives the first card of vm, a customized clone whose guest just
// became ready, a DHCP lease when the customization gave it no address;
// the caller holds vm's lock.
func (l *customLeases) ready(ctx *simulator.Context, vm *simulator.VirtualMachine) {
	ref := vm.Reference()
	l.mu.Lock()
	customized := l.customized[ref]
	delete(l.customized, ref)
	if !customized || l.noDHCP || vm.Guest == nil || len(vm.Guest.Net) == 0 || len(vm.Guest.Net[0].IpAddress) > 0 {
		l.mu.Unlock()
		return
	}
	l.next++
	ip := fmt.Sprintf("10.253.%d.%d", l.next/250, l.next%250+2)
	l.mu.Unlock()
	nic := &vm.Guest.Net[0]
	nic.IpAddress = []string{ip}
	if nic.IpConfig == nil {
		nic.IpConfig = new(types.NetIpConfigInfo)
	}
	nic.IpConfig.IpAddress = []types.NetIpConfigInfoIpAddress{{IpAddress: ip, PrefixLength: 24, Origin: string(types.NetIpConfigInfoIpAddressOriginDhcp)}}
	vm.Guest.IpAddress = ip
	ctx.Update(vm, []types.PropertyChange{
		{Name: "guest.ipAddress", Val: ip},
		{Name: "summary.guest.ipAddress", Val: ip},
		{Name: "guest.net", Val: vm.Guest.Net},
	})
}
