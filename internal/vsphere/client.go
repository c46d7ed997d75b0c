package vsphere

import (
	"context"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// VSphereClient is the hatchery's only port to vCenter. Its signatures use
// govmomi and standard library types only, so that mock_vsphere is generated
// without importing this package. Every method is bounded: each SOAP request
// by the client's request timeout (15 s), each task by a named task timeout,
// each wait by ctx (callers set the readiness deadlines of 001 §9.1).
//
//go:generate mockgen -destination=../../mock_vsphere/mock_client.go -package=mock_vsphere github.com/cds-contrib/hatchery-vsphere/internal/vsphere VSphereClient
type VSphereClient interface {
	// ListVirtualMachines returns every VM and template of the datacenter
	// with only the leaf properties in VMProperties set.
	ListVirtualMachines(ctx context.Context) ([]mo.VirtualMachine, error)
	// LoadVirtualMachine finds a VM or template by name in the datacenter.
	LoadVirtualMachine(ctx context.Context, name string) (*object.VirtualMachine, error)
	// NewVirtualMachine wraps a reference without a round trip.
	NewVirtualMachine(ref types.ManagedObjectReference) *object.VirtualMachine
	// LoadVirtualMachineDevices returns the VM's device list.
	LoadVirtualMachineDevices(ctx context.Context, vm *object.VirtualMachine) (object.VirtualDeviceList, error)
	// GetVirtualMachinePowerState reads the VM's power state.
	GetVirtualMachinePowerState(ctx context.Context, vm *object.VirtualMachine) (types.VirtualMachinePowerState, error)
	// StartVirtualMachine powers the VM on; already on is success.
	StartVirtualMachine(ctx context.Context, vm *object.VirtualMachine) error
	// ShutdownVirtualMachine powers the VM off; already off is success.
	ShutdownVirtualMachine(ctx context.Context, vm *object.VirtualMachine) error
	// DestroyVirtualMachine destroys a powered-off VM; already gone is success.
	DestroyVirtualMachine(ctx context.Context, vm *object.VirtualMachine) error
	// CloneVirtualMachine clones vm into folder under name and waits for
	// the task; it returns the new VM's reference.
	CloneVirtualMachine(ctx context.Context, vm *object.VirtualMachine, folder *object.Folder, name string, spec *types.VirtualMachineCloneSpec) (*types.ManagedObjectReference, error)
	// RenameVirtualMachine renames the VM and waits for the task.
	RenameVirtualMachine(ctx context.Context, vm *object.VirtualMachine, newName string) error
	// ReconfigureVirtualMachine applies spec (annotation, CPU/RAM, devices)
	// and waits for the task.
	ReconfigureVirtualMachine(ctx context.Context, vm *object.VirtualMachine, spec types.VirtualMachineConfigSpec) error
	// MarkVirtualMachineAsTemplate turns a powered-off VM into a template.
	MarkVirtualMachineAsTemplate(ctx context.Context, vm *object.VirtualMachine) error
	// WaitForVirtualMachineShutdown blocks until the VM is powered off or ctx ends.
	WaitForVirtualMachineShutdown(ctx context.Context, vm *object.VirtualMachine) error
	// WaitForGuestOperationsReady blocks until guest.guestOperationsReady
	// is true or ctx ends.
	WaitForGuestOperationsReady(ctx context.Context, vm *object.VirtualMachine) error
	// WaitForVirtualMachineIP blocks until the guest reports an IPv4
	// address (expectedIP when not empty, read from guest.net) or ctx ends,
	// and returns it.
	WaitForVirtualMachineIP(ctx context.Context, vm *object.VirtualMachine, expectedIP string) (string, error)
	// LoadFolder returns the folder new VMs go to (folderString, else the
	// datacenter's VM folder).
	LoadFolder(ctx context.Context) (*object.Folder, error)
	// LoadNetwork finds a network by name ("" = the default network).
	LoadNetwork(ctx context.Context, name string) (object.NetworkReference, error)
	// SetupEthernetCard sets card's backing to network, built as a card of
	// type ethernetCardName.
	SetupEthernetCard(ctx context.Context, card *types.VirtualEthernetCard, ethernetCardName string, network object.NetworkReference) error
	// LoadResourcePool returns the pool new VMs go to (resourcePoolString,
	// else the datacenter's default pool; ambiguous is an error).
	LoadResourcePool(ctx context.Context) (*object.ResourcePool, error)
	// ResourcePoolRuntime reads the pool's runtime (CPU/memory usage,
	// reservations, unreserved for VMs).
	ResourcePoolRuntime(ctx context.Context, pool *object.ResourcePool) (*types.ResourcePoolRuntimeInfo, error)
	// LoadDatastore finds a datastore by name ("" = the default datastore).
	LoadDatastore(ctx context.Context, name string) (*object.Datastore, error)
	// StartProgramInGuest runs a program in the guest with auth and returns its pid.
	StartProgramInGuest(ctx context.Context, vm *object.VirtualMachine, auth types.BaseGuestAuthentication, spec *types.GuestProgramSpec) (int64, error)
	// LoadVirtualMachineEvents returns the VM's events of the given types
	// (all types when none), newest last, at most the last 1000.
	LoadVirtualMachineEvents(ctx context.Context, vm *object.VirtualMachine, eventTypes ...string) ([]types.BaseEvent, error)
}

// VMProperties are the leaf properties ListVirtualMachines retrieves: only
// what the hatchery reads (DESIGN §7), never whole config/summary/guest objects.
var VMProperties = []string{
	"name",
	"config.template",
	"config.annotation",
	"config.extraConfig",
	"config.hardware.numCPU",
	"config.hardware.memoryMB",
	"runtime.powerState",
	"guest.ipAddress",
	"guest.net",
	"guest.guestOperationsReady",
}
