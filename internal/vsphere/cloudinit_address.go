package vsphere

import (
	"github.com/cds-contrib/hatchery-vsphere/internal/cloudinit"
	"github.com/cds-contrib/hatchery-vsphere/internal/ippool"
)

// cloudInitAddress is lease as cloud-init's network config takes it; nil
// without a lease (cloud-init then uses DHCP).
func cloudInitAddress(lease *ippool.Lease) *cloudinit.Address {
	if lease == nil {
		return nil
	}
	return &cloudinit.Address{IP: lease.IP, Gateway: lease.Gateway, SubnetMask: lease.SubnetMask, DNS: lease.DNS}
}
