// Package vcenter is the govmomi adapter behind the hatchery's port to
// vCenter.
//
// It owns: the implementation of the port (vctypes.Port, declared in
// internal/vctypes with the vocabulary it speaks, split by use into VMs,
// Placement, InventorySource, Locks and Attributes), which names VMs,
// folders, pools and datastores by reference (vctypes.Ref) and passes
// plain data, never a govmomi object handle; the
// adapter Client, which exists before vCenter answers and connects in the
// background (New, Run, Ready), keeps its one session alive and logs in
// again at the transport level, bounds every request and task, counts
// SOAP requests and bytes, notes whether vCenter answers (Status); the
// inventory's scope's folders (govmomi_scope.go); the placement lookups
// and their cache; the topology check; and the requests (clone, power,
// reconfigure, guest programs, locks, attributes). What vCenter reports by
// itself — the VM change watch, the scope's views, the probe, the wait
// collector — and the translation of govmomi's data are
// internal/vcenter/vim's, whose Collector the Client makes once connected
// and calls.
//
// It does not own: the configuration file (the caller maps it to Config),
// the VM ownership record, the inventory built from its listings, or any
// decision about what to clone, claim or destroy: those belong to
// internal/vsphere. Of the project's packages it imports only the
// vocabulary and the port (internal/vctypes), its own internal/vcenter/vim
// and the log keys (sdk/logkey).
//
// docs/architecture.md ("The vCenter port", "The one vCenter client")
// describes it.
package vcenter
