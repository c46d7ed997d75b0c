package vsphere

// forgetConsumed drops the consumed marks (provisioningState.consumed) of
// VMs the inventory no longer shows as provisioned: renamed, re-annotated as
// a worker, or gone. Until then a stale snapshot's "provision-… powered off"
// entry for a claimed VM is never offered to another claim or to the
// surplus removal. The marks are an accelerator over the annotation: a
// restart loses them, and the fresh inventory of a restart is not stale.
func (h *HatcheryVSphere) forgetConsumed(vms []VM) {
	stillProvisioned := map[string]bool{}
	for _, v := range vms {
		if _, ok := h.keyOf(v); ok {
			stillProvisioned[v.Ref.Value] = true
		}
	}
	for _, ref := range h.prov.consumed.List() {
		if !stillProvisioned[ref] {
			h.prov.consumed.Remove(ref)
		}
	}
}
