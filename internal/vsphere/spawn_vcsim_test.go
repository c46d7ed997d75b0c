package vsphere_test

import (
	"strings"
	"testing"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vsphere"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVcsimSpawnWorkerV2(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	cfg := env.Config()
	cfg.CommonConfiguration.Name = "hatch-vcsim"
	cfg.IPRange, cfg.Gateway, cfg.SubnetMask, cfg.DNS = "192.168.77.10/24", "192.168.77.1", "255.255.255.0", "192.168.77.2"
	inv := env.Inventory(cfg)
	h, err := vsphere.New(vsphere.Options{Config: cfg, Client: env.Client, Inventory: inv})
	require.NoError(t, err)

	wc := spawn.WorkerConfig{Name: "worker-vcsim-1", HatcheryName: "hatch-vcsim", APIEndpoint: "http://api", APIToken: "jwt", RunJobID: "run-9", Model: "m"}
	args := spawn.Arguments{
		WorkerName: "worker-vcsim-1", JobID: "run-9", HatcheryName: "hatch-vcsim", WorkerConfig: wc,
		Model: sdk.WorkerStarterWorkerModel{
			ModelV2:     &sdk.V2WorkerModel{Name: "m", Type: sdk.VSphere},
			VSphereSpec: sdk.V2WorkerModelVSphereSpec{Image: vcsimtest.DefaultTemplate, Username: vcsimtest.DefaultGuestUser, Password: vcsimtest.DefaultGuestPassword},
			Cmd:         "./worker --name={{.Name}}",
		},
	}
	require.NoError(t, h.SpawnWorker(env.Context(), args))

	st := env.MustInspect("worker-vcsim-1")
	assert.False(t, st.Template)
	a, err := inventory.ParseAnnotation(st.ExtraConfig[inventory.AnnotationMirrorKey])
	require.NoError(t, err, "mirror carries the annotation (vcsim drops Notes on clone)")
	assert.Equal(t, "hatch-vcsim", a.HatcheryName)
	assert.Equal(t, "run-9", a.JobID)
	assert.Equal(t, "192.168.77.10", a.IPAddress)
	assert.NotNil(t, a.WorkerStarted)
	assert.Equal(t, "192.168.77.10", st.IPAddress, "customization fixed ip")

	calls := env.Guest.CallsFor("worker-vcsim-1")
	var launch *vcsimtest.GuestCall
	for i := range calls {
		if calls[i].ProgramPath == "/bin/echo" && calls[i].Fault == nil {
			launch = &calls[i]
		}
	}
	require.NotNil(t, launch, "worker launched through /bin/echo")
	assert.Equal(t, "-n ;./worker --name=worker-vcsim-1", launch.Arguments)
	require.Len(t, launch.EnvVariables, 1)
	enc, ok := strings.CutPrefix(launch.EnvVariables[0], "CDS_CONFIG=")
	require.True(t, ok)
	got, err := spawn.DecodeWorkerConfig(enc)
	require.NoError(t, err)
	assert.Equal(t, wc, got)

	env.WaitInventory(inv)
	started, err := h.WorkersStarted(env.Context())
	require.NoError(t, err)
	assert.Equal(t, []string{"worker-vcsim-1"}, started)
}
