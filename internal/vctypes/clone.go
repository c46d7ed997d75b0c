package vctypes

// Template is what a clone needs to know of its template, read in one
// request (Port.LoadTemplate): how many network cards it has (a
// guest customization maps each), its virtual disks (a flavor's growth,
// a linked clone's datastore) and its snapshots (a linked clone's). The
// hatchery decides the clone mode from it (internal/clonespec).
type Template struct {
	// Ref is the template's reference.
	Ref Ref
	// NICs is the number of its network cards.
	NICs int
	// Disks are its virtual disks, in device order.
	Disks []Disk
	// CurrentSnapshot is its current snapshot (zero: none).
	CurrentSnapshot Ref
	// Snapshots are every snapshot of it, depth first.
	Snapshots []Snapshot
}

// Disk is one virtual disk of a template: its size and the datastore its
// backing file is on (zero when the backing names none).
type Disk struct {
	CapacityBytes int64
	Datastore     Ref
}

// Snapshot is one snapshot of a template: its name and reference.
type Snapshot struct {
	Name string
	Ref  Ref
}

// Clone is a clone's request (Port.CloneVirtualMachine): the
// template and what the new VM is, in the project's terms; the adapter
// builds vCenter's clone specification from it and the template's device
// list (docs/architecture.md, "The vCenter port").
type Clone struct {
	// Template is the template cloned.
	Template Ref
	// Name is the new VM's name.
	Name string
	// Folder is the folder it goes to.
	Folder Ref
	// Pool and Datastore are where it runs and its disks go (zero: the
	// template's).
	Pool, Datastore Ref
	// Snapshot makes a linked clone: a delta disk on this snapshot of the
	// template. Zero: a full clone, the template's disks copied.
	Snapshot Ref
	// Growth is the flavor's size: CPUs, memory, the first disk grown
	// (nil: the template's; a disk is never shrunk).
	Growth *Growth
	// Network moves the template's first network card to a network (nil:
	// the cards are left as the template has them).
	Network *CloneNetwork
	// Record is the ownership record written at clone time (Notes and
	// their mirror; zero: none).
	Record Record
	// Options are advanced settings set after the record's (cloud-init's
	// guestinfo, a check's value).
	Options []Option
	// Customization is the guest customization (nil: none, as for a
	// cloud-init worker, whose guestinfo configures it).
	Customization *Customization
	// PowerOn powers the new VM on once made.
	PowerOn bool
}

// CloneNetwork is the network a clone's first card is moved to: its name
// ("" the default network) and the card's type (configuration's
// ethernetCardName: "vmxnet3", "e1000"…).
type CloneNetwork struct {
	Name     string
	CardType string
}

// Customization is a clone's guest customization: its identity (Linux:
// the hostname Name; Windows: sysprep with the computer name Name, a new
// SID and a reboot) and one address per network card of the template,
// in the cards' order (vCenter refuses a mismatch). It holds no secret:
// sysprep is given no password (docs/windows.md).
type Customization struct {
	Windows bool
	Name    string
	NICs    []NICAddress
}

// NICAddress is one card's guest address: a static IP with its mask,
// gateway ("" none) and DNS servers, or DHCP when IP is "".
type NICAddress struct {
	IP         string
	SubnetMask string
	Gateway    string
	DNS        []string
}
