// Package clonespec says how a worker VM is made from its template, in
// the project's terms: the clone request (vctypes.Clone: where it goes,
// linked on a snapshot or full, the flavor's size, the guest
// customization — hostname, static IP or DHCP — or the cloud-init
// guestinfo that replaces it for cloud-init models, the record), and the
// clone-mode decision from the template read (vctypes.Template)
// (docs/architecture.md, docs/flavors-and-capacity.md, docs/cloud-init.md).
// The adapter (internal/vcenter) makes the request vCenter's
// specification.
//
// It does not clone, reserve IP addresses, name VMs or decide which jobs
// are served: the hatchery (internal/vsphere) does, and calls a Builder
// for the request. It reaches vCenter only through its Port, a subset of
// vcenter.Port, and only to read. It also adapts a vcenter.Port to the
// warm pool's port (VMPort): the pool says what a claim changes in the
// project's terms (Change) and VMPort makes it a config specification, so
// that internal/warmpool imports no govmomi package.
package clonespec
