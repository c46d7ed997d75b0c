package vsphere

import (
	"context"
	"strings"

	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/internal/modelref"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/cds-contrib/hatchery-vsphere/sdk/workerpool"
)

// isRegisterJob tells whether a job id is a model registration (no job).
func isRegisterJob(jobID string) bool { return jobID == "" || jobID == "0" }

// pendingKey is the pendingJobs entry of a spawn: the job id, or
// "register-<model>" for a registration, which has no job.
func pendingKey(jobID string, model sdk.WorkerStarterWorkerModel) string {
	if isRegisterJob(jobID) && model.IsV1() {
		return workerpool.RegisterPrefix + modelref.BuiltName(model.ModelV1)
	}
	return jobID
}

// CanSpawn tells whether the hatchery can serve the job
// (docs/design.md#canspawn): a vsphere model with a command, no service, memory or
// hostname requirement (flavor is served), a registration only for a V1
// model not already being registered, no VM already serving the job and no
// spawn of it in flight, and a free static IP when a range is configured.
// It reads the inventory once and logs one line per refusal.
func (h *HatcheryVSphere) CanSpawn(ctx context.Context, model sdk.WorkerStarterWorkerModel, jobID string, requirements []sdk.Requirement) bool {
	refuse := func(reason string) bool {
		h.log.Info("cannot spawn", logkey.Job, jobID, logkey.Model, model.GetName(), logkey.Detail, reason)
		return false
	}
	if model.GetType() != sdk.VSphere {
		return refuse("model type " + model.GetType() + " is not vsphere")
	}
	for _, r := range requirements {
		switch r.Type {
		case sdk.ServiceRequirement, sdk.MemoryRequirement, sdk.HostnameRequirement:
			return refuse("unsupported requirement " + r.Type + " " + r.Name)
		}
	}
	if strings.TrimSpace(model.GetCmd()) == "" {
		return refuse("model has no cmd")
	}
	register := isRegisterJob(jobID)
	if register && !model.IsV1() {
		return refuse("v2 models cannot be registered")
	}
	if h.pendingJobs.Has(pendingKey(jobID, model)) {
		return refuse("job is already being spawned")
	}
	vms, err := h.inv.VMs(ctx)
	if err != nil {
		return refuse("cannot list vms: " + err.Error())
	}
	if register {
		name := strings.ToLower(modelref.BuiltName(model.ModelV1))
		for _, v := range vms {
			n := strings.ToLower(v.Name)
			if n == name+"-tmp" || strings.HasPrefix(n, workerpool.RegisterPrefix+name) {
				return refuse("model is already being registered by vm " + v.Name)
			}
		}
	}
	idx := h.indexOf(vms)
	if name, ok := idx.Jobs[jobID]; ok && !register {
		return refuse("vm " + name + " already serves the job")
	}
	if h.ips.Enabled() && !h.ips.Available(idx.Used) {
		h.metrics.CapacityRefused(metrics.CapacityIP)
		return refuse("no static ip available")
	}
	return true
}
