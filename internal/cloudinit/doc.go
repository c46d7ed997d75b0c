// Package cloudinit owns the documents the hatchery hands to cloud-init's
// VMware datasource (docs/cloud-init.md): the metadata (instance id,
// hostname, version 2 network config of a static address), the
// cloud-config userdata that writes and starts the worker script, their
// guestinfo keys and gzip+base64 encoding, the reconfigure that removes
// the userdata, and the parsers and decoder that read them back (tests,
// the simulators).
//
// It is pure: it builds and parses bytes and vSphere extraConfig values,
// makes no vCenter call and imports no other internal package. Writing the
// guestinfo to a VM, waiting for the guest and removing the worker token
// once the worker registered belong to internal/vsphere
// (cloudinit_spawn.go).
package cloudinit
