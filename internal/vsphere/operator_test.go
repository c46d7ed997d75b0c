package vsphere

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/quarantine"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// TestLiftQuarantineServesTheTemplateAgain: `ctl quarantine lift` ends a
// template's quarantine at once: GateSpawn lets its jobs through, the
// status has no quarantine line, whether the template is named alone or
// as the status writes it; lifting it again, or a template never
// quarantined, is an error. Without the lift the gate refuses until the
// back-off (two minutes here) passes.
func TestLiftQuarantineServesTheTemplateAgain(t *testing.T) {
	t.Parallel()
	f := newSpFixture(t, spConfig())
	model := sdk.WorkerStarterWorkerModel{
		ModelV2:     &sdk.V2WorkerModel{Name: "m", Type: sdk.VSphere},
		VSphereSpec: sdk.V2WorkerModelVSphereSpec{Image: "broken"},
		Cmd:         "./worker",
	}
	quarantineIt := func() {
		for range config.DefaultQuarantineThreshold {
			a, _ := f.h.custody.Quarantine.Begin(quarantineKey(model))
			a.End(false, quarantine.CauseTemplate, "guest never ready")
		}
	}
	ctx := context.Background()
	for _, name := range []string{"broken", "template broken"} { // the template, or the status's key
		quarantineIt()
		require.NotNil(t, f.h.GateSpawn(ctx, model, "job-1"), "quarantined")
		require.NoError(t, f.h.LiftQuarantine(name, "ctl uid 7"))
		assert.Nil(t, f.h.GateSpawn(ctx, model, "job-1"), "served again at once")
		assert.Empty(t, f.h.quarantineStatusLines())
	}
	assert.EqualError(t, f.h.LiftQuarantine("broken", "ctl uid 7"), `lift quarantine of "broken": not quarantined`)
	assert.EqualError(t, f.h.LiftQuarantine("debian12", "ctl uid 7"), `lift quarantine of "debian12": not quarantined`)
}

// TestReleaseHoldMarksTheVM: `ctl hold release` marks a held VM (here
// known only from its record: an earlier run's hold) for deletion, which
// the cleanup then destroys; a VM not held, or released already, is an
// error and nothing is marked.
func TestReleaseHoldMarksTheVM(t *testing.T) {
	t.Parallel()
	f := newSpFixture(t, holdConfig(2))
	now := f.clock.Now()
	f.inv.Add(heldAt("held-1", "run-a", now.Add(time.Minute)))
	f.inv.Add(inventory.VM{Ref: spRef("VirtualMachine", "vm-w"), Name: "worker-1", PowerState: vctypes.PoweredOn,
		Annotation: &inventory.Annotation{HatcheryName: spHatchery, WorkerName: "worker-1", JobID: "run-b"}})
	ctx := context.Background()

	assert.EqualError(t, f.h.ReleaseHold(ctx, "worker-1", "ctl uid 7"), `release hold of vm "worker-1": not held`)
	assert.Empty(t, markedNames(f.h))
	require.NoError(t, f.h.ReleaseHold(ctx, "held-1", "ctl uid 7"))
	assert.Equal(t, []string{"held-1"}, markedNames(f.h))
	assert.Empty(t, f.h.HeldWorkers(ctx), "no longer listed as held")
	assert.EqualError(t, f.h.ReleaseHold(ctx, "held-1", "ctl uid 7"), `release hold of vm "held-1": not held`)
}

// TestOperatorVMs: `ctl vms` lists this hatchery's VMs only (no template,
// no other hatchery's VM), by name, with the phase their record implies
// when the lifecycle table has no entry, and the table's when it has one.
func TestOperatorVMs(t *testing.T) {
	t.Parallel()
	f := newSpFixture(t, holdConfig(2))
	now := f.clock.Now()
	started := now.Add(-time.Minute)
	f.inv.Add(inventory.VM{Name: "debian12", Template: true})
	f.inv.Add(heldAt("held-1", "run-a", now.Add(time.Minute)))
	f.inv.Add(inventory.VM{Ref: spRef("VirtualMachine", "vm-p"), Name: "warmpool-v2-debian12-0",
		Annotation: &inventory.Annotation{HatcheryName: spHatchery, Provisioning: true, VMwareModelPath: "debian12"}})
	f.inv.Add(inventory.VM{Ref: spRef("VirtualMachine", "vm-w"), Name: "worker-1", PowerState: vctypes.PoweredOn,
		Annotation: &inventory.Annotation{HatcheryName: spHatchery, WorkerName: "worker-1", JobID: "run-b", VMwareModelPath: "debian12", Flavor: "small", WorkerStarted: &started, IPAddress: "10.0.0.5"}})
	f.inv.Add(inventory.VM{Ref: spRef("VirtualMachine", "vm-x"), Name: "theirs", Annotation: &inventory.Annotation{HatcheryName: "other"}})
	f.inv.Add(inventory.VM{Ref: spRef("VirtualMachine", "vm-m"), Name: "worker-2",
		Annotation: &inventory.Annotation{HatcheryName: spHatchery, WorkerName: "worker-2", JobID: "run-c"}})
	require.True(t, f.h.markToDelete("worker-2"))

	vms, err := f.h.OperatorVMs(context.Background())
	require.NoError(t, err)
	got := map[string]VMInfo{}
	var names []string
	for _, v := range vms {
		got[v.Name] = v
		names = append(names, v.Name)
	}
	assert.Equal(t, []string{"held-1", "warmpool-v2-debian12-0", "worker-1", "worker-2"}, names)
	assert.Equal(t, "held", got["held-1"].Phase)
	assert.Equal(t, "idle", got["warmpool-v2-debian12-0"].Phase)
	assert.True(t, got["warmpool-v2-debian12-0"].WarmPool)
	w := got["worker-1"]
	assert.Equal(t, VMInfo{Name: "worker-1", Phase: "started", Job: "run-b", Model: "debian12", Flavor: "small", PoweredOn: true, IP: "10.0.0.5"}, w)
	assert.Equal(t, "marked", got["worker-2"].Phase, "the table's phase")
}
