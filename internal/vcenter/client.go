package vcenter

import "github.com/cds-contrib/hatchery-vsphere/internal/vctypes"

// Client is the govmomi adapter behind the port, which is
// vctypes.Port (internal/vctypes/port.go: the interfaces beside the
// vocabulary, so that the port package imports no govmomi). The
// property lists below are govmomi property paths, the adapter's own.
var _ vctypes.Port = (*Client)(nil)

// VMWatchProperties are the properties the change watch reports. Each is a
// scalar that moves whenever something the hatchery reads moves: the name,
// the template flag, config.changeVersion (any reconfiguration: the
// annotation, its ExtraConfig mirror, CPU and memory), the power state, the
// primary guest IP and guest-operations readiness. A reported change makes
// the inventory read that VM's VMProperties again. Limit: an IP change on a
// secondary NIC alone (guest.net) moves none of them; the periodic resync
// catches it.
var VMWatchProperties = []string{
	"name",
	"config.template",
	"config.changeVersion",
	"runtime.powerState",
	"guest.ipAddress",
	"guest.guestOperationsReady",
}

// VMProperties are the leaf properties ListVirtualMachines retrieves: only
// what the hatchery reads (docs/design.md#inventory), never whole config/summary/guest objects.
var VMProperties = []string{
	"name",
	"config.template",
	"config.annotation",
	"config.changeVersion",
	"config.extraConfig",
	"config.hardware.numCPU",
	"config.hardware.memoryMB",
	"runtime.powerState",
	"guest.ipAddress",
	"guest.net",
	"guest.guestOperationsReady",
}
