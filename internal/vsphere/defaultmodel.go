package vsphere

import (
	"slices"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// GetDefaultModelV2Name returns the V2 worker model a V1 job runs on:
// with no binary requirement the first configured default model;
// otherwise the first defaultWorkerModelsV2 entry whose binaries hold one of
// the job's binary requirements; "" when none matches or none is configured.
func (h *HatcheryVSphere) GetDefaultModelV2Name(requirements []sdk.Requirement) string {
	models := h.conf().DefaultWorkerModelsV2
	if len(models) == 0 {
		return ""
	}
	binaries := sdk.RequirementList(requirements).Values(sdk.BinaryRequirement)
	if len(binaries) == 0 {
		return models[0].WorkerModelV2
	}
	for _, m := range models {
		for _, b := range binaries {
			if slices.Contains(m.Binaries, b) {
				return m.WorkerModelV2
			}
		}
	}
	return ""
}
