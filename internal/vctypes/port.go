package vctypes

import "context"

// Port is the hatchery's port to vCenter: the five interfaces below, by
// use. Every method speaks this package's vocabulary (its errors
// classified by the adapter, vcenter.Classify), so that the Port itself is
// guest.Port, warmpool.Port and custody.Port; the clone is a request
// (Clone) whose specification the adapter builds. No method takes or
// returns a govmomi type, an object handle least of all: a handle carries
// the connection it was made with, a reference does not, so a VM read
// before a re-login is still valid after it (docs/architecture.md, "The
// vCenter port"). The port lives here, beside the vocabulary, so that a
// decision package, the mock (mock_vsphere, generated from it) and the
// port's consumers share one import that holds no govmomi; its one
// production implementation is internal/vcenter's Client, the govmomi
// adapter. Every method is bounded: each SOAP request by the client's
// request timeout (15 s), each task by a named task timeout, each wait by
// ctx (callers set the readiness deadlines, docs/design.md#timeouts).
//
//go:generate mockgen -destination=../../mock_vsphere/mock_client.go -package=mock_vsphere github.com/cds-contrib/hatchery-vsphere/internal/vctypes Port
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
	LoadVirtualMachine(ctx context.Context, name string) (Ref, error)
	// LoadTemplate reads, in one request, what a clone needs of a
	// template (config.hardware.device and snapshot): its cards, disks
	// and snapshots. The read is kept for the template's clones
	// (CloneVirtualMachine) for ten minutes, and dropped when a clone
	// from it fails.
	LoadTemplate(ctx context.Context, template Ref) (Template, error)
	// StartVirtualMachine powers the VM on; already on is success.
	StartVirtualMachine(ctx context.Context, vm Ref) error
	// ShutdownVirtualMachine powers the VM off; already off is success.
	ShutdownVirtualMachine(ctx context.Context, vm Ref) error
	// SuspendVirtualMachine suspends a powered-on VM (its memory is kept
	// on the datastore; a power on resumes it); already suspended is
	// success, a powered-off VM is an error.
	SuspendVirtualMachine(ctx context.Context, vm Ref) error
	// DestroyVirtualMachine destroys a powered-off VM; already gone is success.
	DestroyVirtualMachine(ctx context.Context, vm Ref) error
	// CloneVirtualMachine makes the clone req asks for (its
	// specification built from req and the template's devices: the
	// first card's network, the flavor's size, the record and options,
	// the customization, linked or full) and waits for the task; it
	// returns the new VM's reference. A *PrepError when the
	// request could not be made into a specification: nothing was sent.
	CloneVirtualMachine(ctx context.Context, req Clone) (Ref, error)
	// RenameVirtualMachine renames the VM and waits for the task.
	RenameVirtualMachine(ctx context.Context, vm Ref, newName string) error
	// ReconfigureVirtualMachine applies change to the VM in one task (its
	// name, Notes, ownership record, options, growth to a flavor: the
	// adapter reads the VM's devices itself when the growth sets a disk
	// size) and waits for it. A change carrying a ChangeVersion is refused
	// with FaultConcurrentAccess when the VM changed since; a
	// *PrepError when the specification could not be built
	// (nothing sent).
	ReconfigureVirtualMachine(ctx context.Context, vm Ref, change ConfigChange) error
	// MarkVirtualMachineAsTemplate turns a powered-off VM into a template.
	MarkVirtualMachineAsTemplate(ctx context.Context, vm Ref) error
	// WaitForVirtualMachineShutdown blocks until the VM is powered off or ctx ends.
	WaitForVirtualMachineShutdown(ctx context.Context, vm Ref) error
	// WaitForGuestOperationsReady blocks until guest.guestOperationsReady
	// is true or ctx ends.
	WaitForGuestOperationsReady(ctx context.Context, vm Ref) error
	// WaitForVirtualMachineIP blocks until the guest reports an IPv4
	// address (expectedIP when not empty, read from guest.net) or ctx ends,
	// and returns it.
	WaitForVirtualMachineIP(ctx context.Context, vm Ref, expectedIP string) (string, error)
	// StartProgramInGuest runs prog in the guest with auth and returns its
	// pid; a refused account is a FaultInvalidGuestLogin.
	StartProgramInGuest(ctx context.Context, vm Ref, auth *GuestAuth, prog GuestProgram) (int64, error)
	// InstantCloneVirtualMachine forks a new VM from the running parent
	// (InstantClone_Task, vSphere 6.7 and later): the child is created
	// powered on in req.Folder with req.Options as its ExtraConfig, named
	// req.Name; it waits for the task and returns the child's reference
	// (zero when the task named none).
	InstantCloneVirtualMachine(ctx context.Context, parent Ref, req InstantClone) (Ref, error)
	// LoadVirtualMachineEvents returns the VM's events of the given types
	// (all types when none), newest last, at most the last 1000.
	LoadVirtualMachineEvents(ctx context.Context, vm Ref, eventTypes ...string) ([]Event, error)
	// GuestToolsStatus reads the VM's guest.toolsStatus ("" when vCenter
	// reports none), one request: whether its guest has VMware Tools.
	GuestToolsStatus(ctx context.Context, vm Ref) (ToolsStatus, error)
	// GuestProgramExit reads whether the guest program pid, started with
	// auth (StartProgramInGuest), ended and its exit code
	// (ListProcessesInGuest); a pid the guest does not list is an error.
	GuestProgramExit(ctx context.Context, vm Ref, auth *GuestAuth, pid int64) (exitCode int32, ended bool, err error)
	// ReadGuestFile reads at most maxBytes of the file path in the guest
	// with auth (InitiateFileTransferFromGuest, then an HTTPS GET on the
	// VM's host); FaultNotSupported when vCenter hands out no
	// guest file. The file stays.
	ReadGuestFile(ctx context.Context, vm Ref, auth *GuestAuth, path string, maxBytes int64) ([]byte, error)
	// DeleteGuestFile deletes the file path in the guest with auth.
	DeleteGuestFile(ctx context.Context, vm Ref, auth *GuestAuth, path string) error
}

// Placement resolves where new VMs go (the folder, pool, datastore and
// network settings) to references and backing data, and reads the pool's
// runtime for capacity decisions.
type Placement interface {
	// LoadFolder returns the folder new VMs go to (folderString, else the
	// datacenter's VM folder).
	LoadFolder(ctx context.Context) (Ref, error)
	// LoadResourcePool returns the pool new VMs go to (resourcePoolString,
	// else the datacenter's default pool; ambiguous is an error).
	LoadResourcePool(ctx context.Context) (Ref, error)
	// ResourcePoolRuntime reads the figures of the pool's runtime (CPU and
	// memory maximum, usage, unreserved for VMs).
	ResourcePoolRuntime(ctx context.Context, pool Ref) (*PoolRuntime, error)
	// LoadDatastore finds a datastore by name ("" = the default datastore).
	LoadDatastore(ctx context.Context, name string) (Ref, error)
	// FolderAt returns the VM folder at path (an inventory path or name;
	// "" is LoadFolder's): a placement's folder.
	FolderAt(ctx context.Context, path string) (Ref, error)
	// ResourcePoolAt returns the resource pool at path, a pool's or a
	// cluster's path (a cluster stands for its root pool); "" is
	// LoadResourcePool's: a placement's pool.
	ResourcePoolAt(ctx context.Context, path string) (Ref, error)
	// DatastoreSpace reads a datastore's name, free space, capacity and
	// accessibility (summary) in one request.
	DatastoreSpace(ctx context.Context, ds Ref) (*DatastoreSpace, error)
	// PoolRuntimeAt reads the runtime of the resource pool at path
	// (ResourcePoolAt, then ResourcePoolRuntime): a placement's pool
	// (admission.PlacementPort).
	PoolRuntimeAt(ctx context.Context, path string) (*PoolRuntime, error)
	// DatastoreSpaceOf reads the space of the datastore named name
	// (LoadDatastore, then DatastoreSpace; admission.PlacementPort).
	DatastoreSpaceOf(ctx context.Context, name string) (*DatastoreSpace, error)
}

// InventorySource reads the VMs of the inventory's scope: the datacenter's
// VM folder, or, with templateFolders, the hatchery's folder and the
// template folders (docs/inventory-watch.md, "Scope"): the full listing,
// and the incremental inventory (inventoryMode = "watch").
type InventorySource interface {
	// ListVirtualMachines returns every VM and template of the scope
	// with the leaf properties in vim.VMProperties read.
	ListVirtualMachines(ctx context.Context) ([]VMInfo, error)
	// ProbeInventory reads, in one round trip, the references of every VM
	// and template of the scope (the `view` of its folders' container
	// views) and, when pool is not nil, the pool's runtime (nil when pool
	// is nil).
	ProbeInventory(ctx context.Context, pool *Ref) ([]Ref, *PoolRuntime, error)
	// RetrieveVirtualMachines reads vim.VMProperties of the given VMs by
	// reference, no listing; VMs that no longer exist are left out.
	RetrieveVirtualMachines(ctx context.Context, refs []Ref) ([]VMInfo, error)
	// ResetVirtualMachineWatch drops the VM change watch (best effort) and
	// starts an empty one in the current session. A client has one watch,
	// for one owner (one watch inventory): two owners would reset each
	// other's watch and poll one collector at once.
	ResetVirtualMachineWatch(ctx context.Context) error
	// WatchVirtualMachines adds VMs to the change watch: from now on a
	// change of one of their vim.VMWatchProperties is reported by
	// VirtualMachineChanges. ErrWatchLost when the watch is not one of the
	// current session (reset it).
	WatchVirtualMachines(ctx context.Context, refs []Ref) error
	// UnwatchVirtualMachines takes VMs that are gone out of the watch.
	UnwatchVirtualMachines(ctx context.Context, refs []Ref) error
	// VirtualMachineChanges returns at once (it never waits for a change)
	// the updates of watched VMs since the previous call: "enter" (a VM's
	// first report: every watched property), "modify" (the properties that
	// changed) and "leave" (gone). ErrWatchLost (wrapped) when the watch is
	// gone (a new session): reset it and read everything again.
	VirtualMachineChanges(ctx context.Context) ([]VMUpdate, error)
}

// Locks are lock objects whose names vCenter keeps unique: empty folders
// in one lock folder (vcenter.LockFolderName, created inside the folder new VMs go
// to), one per name. Two processes
// creating one name at once see one of them succeed; the other gets
// ErrLockTaken. The hatchery takes a static IP address through one
// (docs/high-availability.md, "Static IPs").
type Locks interface {
	// CreateLock creates the lock object name and returns its reference;
	// ErrLockTaken (wrapped) when an object of that name exists there.
	CreateLock(ctx context.Context, name string) (Ref, error)
	// ListLocks returns the lock objects (folders) whose name starts with
	// prefix, by name.
	ListLocks(ctx context.Context, prefix string) (map[string]Ref, error)
	// DeleteLock deletes the lock object lock; already gone is success.
	// A folder that is not empty is not deleted (an error): destroying
	// a folder destroys what it holds.
	DeleteLock(ctx context.Context, lock Ref) error
}

// Attributes are values the hatchery keeps in vCenter, where every
// instance of it sees them: custom attributes of the folder new VMs go to
// (LoadFolder), never of a VM. They speak the project's vocabulary
// (strings); their errors name the attribute and carry their fault kind
// (vcenter.Classify). The warm pools keep their learnt demand there
// (docs/warm-pools.md, "After a restart").
type Attributes interface {
	// FolderAttribute reads the folder's custom attribute name: its
	// value and true, false when it has none.
	FolderAttribute(ctx context.Context, name string) (value string, ok bool, err error)
	// SetFolderAttribute sets the folder's custom attribute name to
	// value (the last writer wins), defining the field for folders when
	// needed; a value longer than vcenter.MaxAttributeValue is refused
	// (vcenter.ErrAttributeTooLarge) before any request.
	SetFolderAttribute(ctx context.Context, name, value string) error
}
