package vsphere

import (
	"context"

	"github.com/cds-contrib/hatchery-vsphere/internal/guest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// guest starts workers through guest operations (internal/guest) with the
// hatchery's vCenter port (adapted: vcenter.Ports) and current logger.
func (h *HatcheryVSphere) guest() guest.Starter {
	return guest.Starter{Port: vcenter.PortsOf(h.vs), Log: h.log}
}

// guestCredentials resolves the guest account of a model from the
// configuration, else from the model and its secrets (guest.Credentials).
func (h *HatcheryVSphere) guestCredentials(ctx context.Context, model sdk.WorkerStarterWorkerModel) (guest.Access, error) {
	return guest.Credentials(ctx, h.cfg, h.cds, model)
}
