// Package clonespec says how a worker VM is made from its template, in
// the project's terms: the clone request (vctypes.Clone: where it goes,
// linked on a snapshot or full, the flavor's size, the guest
// customization — hostname, static IP or DHCP — or the cloud-init
// guestinfo that replaces it for cloud-init models, also for the warm
// pool's claims, Builder.CloudInitOptions; the record), and the
// clone-mode decision from the template read (vctypes.Template)
// (docs/architecture.md, docs/flavors-and-capacity.md, docs/cloud-init.md).
// The adapter (internal/vcenter) makes the request vCenter's
// specification, the flavor's growth included (vim.ApplyGrowth).
//
// It does not clone, reserve IP addresses, name VMs or decide which jobs
// are served: the hatchery (internal/vsphere) does, and calls a Builder
// for the request. It reaches vCenter only through its Port, a subset of
// vctypes.Port, and only to read. A reconfigure (the warm pool's claims,
// the custody's writes) is a vctypes.ConfigChange the adapter builds
// itself.
package clonespec
