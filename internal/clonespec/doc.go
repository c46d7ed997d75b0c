// Package clonespec builds the specification of a worker clone: how a
// worker VM is made from its template. It owns the template facts a clone
// needs (device list and snapshots, cached per template), the clone mode
// (linked on a snapshot or full), the flavor's CPU, memory and disk growth,
// the guest customization (hostname, static IP or DHCP) and the cloud-init
// guestinfo that replaces it for cloud-init models, also for the warm
// pool's claims (Builder.CloudInitOptions) (docs/architecture.md,
// docs/flavors-and-capacity.md, docs/cloud-init.md).
//
// It does not clone, reserve IP addresses, name VMs or decide which jobs
// are served: the hatchery (internal/vsphere) does, and calls a Builder
// for the spec. It reaches vCenter only through its Port, a subset of
// vcenter.Port, and only to read. The flavor's growth rule is the
// adapter's (vcenter.ApplyGrowth; ApplyFlavor applies it to a clone): a
// reconfigure (the warm pool's claims, the custody's writes) is a
// vctypes.ConfigChange the adapter builds itself.
package clonespec
