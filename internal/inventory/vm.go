package inventory

import (
	"context"
	"strings"

	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// VM is the hatchery's view of one VM or template, built from the leaf
// properties of vcenter.VMProperties. It is a value: safe to copy and to share.
type VM struct {
	Ref      types.ManagedObjectReference
	Name     string
	Template bool
	// Annotation is the parsed ownership record (Notes, else its ExtraConfig
	// mirror); nil when the VM has none that parses.
	Annotation *Annotation
	NumCPU     int32
	MemoryMB   int32
	PowerState types.VirtualMachinePowerState
	// IPAddresses holds guest.ipAddress and every guest.net[].ipAddress.
	IPAddresses          []string
	GuestOperationsReady bool
	// ChangeVersion is config.changeVersion as read: a reconfigure
	// carrying it is refused by vCenter when another writer changed the
	// VM since (the warm-VM claim's compare-and-swap,
	// docs/high-availability.md).
	ChangeVersion string
}

// OwnedBy tells whether the VM carries hatcheryName's ownership record.
// Only such VMs may be renamed, reconfigured, powered off or destroyed.
func (v VM) OwnedBy(hatcheryName string) bool {
	return hatcheryName != "" && v.Annotation != nil && v.Annotation.HatcheryName == hatcheryName
}

// ObjectRef is the VM's reference in the project's vocabulary: what the
// decision packages, which import no govmomi package, name a VM by.
func (v VM) ObjectRef() vctypes.Ref { return vcenter.RefOf(v.Ref) }

// Power is the VM's power state in the project's vocabulary.
func (v VM) Power() vctypes.PowerState { return vcenter.PowerStateOf(v.PowerState) }

// PoweredOn tells whether the VM is powered on.
func (v VM) PoweredOn() bool { return v.PowerState == types.VirtualMachinePowerStatePoweredOn }

// HasPrefix tells whether the VM's name starts with prefix.
func (v VM) HasPrefix(prefix string) bool { return strings.HasPrefix(v.Name, prefix) }

// VMFromObject builds the view from a listed managed object.
func VMFromObject(o mo.VirtualMachine) VM {
	v := VM{Ref: o.Reference(), Name: o.Name, PowerState: o.Runtime.PowerState}
	if o.Config != nil {
		v.Template = o.Config.Template
		v.NumCPU = o.Config.Hardware.NumCPU
		v.MemoryMB = o.Config.Hardware.MemoryMB
		v.ChangeVersion = o.Config.ChangeVersion
		if a, err := AnnotationFromVM(o.Config.Annotation, o.Config.ExtraConfig); err == nil {
			v.Annotation = a
		}
	}
	if o.Guest != nil {
		v.GuestOperationsReady = o.Guest.GuestOperationsReady != nil && *o.Guest.GuestOperationsReady
		seen := map[string]bool{}
		add := func(ip string) {
			if ip != "" && !seen[ip] {
				seen[ip] = true
				v.IPAddresses = append(v.IPAddresses, ip)
			}
		}
		add(o.Guest.IpAddress)
		for _, n := range o.Guest.Net {
			for _, ip := range n.IpAddress {
				add(ip)
			}
		}
	}
	return v
}

// Inventory is the one source of VM listings for every loop and decision
// (docs/design.md#inventory). Implementations are safe for concurrent use.
type Inventory interface {
	// VMs returns every VM and template of the datacenter.
	VMs(ctx context.Context) ([]VM, error)
	// Invalidate tells the inventory the hatchery changed vCenter (clone,
	// rename, reconfigure, power, destroy). A listing inventory reflects it
	// at the next VMs call; a shared one refreshes soon (coalesced), so
	// callers must not rely on seeing their own write at once: local
	// bookkeeping covers that window. The VMs named, when known, are read
	// again even if nothing else says they changed.
	Invalidate(vms ...vctypes.Ref)
}

// Listing lists the datacenter on every read: the plainest design, kept
// behind inventoryMode = "listing" (docs/inventory-watch.md compares the
// modes).
type Listing struct {
	Client Source
}

// VMs lists every VM now.
func (l Listing) VMs(ctx context.Context) ([]VM, error) {
	objs, err := l.Client.ListVirtualMachines(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]VM, 0, len(objs))
	for _, o := range objs {
		out = append(out, VMFromObject(o))
	}
	return out, nil
}

// Invalidate does nothing: every read is fresh.
func (Listing) Invalidate(...vctypes.Ref) {}
