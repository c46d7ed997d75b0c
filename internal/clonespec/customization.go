package clonespec

import (
	"fmt"

	"github.com/cds-contrib/hatchery-vsphere/internal/ippool"
	"github.com/vmware/govmomi/vim25/types"
)

// Customization is the guest customization vCenter applies to a clone
// whose guest is started by guest operations (docs/architecture.md): the
// identity of the VM named name (Linux: LinuxPrep with its hostname,
// SanitizeHostname; windows: sysprep with its computer name,
// WindowsComputerName, a new SID and a reboot) and one adapter mapping per
// network card of the template (nics: vSphere refuses a mismatch), the
// first with lease's fixed address and its network settings when lease is
// set, every other card, and the first without a lease, DHCP. The spawn
// (Builder.SpecFor) and `vcenter check` (internal/vcheck) both customize
// with it. A name that gives no hostname is an error.
func Customization(name string, nics int, lease *ippool.Lease, windows bool) (*types.CustomizationSpec, error) {
	hostname := SanitizeHostname(name)
	if hostname == "" {
		return nil, fmt.Errorf("worker name %q gives no valid hostname", name)
	}
	if nics < 1 {
		return nil, fmt.Errorf("vm %q: no network card to customize", name)
	}
	maps := make([]types.CustomizationAdapterMapping, nics)
	global := types.CustomizationGlobalIPSettings{}
	for i := range maps {
		maps[i].Adapter.Ip = &types.CustomizationDhcpIpGenerator{}
	}
	if lease != nil {
		maps[0].Adapter = types.CustomizationIPSettings{
			Ip:            &types.CustomizationFixedIp{IpAddress: lease.IP},
			SubnetMask:    lease.SubnetMask,
			DnsServerList: lease.DNS,
		}
		if lease.Gateway != "" {
			maps[0].Adapter.Gateway = []string{lease.Gateway}
		}
		global.DnsServerList = lease.DNS
	}
	spec := &types.CustomizationSpec{
		Identity:         &types.CustomizationLinuxPrep{HostName: &types.CustomizationFixedName{Name: hostname}},
		GlobalIPSettings: global,
		NicSettingMap:    maps,
	}
	if windows {
		// Windows: sysprep (computer name, the same network settings).
		spec.Identity = sysprepIdentity(WindowsComputerName(name))
		spec.Options = windowsOptions()
	}
	return spec, nil
}
