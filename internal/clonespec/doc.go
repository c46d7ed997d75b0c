// Package clonespec builds the specification of a worker clone: how a
// worker VM is made from its template. It owns the template facts a clone
// needs (device list and snapshots, cached per template), the clone mode
// (linked on a snapshot or full), the flavor's CPU, memory and disk growth,
// the guest customization (hostname, static IP or DHCP) and the cloud-init
// guestinfo that replaces it for cloud-init models (docs/architecture.md,
// docs/flavors-and-capacity.md, docs/cloud-init.md).
//
// It does not clone, reserve IP addresses, name VMs or decide which jobs
// are served: the hatchery (internal/vsphere) does, and calls a Builder
// for the spec. It reaches vCenter only through its Port, a subset of
// vcenter.Port, and only to read. It also adapts a vcenter.Port to the
// warm pool's port (VMPort): the pool says what a claim changes in the
// project's terms (Change) and VMPort makes it a config specification, so
// that internal/warmpool imports no govmomi package.
package clonespec
