package vsphere

import (
	"context"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/internal/warmpool"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// Hooks for the external (vcsim) tests of the warm pool and cleanup: the
// loops' single passes and the claim path, compiled into tests only.

// WarmProvisioningPass runs one provisioning pass.
func (h *HatcheryVSphere) WarmProvisioningPass(ctx context.Context) { h.pool.Provision(ctx) }

// WarmKillAwolServersPass runs one awol cleanup pass.
func (h *HatcheryVSphere) WarmKillAwolServersPass(ctx context.Context) { h.killAwolServers(ctx) }

// WarmClaim is warmpool.Pool.Claim.
func (h *HatcheryVSphere) WarmClaim(ctx context.Context, model sdk.WorkerStarterWorkerModel, flavor *config.Flavor) (*inventory.VM, error) {
	return h.pool.Claim(ctx, model, flavor, true)
}

// WarmPrepareClaimed is warmpool.Pool.PrepareClaimed without cloud-init.
func (h *HatcheryVSphere) WarmPrepareClaimed(ctx context.Context, vm *inventory.VM, annot inventory.Annotation, flavor *config.Flavor) (vctypes.Ref, error) {
	ref, err := h.pool.PrepareClaimed(ctx, vm, annot, flavor, nil)
	return ref, err
}

// WarmCloneFunc is the signature of cloneVM.
type WarmCloneFunc = warmpool.CloneFunc

// WarmWrapClone makes provisioning clone through wrap(cloneVM).
func (h *HatcheryVSphere) WarmWrapClone(wrap func(next WarmCloneFunc) WarmCloneFunc) {
	h.pool.Clone = wrap(poolClone(h.cloneVM))
}

// WarmFlavor returns the configured flavor named name (nil when unknown).
func (h *HatcheryVSphere) WarmFlavor(name string) *config.Flavor { return h.pool.FlavorByName(name) }

// WarmInventory is the hatchery's inventory, for tests that wait for it.
func (h *HatcheryVSphere) WarmInventory() inventory.Inventory { return h.inv }

// CollectMetricsOnce runs one metrics collection pass.
func (h *HatcheryVSphere) CollectMetricsOnce(ctx context.Context, m *metrics.Metrics) {
	h.collectMetrics(ctx, m)
}
