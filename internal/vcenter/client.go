package vcenter

import (
	"context"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// Port is the hatchery's port to vCenter: the five interfaces below, by
// use. Locks, Placement, Attributes and VMs' power, destroy, rename,
// guest, wait and event methods speak the project's vocabulary
// (internal/vctypes; their errors classified, Classify), so that the Port
// itself is guest.Port. VMs' device, template, clone, reconfigure and
// instant clone methods and InventorySource still take and return
// references (types.ManagedObjectReference) and plain data (vim25/types,
// vim25/mo, object.VirtualDeviceList). No method
// takes or returns a govmomi object handle: a handle
// carries the connection it was made with, a reference does not, so a VM
// read before a re-login is still valid after it (docs/architecture.md,
// "The vCenter port"). The signatures use govmomi, vctypes and standard library
// types only, so that mock_vsphere is generated without importing this
// package. Every method is bounded: each SOAP request by the client's
// request timeout (15 s), each task by a named task timeout, each wait by
// ctx (callers set the readiness deadlines, docs/design.md#timeouts).
//
//go:generate mockgen -destination=../../mock_vsphere/mock_client.go -package=mock_vsphere github.com/cds-contrib/hatchery-vsphere/internal/vcenter Port
type Port interface {
	VMs
	Placement
	InventorySource
	Locks
	Attributes
}

// VMs are the operations on one VM or template, named by reference.
type VMs interface {
	// LoadVirtualMachine finds a VM or template by name (or inventory
	// path) in the inventory's scope, else, templateFolders unset, in the
	// datacenter's folders (its folder then joins the scope), and returns
	// its reference.
	LoadVirtualMachine(ctx context.Context, name string) (vctypes.Ref, error)
	// LoadVirtualMachineDevices returns the VM's device list.
	LoadVirtualMachineDevices(ctx context.Context, vm types.ManagedObjectReference) (object.VirtualDeviceList, error)
	// LoadTemplate reads, in one request, what a clone needs of a
	// template: config.hardware.device and snapshot (the other properties
	// are left unset).
	LoadTemplate(ctx context.Context, template types.ManagedObjectReference) (mo.VirtualMachine, error)
	// StartVirtualMachine powers the VM on; already on is success.
	StartVirtualMachine(ctx context.Context, vm vctypes.Ref) error
	// ShutdownVirtualMachine powers the VM off; already off is success.
	ShutdownVirtualMachine(ctx context.Context, vm vctypes.Ref) error
	// SuspendVirtualMachine suspends a powered-on VM (its memory is kept
	// on the datastore; a power on resumes it); already suspended is
	// success, a powered-off VM is an error.
	SuspendVirtualMachine(ctx context.Context, vm vctypes.Ref) error
	// DestroyVirtualMachine destroys a powered-off VM; already gone is success.
	DestroyVirtualMachine(ctx context.Context, vm vctypes.Ref) error
	// CloneVirtualMachine clones template into folder under name and
	// waits for the task; it returns the new VM's reference.
	CloneVirtualMachine(ctx context.Context, template, folder types.ManagedObjectReference, name string, spec *types.VirtualMachineCloneSpec) (*types.ManagedObjectReference, error)
	// RenameVirtualMachine renames the VM and waits for the task.
	RenameVirtualMachine(ctx context.Context, vm vctypes.Ref, newName string) error
	// ReconfigureVirtualMachine applies spec (annotation, CPU/RAM, devices)
	// and waits for the task.
	ReconfigureVirtualMachine(ctx context.Context, vm types.ManagedObjectReference, spec types.VirtualMachineConfigSpec) error
	// MarkVirtualMachineAsTemplate turns a powered-off VM into a template.
	MarkVirtualMachineAsTemplate(ctx context.Context, vm vctypes.Ref) error
	// WaitForVirtualMachineShutdown blocks until the VM is powered off or ctx ends.
	WaitForVirtualMachineShutdown(ctx context.Context, vm vctypes.Ref) error
	// WaitForGuestOperationsReady blocks until guest.guestOperationsReady
	// is true or ctx ends.
	WaitForGuestOperationsReady(ctx context.Context, vm vctypes.Ref) error
	// WaitForVirtualMachineIP blocks until the guest reports an IPv4
	// address (expectedIP when not empty, read from guest.net) or ctx ends,
	// and returns it.
	WaitForVirtualMachineIP(ctx context.Context, vm vctypes.Ref, expectedIP string) (string, error)
	// StartProgramInGuest runs prog in the guest with auth and returns its
	// pid; a refused account is a vctypes.FaultInvalidGuestLogin.
	StartProgramInGuest(ctx context.Context, vm vctypes.Ref, auth *vctypes.GuestAuth, prog vctypes.GuestProgram) (int64, error)
	// InstantCloneVirtualMachine forks a new VM from the running parent
	// (InstantClone_Task, vSphere 6.7 and later): the child is created
	// powered on in req.Folder with req.Options as its ExtraConfig, named
	// req.Name; it waits for the task and returns the child's reference
	// (zero when the task named none).
	InstantCloneVirtualMachine(ctx context.Context, parent vctypes.Ref, req vctypes.InstantClone) (vctypes.Ref, error)
	// LoadVirtualMachineEvents returns the VM's events of the given types
	// (all types when none), newest last, at most the last 1000.
	LoadVirtualMachineEvents(ctx context.Context, vm vctypes.Ref, eventTypes ...string) ([]vctypes.Event, error)
}

// Placement resolves where new VMs go (the folder, pool, datastore and
// network settings) to references and backing data, and reads the pool's
// runtime for capacity decisions.
type Placement interface {
	// LoadFolder returns the folder new VMs go to (folderString, else the
	// datacenter's VM folder).
	LoadFolder(ctx context.Context) (vctypes.Ref, error)
	// LoadResourcePool returns the pool new VMs go to (resourcePoolString,
	// else the datacenter's default pool; ambiguous is an error).
	LoadResourcePool(ctx context.Context) (vctypes.Ref, error)
	// ResourcePoolRuntime reads the figures of the pool's runtime (CPU and
	// memory maximum, usage, unreserved for VMs).
	ResourcePoolRuntime(ctx context.Context, pool vctypes.Ref) (*vctypes.PoolRuntime, error)
	// LoadDatastore finds a datastore by name ("" = the default datastore).
	LoadDatastore(ctx context.Context, name string) (vctypes.Ref, error)
	// FolderAt returns the VM folder at path (an inventory path or name;
	// "" is LoadFolder's): a placement's folder.
	FolderAt(ctx context.Context, path string) (vctypes.Ref, error)
	// ResourcePoolAt returns the resource pool at path, a pool's or a
	// cluster's path (a cluster stands for its root pool); "" is
	// LoadResourcePool's: a placement's pool.
	ResourcePoolAt(ctx context.Context, path string) (vctypes.Ref, error)
	// DatastoreSpace reads a datastore's name, free space, capacity and
	// accessibility (summary) in one request.
	DatastoreSpace(ctx context.Context, ds vctypes.Ref) (*vctypes.DatastoreSpace, error)
	// PoolRuntimeAt reads the runtime of the resource pool at path
	// (ResourcePoolAt, then ResourcePoolRuntime): a placement's pool
	// (admission.PlacementPort).
	PoolRuntimeAt(ctx context.Context, path string) (*vctypes.PoolRuntime, error)
	// DatastoreSpaceOf reads the space of the datastore named name
	// (LoadDatastore, then DatastoreSpace; admission.PlacementPort).
	DatastoreSpaceOf(ctx context.Context, name string) (*vctypes.DatastoreSpace, error)
	// SetupEthernetCard sets card's backing to the network named
	// networkName ("" = the default network), built as a card of type
	// ethernetCardName.
	SetupEthernetCard(ctx context.Context, card *types.VirtualEthernetCard, ethernetCardName, networkName string) error
}

// InventorySource reads the VMs of the inventory's scope: the datacenter's
// VM folder, or, with templateFolders, the hatchery's folder and the
// template folders (docs/inventory-watch.md, "Scope"): the full listing,
// and the incremental inventory (inventoryMode = "watch").
type InventorySource interface {
	// ListVirtualMachines returns every VM and template of the scope
	// with the leaf properties in VMProperties read.
	ListVirtualMachines(ctx context.Context) ([]vctypes.VMInfo, error)
	// ProbeInventory reads, in one round trip, the references of every VM
	// and template of the scope (the `view` of its folders' container
	// views) and, when pool is not nil, the pool's runtime (nil when pool
	// is nil).
	ProbeInventory(ctx context.Context, pool *vctypes.Ref) ([]vctypes.Ref, *vctypes.PoolRuntime, error)
	// RetrieveVirtualMachines reads VMProperties of the given VMs by
	// reference, no listing; VMs that no longer exist are left out.
	RetrieveVirtualMachines(ctx context.Context, refs []vctypes.Ref) ([]vctypes.VMInfo, error)
	// ResetVirtualMachineWatch drops the VM change watch (best effort) and
	// starts an empty one in the current session. A client has one watch,
	// for one owner (one watch inventory): two owners would reset each
	// other's watch and poll one collector at once.
	ResetVirtualMachineWatch(ctx context.Context) error
	// WatchVirtualMachines adds VMs to the change watch: from now on a
	// change of one of their VMWatchProperties is reported by
	// VirtualMachineChanges. ErrWatchLost when the watch is not one of the
	// current session (reset it).
	WatchVirtualMachines(ctx context.Context, refs []vctypes.Ref) error
	// UnwatchVirtualMachines takes VMs that are gone out of the watch.
	UnwatchVirtualMachines(ctx context.Context, refs []vctypes.Ref) error
	// VirtualMachineChanges returns at once (it never waits for a change)
	// the updates of watched VMs since the previous call: "enter" (a VM's
	// first report: every watched property), "modify" (the properties that
	// changed) and "leave" (gone). ErrWatchLost (wrapped) when the watch is
	// gone (a new session): reset it and read everything again.
	VirtualMachineChanges(ctx context.Context) ([]vctypes.VMUpdate, error)
}

// Locks are lock objects whose names vCenter keeps unique: empty folders
// in one lock folder (LockFolderName, created inside the folder new VMs go
// to), one per name. Two processes
// creating one name at once see one of them succeed; the other gets
// ErrLockTaken. The hatchery takes a static IP address through one
// (docs/high-availability.md, "Static IPs").
type Locks interface {
	// CreateLock creates the lock object name and returns its reference;
	// ErrLockTaken (wrapped) when an object of that name exists there.
	CreateLock(ctx context.Context, name string) (vctypes.Ref, error)
	// ListLocks returns the lock objects (folders) whose name starts with
	// prefix, by name.
	ListLocks(ctx context.Context, prefix string) (map[string]vctypes.Ref, error)
	// DeleteLock deletes the lock object lock; already gone is success.
	// A folder that is not empty is not deleted (an error): destroying
	// a folder destroys what it holds.
	DeleteLock(ctx context.Context, lock vctypes.Ref) error
}

// Attributes are values the hatchery keeps in vCenter, where every
// instance of it sees them: custom attributes of the folder new VMs go to
// (LoadFolder), never of a VM. They speak the project's vocabulary
// (strings); their errors name the attribute and carry their fault kind
// (Classify). The warm pools keep their learnt demand there
// (docs/warm-pools.md, "After a restart").
type Attributes interface {
	// FolderAttribute reads the folder's custom attribute name: its
	// value and true, false when it has none.
	FolderAttribute(ctx context.Context, name string) (value string, ok bool, err error)
	// SetFolderAttribute sets the folder's custom attribute name to
	// value (the last writer wins), defining the field for folders when
	// needed; a value longer than MaxAttributeValue is refused
	// (ErrAttributeTooLarge) before any request.
	SetFolderAttribute(ctx context.Context, name, value string) error
}

// ErrLockTaken is wrapped by CreateLock's error when a lock object of that
// name exists (vCenter answered DuplicateName): another holder has it.
// It is vctypes.ErrLockTaken, so that the decision packages test for it
// without importing this package.
var ErrLockTaken = vctypes.ErrLockTaken

// ErrNotConnected is wrapped by the error of a Port call made
// before the client first reached vCenter (a daemon starting while vCenter
// does not answer yet). It is vctypes.ErrNotConnected.
var ErrNotConnected = vctypes.ErrNotConnected

// ErrWatchLost means the VM change watch is gone or was never started in
// the current session: the caller resets it and reads every VM again. It
// is vctypes.ErrWatchLost.
var ErrWatchLost = vctypes.ErrWatchLost

// ErrPoweredOff is returned by SuspendVirtualMachine for a powered-off VM:
// only a running VM can be suspended. It is vctypes.ErrPoweredOff.
var ErrPoweredOff = vctypes.ErrPoweredOff

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
