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

// resolveFlavor returns the flavor a worker gets in the running
// configuration (config.ResolveFlavor, docs/design.md#flavor-resolution),
// nil for none (template resources). The admission resolves it in the
// snapshot it decides with; the spawn takes the admission's result, in
// its plan (spawnFlavor).
func (h *HatcheryVSphere) resolveFlavor(model sdk.WorkerStarterWorkerModel, reqs []sdk.Requirement) (*config.Flavor, error) {
	return h.conf().ResolveFlavor(model, reqs)
}

// spawnFlavor is the flavor the spawn of args builds: its plan's
// (spawnPlan), the one the admission resolved and reserved for the job.
func (h *HatcheryVSphere) spawnFlavor(args spawn.Arguments) (*config.Flavor, error) {
	p := h.spawnPlan(args)
	return p.Flavor, p.FlavorErr
}

// spawnPlan is the plan the spawn of args builds
// (docs/architecture.md): the one the admission resolved for the job from
// one configuration snapshot (args.Reservation: admission.PlanOf), else,
// for a spawn that comes without one (a registration, a hatchery without
// the framework's admission), one resolved now from the running
// configuration, read once.
func (h *HatcheryVSphere) spawnPlan(args spawn.Arguments) admission.Plan {
	if p, ok := admission.PlanOf(args.Reservation); ok {
		return p
	}
	return admission.NewPlan(h.conf(), args.Model, args.Requirements)
}
