// Package warmpool is the hatchery's warm pool: VMs cloned ahead of the
// jobs and waiting, powered off, suspended or running, under the name of a
// pool slot (docs/configuration.md, "Warm pool"; docs/high-availability.md,
// "Pool slots"). It owns:
//
//   - the pools and their slot names (Key, Key.SlotName), read from the
//     workerProvisioning entries;
//   - the provisioning pass (Pool.Provision): the pool counts, the removal
//     of idle surplus VMs (Pool.RemoveSurplus), the refill of free slots,
//     round-robin and bounded, and the making of one VM (Pool.ProvisionOne:
//     clone, IP, power off or wait hot);
//   - the claim (Pool.Claim): which idle VM a spawn takes, in which order,
//     atomically in this process (the lifecycle table) and against the
//     other instances of the hatchery (a compare-and-swap on the VM's
//     changeVersion);
//   - the preparation of a claimed VM as the worker (Pool.PrepareClaimed,
//     Pool.PrepareHot): rename, record, resize, cloud-init guestinfo, power
//     on or resume and check.
//
// It does not own the VMs' phases (internal/lifecycle, shared with the
// hatchery's other loops, docs/lifecycle.md), the capacity decision of a
// provisioning (internal/admission), the writes on its VMs that every VM
// of the hatchery shares — deletion marks, deletions, ownership records,
// userdata scrubs, the quarantine's attempts — (internal/custody, which it
// holds as Pool.Custody, the hatchery's own), the clone itself (the
// hatchery's, Pool.Clone), or the registration of V1 models (the
// hatchery's, Pool.Host). It reaches vCenter through its Port, in the project's vocabulary
// (internal/vctypes: a VM is a vctypes.Ref, a reconfigure a
// vctypes.ConfigChange, a fault a vctypes.FaultKind), which vctypes.Port
// implements; it imports no govmomi package and
// never imports internal/vsphere.
package warmpool
