package vsphere

import (
	"context"
	"strings"

	"github.com/cds-contrib/hatchery-vsphere/internal/modelref"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
	"github.com/cds-contrib/hatchery-vsphere/sdk/workerpool"
)

// isRegisterJob tells whether a job id is a model registration (no job).
func isRegisterJob(jobID string) bool { return jobID == "" || jobID == "0" }

// pendingKey is the job key a spawn is recorded in flight under
// (lifecycle.Table.BeginSpawn): the job id, or "register-<model>" for a
// registration, which has no job.
func pendingKey(jobID string, model sdk.WorkerStarterWorkerModel) string {
	if isRegisterJob(jobID) && model.IsV1() {
		return workerpool.RegisterPrefix + modelref.BuiltName(model.ModelV1)
	}
	return jobID
}

// CanSpawn tells whether the hatchery can serve the job
// (docs/design.md#canspawn): nil when it can, else the refusal and its code
// (docs/flavors-and-capacity.md). A vsphere model with a command
// (refusal.ReasonModel), for a V2 model a template v2TemplateNames allows
// (refusal.ReasonTemplate), no service, memory or hostname requirement, flavor
// being served (refusal.ReasonRequirement), a registration only for a V1
// model (refusal.ReasonModel) not already being registered
// (refusal.ReasonRegistering), no spawn of the job in flight
// (refusal.ReasonSpawning), no VM already serving the job
// (refusal.ReasonServed), a readable inventory (refusal.ReasonResources)
// and a free static IP when a range is configured (refusal.ReasonIP; the
// framework reports every refusal to the daemon's observer, which meters
// it as capacity_refusals{resource="ip"}). It reads the inventory once
// and logs nothing: the framework logs the decision, one line with its
// code.
func (h *HatcheryVSphere) CanSpawn(ctx context.Context, model sdk.WorkerStarterWorkerModel, jobID string, requirements []sdk.Requirement) *refusal.Refusal {
	if model.GetType() != sdk.VSphere {
		return refusal.Refuse(refusal.ReasonModel, "model type %s is not vsphere", model.GetType())
	}
	if !model.IsV1() {
		if t, cfg := modelref.Of(model).Name, h.conf(); !cfg.V2TemplateAllowed(t) {
			return refusal.Refuse(refusal.ReasonTemplate, "template %q is not among the templates V2 models may name here (v2TemplateNames: %s)", t, cfg.V2TemplatePatterns())
		}
	}
	for _, r := range requirements {
		switch r.Type {
		case sdk.ServiceRequirement, sdk.MemoryRequirement, sdk.HostnameRequirement:
			return refusal.Refuse(refusal.ReasonRequirement, "unsupported requirement %s %s", r.Type, r.Name)
		}
	}
	if strings.TrimSpace(model.GetCmd()) == "" {
		return refusal.Refuse(refusal.ReasonModel, "model has no cmd")
	}
	register := isRegisterJob(jobID)
	if !register {
		// A queue arrival for the warm pool's demand, whether this
		// hatchery then takes the job or not (docs/warm-pools.md).
		if f, err := h.resolveFlavor(model, requirements); err == nil {
			h.pool.NoteArrival(model, f, jobID)
		}
	}
	if register && !model.IsV1() {
		return refusal.Refuse(refusal.ReasonModel, "v2 models cannot be registered")
	}
	if h.life.SpawnInFlight(pendingKey(jobID, model)) {
		return refusal.Refuse(refusal.ReasonSpawning, "job is already being spawned")
	}
	vms, err := h.inv.VMs(ctx)
	if err != nil {
		return &refusal.Refusal{Reason: refusal.ReasonResources, Detail: "cannot list vms: " + err.Error(), Err: err}
	}
	if register {
		name := strings.ToLower(modelref.BuiltName(model.ModelV1))
		for _, v := range vms {
			n := strings.ToLower(v.Name)
			if n == name+"-tmp" || strings.HasPrefix(n, workerpool.RegisterPrefix+name) {
				return refusal.Refuse(refusal.ReasonRegistering, "model is already being registered by vm %s", v.Name)
			}
		}
	}
	idx := h.indexOf(vms)
	if name, ok := idx.Jobs[jobID]; ok && !register {
		return refusal.Refuse(refusal.ReasonServed, "vm %s already serves the job", name)
	}
	if h.ips.Enabled() && !h.ips.Available(idx.Used) {
		return refusal.Refuse(refusal.ReasonIP, "no static ip available")
	}
	return nil
}
