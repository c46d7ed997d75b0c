// Package vctypes is the project's own vCenter vocabulary and the port
// to vCenter that speaks it (Port = VMs + Placement + InventorySource +
// Locks + Attributes: port.go; the mock, mock_vsphere, is generated from
// it), so that a decision package, the mock and the port's consumers
// share one import that holds no govmomi. The vocabulary is what the
// decision packages (admission, capacity, warmpool, quarantine, lifecycle,
// ippool, spawnfault, guest) say about vCenter objects, in the project's
// types rather than govmomi's: a reference to an object (Ref), a VM's
// power state (PowerState), the figures of a resource pool's runtime
// (PoolRuntime), a guest account and a program to start in a guest
// (GuestAuth, GuestProgram), the status of a guest's VMware Tools
// (ToolsStatus), a VM's event (Event), a clone's request and what it
// reads of its template (Clone, Template), the kinds of faults vCenter answers
// (FaultKind, carried by a Fault), the sentinel errors of the port
// (ErrNotConnected, ErrLockTaken…), and the one port subset two consumers
// share (PoolReader).
//
// It imports only the standard library. Conversions to and from govmomi,
// and the classification of govmomi's faults into a FaultKind, live in
// internal/vcenter/vim (vocabulary.go), the half of the govmomi adapter
// that holds no Client; internal/vcenter's Client implements Port
// (adapter_port.go converts and classifies), so that it is guest.Port,
// warmpool.Port and custody.Port itself; see docs/architecture.md, "The
// vCenter port".
package vctypes
