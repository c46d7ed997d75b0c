// Package inventory owns the hatchery's view of the VMs of its scope (its
// folder and its templates', docs/inventory-watch.md): the VM
// value (VM), the ownership record every VM of the hatchery carries
// (Annotation: parsing, writing, its ExtraConfig mirror, OwnedBy), and the
// one source of VM listings every loop and decision reads (Inventory) with
// its three modes: Listing (a listing per read), Shared (one snapshot, a
// full listing per refresh) and the watch mode of NewWatch (one snapshot
// kept incrementally from vCenter's change reports), plus the per-snapshot
// Index of addresses and jobs (docs/inventory-watch.md).
//
// It reads vCenter only through Source (vctypes.InventorySource and the
// resource pool lookup). It does not decide anything: spawn, cleanup,
// capacity and the IP pool (internal/ippool) take what it returns.
package inventory
