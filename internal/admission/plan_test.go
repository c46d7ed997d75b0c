package admission

import (
	"testing"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/modelref"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/stretchr/testify/require"
)

// TestNewPlanReadsOneSnapshot: a plan holds what its configuration says of
// the model (the entry, a copy, with its bootstrap, OS and clone mode), the
// flavor, the placements and the spawn's live keys; changing the
// configuration afterwards changes nothing of it.
func TestNewPlanReadsOneSnapshot(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{
		Flavors:       []config.Flavor{{Name: "small", CPUs: 2, MemoryMB: 2048}},
		DefaultFlavor: "small",
		FolderString:  "/dc/vm/workers",
		Placements:    []config.Placement{{Name: "a", Datastores: []string{"ds-a"}}},
		GuestCredentials: []config.GuestCredential{{
			ModelVMWare: "debian12", Username: "alice", Bootstrap: config.BootstrapCloudInit, CloneMode: config.CloneModeInstant,
		}},
		KeepFailedWorkers: 2,
	}
	model := sdk.WorkerStarterWorkerModel{ModelV2: &sdk.V2WorkerModel{Name: "m", Type: sdk.VSphere}, VSphereSpec: sdk.V2WorkerModelVSphereSpec{Image: "debian12"}}
	p := NewPlan(cfg, model, nil)

	require.Equal(t, modelref.Key{Model: "debian12"}, p.Key)
	require.Equal(t, modelref.Template{Name: "debian12"}, p.Template)
	require.Equal(t, "template debian12", p.QuarantineKey)
	require.NoError(t, p.FlavorErr)
	require.Equal(t, "small", p.Flavor.Name)
	require.True(t, p.CloudInit())
	require.True(t, p.Instant())
	require.False(t, p.IsWindows())
	require.Equal(t, "alice", p.Model.Entry.Username)
	require.Equal(t, []string{"a"}, []string{p.Placements[0].Name})
	require.Empty(t, p.Placement, "no decision placed it")
	require.Equal(t, "/dc/vm/workers", p.Folder)
	require.Equal(t, 2, p.KeepFailedWorkers)

	cfg.GuestCredentials[0].Username = "bob"
	cfg.GuestCredentials[0].OS = config.OSWindows
	require.Equal(t, "alice", p.Model.Entry.Username, "the plan holds a copy of the entry")
	require.False(t, p.IsWindows())

	other := NewPlan(cfg, sdk.WorkerStarterWorkerModel{ModelV2: &sdk.V2WorkerModel{Name: "m"}, VSphereSpec: sdk.V2WorkerModelVSphereSpec{Image: "ubuntu"}}, nil)
	require.Nil(t, other.Model.Entry, "no entry names ubuntu")
	require.Equal(t, config.BootstrapGuestOps, other.Model.Bootstrap)
	require.Equal(t, config.OSLinux, other.Model.OS)
}

// TestPlanOfTheReservation: the plan travels with AllocateResources'
// reservation, its flavor a copy; anything else carries none.
func TestPlanOfTheReservation(t *testing.T) {
	t.Parallel()
	_, ok := PlanOf(nil)
	require.False(t, ok, "no reservation, no plan")

	f := &config.Flavor{Name: "small", CPUs: 2}
	res := &heldReservation{plan: Plan{Flavor: f, Placement: "a", Datastore: "ds-a"}}
	p, ok := PlanOf(res)
	require.True(t, ok)
	require.Equal(t, "a", p.Placement)
	require.Equal(t, "ds-a", p.Datastore)
	p.Flavor.CPUs = 64
	require.EqualValues(t, 2, f.CPUs, "the spawn gets a copy of the flavor")
	got, ok, err := ResolvedFlavor(res)
	require.True(t, ok)
	require.NoError(t, err)
	require.EqualValues(t, 2, got.CPUs)
}
