package vsphere

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/quarantine"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// TestQuarantinedTemplateRefusedWithoutVCenter: once a template is
// quarantined, GateSpawn refuses its jobs with the code quarantined, and a
// spawn that passed the gate before is refused by SpawnWorker, both
// without one vCenter call (the strict mock fails on any), while another
// template's job passes the gate.
func TestQuarantinedTemplateRefusedWithoutVCenter(t *testing.T) {
	t.Parallel()
	f := newSpFixture(t, spConfig())
	model := sdk.WorkerStarterWorkerModel{
		ModelV2:     &sdk.V2WorkerModel{Name: "m", Type: sdk.VSphere},
		VSphereSpec: sdk.V2WorkerModelVSphereSpec{Image: "broken"},
		Cmd:         "./worker",
	}
	for i := 0; i < config.DefaultQuarantineThreshold; i++ {
		a, _ := f.h.custody.Quarantine.Begin(quarantineKey(model))
		a.End(false, quarantine.CauseTemplate, "guest never ready")
	}
	ctx := context.Background()
	r := f.h.GateSpawn(ctx, model, "job-1")
	if assert.NotNil(t, r) {
		assert.Equal(t, refusal.ReasonQuarantined, r.Reason)
		assert.Contains(t, r.Detail, "template broken quarantined until 2025-03-01T12:02:00Z after 3 consecutive failures")
	}
	err := f.h.SpawnWorker(ctx, spawn.Arguments{WorkerName: "w-1", JobID: "job-1", Model: model})
	var ref *refusal.Refusal
	if assert.True(t, errors.As(err, &ref), "a refusal: %v", err) {
		assert.Equal(t, refusal.ReasonQuarantined, ref.Reason)
	}
	other := model
	other.VSphereSpec.Image = "debian12"
	assert.Nil(t, f.h.GateSpawn(ctx, other, "job-2"))
	assert.Nil(t, f.h.GateSpawn(ctx, model, ""), "a registration is never refused")
	lines := f.h.quarantineStatusLines()
	if assert.Len(t, lines, 1) {
		assert.Equal(t, sdk.MonitoringStatusAlert, lines[0].Status)
	}
}
