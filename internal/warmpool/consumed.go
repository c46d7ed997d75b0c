package warmpool

import (
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
)

// forgetConsumed ends the Claimed entries (docs/lifecycle.md) of VMs the
// inventory shows consumed: renamed (a worker now) or gone. Until then a
// stale snapshot's "warmpool-… powered off" entry for a claimed VM is
// never offered to another claim or to the surplus removal. A VM listed
// under the name it was claimed by keeps its entry, whatever its record
// says: the claim's own compare-and-swap (claimInVCenter) takes the pool
// flag off that record before the spawn prepares the VM, and the
// preparation moves this very entry on (claimed -> preparing); dropping it
// there would fail the spawn (TestClaimedEntryOutlivesItsClaimRecord). The
// entries are an accelerator over the annotation: a restart loses them,
// and the fresh inventory of a restart is not stale.
func (p *Pool) forgetConsumed(vms []inventory.VM) {
	listedAs := map[string]string{}
	for _, v := range vms {
		listedAs[v.ObjectRef().Value] = v.Name
	}
	for _, e := range p.Life.List(lifecycle.Claimed) {
		if name, ok := listedAs[e.Ref]; !ok || name != e.Name {
			p.dropClaim(e.Name, e.Ref)
		}
	}
}

// lifeVM names an inventory VM to the lifecycle table: by its reference,
// whatever name a snapshot shows it under.
func lifeVM(v inventory.VM) lifecycle.VM { return lifecycle.VM{Ref: v.ObjectRef().Value, Name: v.Name} }
