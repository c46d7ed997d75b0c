package vsphere

import (
	"context"
	"fmt"
	"sort"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/vmware/govmomi/vim25/types"
)

// idleProvisioned tells whether vm is an idle VM of the warm pool: ours,
// provisioned, in the power state its record's idle state says
// (idlePowerState), not being provisioned, claimed or deleted.
// Only such VMs may be claimed or removed as surplus.
func (h *HatcheryVSphere) idleProvisioned(vm inventory.VM) bool {
	if _, ok := h.keyOf(vm); !ok {
		return false
	}
	return vm.PowerState == idlePowerState(vm.Annotation) &&
		h.life.In(vm.Name, claimable...) &&
		!h.life.RefIn(vm.Ref.Value, consumedPhases...)
}

// removeSurplus destroys idle provisioned VMs of pools holding more than
// their configured number (the number went down, the entry or its flavor
// changed, or it was removed). Only idle VMs go: a VM being provisioned or
// claimed is never touched, so a pool may stay above its number until
// those end. A failed deletion stays marked and is retried by cleanup.
func (h *HatcheryVSphere) removeSurplus(ctx context.Context, vms []inventory.VM, counts, configured map[poolKey]int) {
	idle := map[poolKey][]inventory.VM{}
	for _, v := range vms {
		if h.idleProvisioned(v) {
			k, _ := h.keyOf(v)
			idle[k] = append(idle[k], v)
		}
	}
	keys := make([]poolKey, 0, len(idle))
	for k := range idle {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keyLess(keys[i], keys[j]) })

	for _, k := range keys {
		excess := counts[k] - configured[k]
		if excess <= 0 {
			continue
		}
		candidates := idle[k]
		sort.Slice(candidates, func(i, j int) bool {
			a, b := candidates[i].Annotation.Created, candidates[j].Annotation.Created
			if !a.Equal(b) {
				return a.Before(b)
			}
			return candidates[i].Name < candidates[j].Name
		})
		for _, v := range candidates {
			if excess == 0 || ctx.Err() != nil {
				break
			}
			// Marking it, in one step with the check that it is still
			// idle, keeps a concurrent spawn off this VM.
			if _, err := h.life.MoveFrom(v.Name, claimable, lifecycle.Marked); err != nil {
				continue
			}
			excess--
			h.log.Info("deleting surplus provisioned vm", logkey.VM, v.Name, logkey.Model, k.model, logkey.Flavor, k.flavor,
				logkey.Detail, fmt.Sprintf("pool holds %d, configured %d", counts[k], configured[k]))
			if err := h.deleteServer(ctx, v); err != nil {
				h.warnUnlessShuttingDown(ctx, "surplus provisioned vm not deleted, retried by cleanup", logkey.VM, v.Name, logkey.Err, err)
			}
		}
	}
}

func keyLess(a, b poolKey) bool {
	if a.v1 != b.v1 {
		return !a.v1
	}
	if a.model != b.model {
		return a.model < b.model
	}
	return a.flavor < b.flavor
}

// idlePowerState is the power state a ready pool VM whose record is a
// waits in: its idle state (docs/configuration.md, "Warm pool"); powered
// off when none is recorded.
func idlePowerState(a *inventory.Annotation) types.VirtualMachinePowerState {
	if a == nil {
		return types.VirtualMachinePowerStatePoweredOff
	}
	switch a.IdleState {
	case config.IdleStateSuspended:
		return types.VirtualMachinePowerStateSuspended
	case config.IdleStatePoweredOn:
		return types.VirtualMachinePowerStatePoweredOn
	}
	return types.VirtualMachinePowerStatePoweredOff
}
