package inventory

import (
	"context"
	"strings"

	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// VM is the hatchery's view of one VM or template, built from the leaf
// properties of vim.VMProperties (vctypes.VMInfo). It is a value: safe
// to copy and to share. It holds the project's types only.
type VM struct {
	Ref      vctypes.Ref
	Name     string
	Template bool
	// Annotation is the parsed ownership record (Notes, else its ExtraConfig
	// mirror); nil when the VM has none that parses.
	Annotation *Annotation
	NumCPU     int32
	MemoryMB   int32
	PowerState vctypes.PowerState
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

// ObjectRef is the VM's reference (Ref).
func (v VM) ObjectRef() vctypes.Ref { return v.Ref }

// Power is the VM's power state (PowerState).
func (v VM) Power() vctypes.PowerState { return v.PowerState }

// PoweredOn tells whether the VM is powered on.
func (v VM) PoweredOn() bool { return v.PowerState == vctypes.PoweredOn }

// HasPrefix tells whether the VM's name starts with prefix.
func (v VM) HasPrefix(prefix string) bool { return strings.HasPrefix(v.Name, prefix) }

// VMFromInfo builds the view from a VM's properties as the port reads
// them.
func VMFromInfo(o vctypes.VMInfo) VM {
	v := VM{
		Ref: o.Ref, Name: o.Name, PowerState: o.PowerState, Template: o.Template,
		NumCPU: o.NumCPU, MemoryMB: o.MemoryMB, ChangeVersion: o.ChangeVersion,
		GuestOperationsReady: o.GuestOperationsReady,
	}
	if a, err := AnnotationFromVM(o.Notes, o.Options); err == nil {
		v.Annotation = a
	}
	seen := map[string]bool{}
	add := func(ip string) {
		if ip != "" && !seen[ip] {
			seen[ip] = true
			v.IPAddresses = append(v.IPAddresses, ip)
		}
	}
	add(o.IPAddress)
	for _, ip := range o.NetIPAddresses {
		add(ip)
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
		out = append(out, VMFromInfo(o))
	}
	return out, nil
}

// Invalidate does nothing: every read is fresh.
func (Listing) Invalidate(...vctypes.Ref) {}
