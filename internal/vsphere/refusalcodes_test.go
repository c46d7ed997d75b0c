package vsphere

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/quarantine"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
)

// TestHatcheryRefusalCodesAreProduced drives each of this hatchery's
// decisions not to spawn (CanSpawn, AllocateResources, GateSpawn, and
// SpawnWorker refusing at spawn time) and collects the codes they give:
// they must be exactly refusal.HatcheryReasons, the half of
// refusal.Reasons the framework leaves to the hatchery (the framework's
// half: TestEveryRefusalCodeIsProduced in sdk/hatchery). It fails when a
// decision stops giving its code (ip was never given before), gives one
// outside that list, or when a code listed there is produced by nothing.
func TestHatcheryRefusalCodesAreProduced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	seen := map[refusal.Reason]bool{}
	add := func(what string, err error) {
		t.Helper()
		var r *refusal.Refusal
		if assert.True(t, errors.As(err, &r), "%s: a refusal, got %v", what, err) {
			seen[r.Reason] = true
		}
	}
	asErr := func(r *refusal.Refusal) error {
		if r == nil {
			return nil
		}
		return r
	}

	// CanSpawn.
	v2 := spV2Args().Model
	canSpawn := []struct {
		name    string
		model   sdk.WorkerStarterWorkerModel
		jobID   string
		reqs    []sdk.Requirement
		cfg     func(*config.Config)
		vms     []inventory.VM
		pending string
		listErr error
	}{
		{name: "model type", model: sdk.WorkerStarterWorkerModel{ModelV2: &sdk.V2WorkerModel{Name: "d", Type: sdk.Docker}, Cmd: "x"}, jobID: "1"},
		{name: "template", model: v2, jobID: "1", cfg: func(c *config.Config) { c.V2TemplateNames = []string{"ci-*"} }},
		{name: "requirement", model: v2, jobID: "1", reqs: []sdk.Requirement{{Name: "pg", Type: sdk.ServiceRequirement, Value: "pg"}}},
		{name: "registering", model: spV1Model(), jobID: "0", vms: []inventory.VM{{Name: "mymodel-tmp"}}},
		{name: "spawning", model: v2, jobID: "run-1", pending: "run-1"},
		{name: "served", model: v2, jobID: "run-1", vms: []inventory.VM{{Name: "w", Annotation: &inventory.Annotation{HatcheryName: spHatchery, JobID: "run-1"}}}},
		{name: "inventory unreadable", model: v2, jobID: "run-1", listErr: errors.New("vcenter down")},
		{
			name: "no ip", model: v2, jobID: "run-1",
			cfg: func(c *config.Config) { c.IPRange = "10.0.0.1/30" },
			vms: []inventory.VM{{Name: "a", IPAddresses: []string{"10.0.0.1", "10.0.0.2"}}},
		},
	}
	for _, tc := range canSpawn {
		cfg := spConfig()
		if tc.cfg != nil {
			tc.cfg(cfg)
		}
		f := newSpFixture(t, cfg)
		f.inv.Set(tc.vms...)
		f.inv.SetErr(tc.listErr)
		if tc.pending != "" {
			f.h.life.BeginSpawn(tc.pending)
		}
		add("CanSpawn "+tc.name, asErr(f.h.CanSpawn(ctx, tc.model, tc.jobID, tc.reqs)))
	}

	// AllocateResources: one per exhausted resource.
	for _, c := range []struct {
		name string
		cfg  config.Config
	}{
		{"cpu", config.Config{MaxCPUs: 4, Flavors: capFlavors()}},
		{"memory", config.Config{MaxMemoryMB: 1024, Flavors: capFlavors()}},
	} {
		env := newCapEnv(t, c.cfg)
		env.inv.Set(capUsedVMs(1, 4, 1024)...)
		res, err := env.h.AllocateResources(ctx, capV2("small"), "job-"+c.name, nil)
		assert.Nil(t, res)
		add("AllocateResources "+c.name, err)
	}

	// AllocateResources: room, but no placement can take the clone.
	env := newCapEnv(t, config.Config{Flavors: capFlavors(), Placements: []config.Placement{{Name: "a", MaxVMs: 1}}})
	env.mock.EXPECT().PoolRuntimeAt(gomock.Any(), gomock.Any()).DoAndReturn(func(context.Context, string) (*vctypes.PoolRuntime, error) {
		return env.poolRuntime()
	}).AnyTimes()
	used := capVM("w-a", "other-job", 2, 4096)
	used.Annotation.Placement = "a"
	env.inv.Set(used)
	res, err := env.h.AllocateResources(ctx, capV2("small"), "job-placement", nil)
	assert.Nil(t, res)
	add("AllocateResources placement", err)

	// GateSpawn: a quarantined template.
	f := newSpFixture(t, spConfig())
	model := sdk.WorkerStarterWorkerModel{
		ModelV2:     &sdk.V2WorkerModel{Name: "m", Type: sdk.VSphere},
		VSphereSpec: sdk.V2WorkerModelVSphereSpec{Image: "broken"},
		Cmd:         "./worker",
	}
	for range config.DefaultQuarantineThreshold {
		a, _ := f.h.custody.Quarantine.Begin(quarantineKey(model))
		a.End(false, quarantine.CauseTemplate, "guest never ready")
	}
	add("GateSpawn", asErr(f.h.GateSpawn(ctx, model, "job-1")))

	// SpawnWorker: the last address taken since the admission.
	f = newSpFixture(t, spIPConfig())
	f.inv.Add(inventory.VM{Name: "debian12", Template: true})
	for i := range 32 {
		f.inv.Add(inventory.VM{Name: fmt.Sprintf("other-%d", i), IPAddresses: []string{fmt.Sprintf("10.0.0.%d", i)}})
	}
	add("SpawnWorker", f.h.SpawnWorker(ctx, spV2Args()))

	var got, want []string
	for c := range seen {
		got = append(got, string(c))
	}
	for _, c := range refusal.HatcheryReasons {
		want = append(want, string(c))
	}
	slices.Sort(got)
	slices.Sort(want)
	assert.Equal(t, want, got)
}
