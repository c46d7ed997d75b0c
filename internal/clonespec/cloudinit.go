package clonespec

import (
	"fmt"

	"github.com/cds-contrib/hatchery-vsphere/internal/cloudinit"
	"github.com/cds-contrib/hatchery-vsphere/internal/ippool"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// CloudInitOptions returns the guestinfo entries that boot the VM named
// name through cloud-init (docs/cloud-init.md): a new instance id, the
// hostname derived from name, ip's network settings (ip "": DHCP) and
// boot's userdata (a Windows boot: cloudbase-init's, the computer name
// WindowsComputerName). A clone gets them in its clone specification (Spec), a
// claimed warm VM in its reconfiguration.
func (b *Builder) CloudInitOptions(name, ip string, boot cloudinit.Boot) ([]vctypes.Option, error) {
	var lease *ippool.Lease
	if ip != "" {
		l, ok := b.ips.Lookup(ip)
		if !ok {
			return nil, fmt.Errorf("ip %s is in no configured range", ip)
		}
		lease = &l
	}
	hostname := SanitizeHostname(name)
	if boot.Windows {
		hostname = WindowsComputerName(name) // cloudbase-init's local-hostname
	}
	return cloudinit.Options(b.instanceID(name), hostname, cloudInitAddress(lease), boot)
}

// cloudInitAddress is lease as cloud-init's network config takes it; nil
// without a lease (cloud-init then uses DHCP).
func cloudInitAddress(lease *ippool.Lease) *cloudinit.Address {
	if lease == nil {
		return nil
	}
	return &cloudinit.Address{IP: lease.IP, Gateway: lease.Gateway, SubnetMask: lease.SubnetMask, DNS: lease.DNS}
}
