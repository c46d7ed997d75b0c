package vsphere

import (
	"github.com/cds-contrib/hatchery-vsphere/internal/admission"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// UnknownFlavorError is returned when a job or model asks for a flavor the
// hatchery configuration does not define (config.UnknownFlavorError).
type UnknownFlavorError = config.UnknownFlavorError

// resolveFlavor returns the flavor a worker gets (config.ResolveFlavor,
// docs/design.md#flavor-resolution), nil for none (template resources).
// The admission resolves it with this function; the spawn takes the
// admission's result (spawnFlavor).
func (h *HatcheryVSphere) resolveFlavor(model sdk.WorkerStarterWorkerModel, reqs []sdk.Requirement) (*config.Flavor, error) {
	return h.conf().ResolveFlavor(model, reqs)
}

// spawnFlavor is the flavor the spawn of args builds: the one the
// admission resolved and reserved for the job (args.Reservation), resolved
// here only when the spawn comes without one (a registration, a hatchery
// without the framework's admission).
func (h *HatcheryVSphere) spawnFlavor(args spawn.Arguments) (*config.Flavor, error) {
	if f, ok, err := admission.ResolvedFlavor(args.Reservation); ok {
		return f, err
	}
	return h.resolveFlavor(args.Model, args.Requirements)
}
