// Package guest starts the CDS worker inside a worker VM through VMware
// Tools guest operations: the guest account a model signs in with (the
// configuration's guestCredentials or models entry, else the model's own
// account with its secrets read from the CDS API), the readiness stages of
// a new VM (guest operations, its IP, a program that really runs) with
// their timeouts, the worker script (preStartScript, PreCmd, Cmd, PostCmd)
// and its launch with the worker config in the environment
// (docs/architecture.md, docs/design.md#timeouts).
//
// It does not clone, claim or annotate VMs, and does not start cloud-init
// workers (their boot is in the clone's guestinfo, internal/clonespec and
// internal/cloudinit): the hatchery (internal/vsphere) calls a Starter
// once the VM is powered on. It reaches vCenter only through its Port, in
// the project's vocabulary (internal/vctypes), which vctypes.Port
// implements itself; it imports no govmomi package.
package guest
