package clonespec

import (
	"fmt"

	"github.com/cds-contrib/hatchery-vsphere/internal/ippool"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// Customization is the guest customization vCenter applies to a clone
// whose guest is started by guest operations (docs/architecture.md), in
// the project's terms (the adapter makes it vCenter's,
// vim.CustomizationSpecOf): the identity of the VM named name (Linux:
// its hostname, SanitizeHostname; windows: sysprep with its computer
// name, WindowsComputerName) and one address per network card of the
// template (nics: vSphere refuses a mismatch), the first with lease's
// fixed address and its network settings when lease is set, every other
// card, and the first without a lease, DHCP. The spawn (Builder.CloneFor)
// and `vcenter check` (internal/vcheck) both customize with it. A name
// that gives no hostname is an error.
func Customization(name string, nics int, lease *ippool.Lease, windows bool) (*vctypes.Customization, error) {
	hostname := SanitizeHostname(name)
	if hostname == "" {
		return nil, fmt.Errorf("worker name %q gives no valid hostname", name)
	}
	if nics < 1 {
		return nil, fmt.Errorf("vm %q: no network card to customize", name)
	}
	c := &vctypes.Customization{Windows: windows, Name: hostname, NICs: make([]vctypes.NICAddress, nics)}
	if windows {
		c.Name = WindowsComputerName(name)
	}
	if lease != nil {
		c.NICs[0] = vctypes.NICAddress{IP: lease.IP, SubnetMask: lease.SubnetMask, Gateway: lease.Gateway, DNS: lease.DNS}
	}
	return c, nil
}
