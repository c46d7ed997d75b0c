package warmpool

import (
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
)

// forgetConsumed ends the Claimed entries (docs/lifecycle.md) of VMs the
// inventory no longer shows as provisioned: renamed, re-annotated as a
// worker, or gone. Until then a stale snapshot's "provision-… powered off"
// entry for a claimed VM is never offered to another claim or to the
// surplus removal. The entries are an accelerator over the annotation: a
// restart loses them, and the fresh inventory of a restart is not stale.
func (p *Pool) forgetConsumed(vms []inventory.VM) {
	stillProvisioned := map[string]bool{}
	for _, v := range vms {
		if _, ok := keyOf(p.Hatchery, v); ok {
			stillProvisioned[v.ObjectRef().Value] = true
		}
	}
	for _, e := range p.Life.List(lifecycle.Claimed) {
		if !stillProvisioned[e.Ref] {
			p.dropClaim(e.Name, e.Ref)
		}
	}
}

// lifeVM names an inventory VM to the lifecycle table: by its reference,
// whatever name a snapshot shows it under.
func lifeVM(v inventory.VM) lifecycle.VM { return lifecycle.VM{Ref: v.ObjectRef().Value, Name: v.Name} }
