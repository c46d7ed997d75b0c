package hatchery

import (
	"encoding/json"
	"testing"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A V2 job's model gets the commands Options.V2Commands gives for it (the
// model's spec decoded), DefaultV2Commands without the option; the default
// downloads the worker before starting it.
func TestV2CommandsAttachedToTheModel(t *testing.T) {
	t.Parallel()
	spec, err := json.Marshal(sdk.V2WorkerModelVSphereSpec{Image: "ubuntu24"})
	require.NoError(t, err)
	custom := V2Commands{PreCmd: "fetch", Cmd: "exec /usr/local/bin/worker", PostCmd: "poweroff"}
	for _, tt := range []struct {
		name   string
		option func(sdk.WorkerStarterWorkerModel) V2Commands
		want   V2Commands
	}{
		{"default", nil, DefaultV2Commands()},
		{"per model", func(m sdk.WorkerStarterWorkerModel) V2Commands {
			if m.GetVSphereImage() == "ubuntu24" {
				return custom
			}
			return DefaultV2Commands()
		}, custom},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig(t)
			cfg.API.Token = ""
			cfg.API.TokenV2 = "v2-secret-token-123456"
			hs := newHarness(t, cfg, func(o *Options) { o.V2Commands = tt.option })
			hs.c.v2jobs["run-a"] = &fakeV2Job{info: sdk.V2QueueJobInfo{
				RunJob: sdk.V2WorkflowRunJob{ID: "run-a", Status: "Waiting"},
				Model:  sdk.V2WorkerModel{Name: "ubuntu", Type: sdk.VSphere, OSArch: "linux/amd64", Spec: spec},
			}}
			hs.run()
			<-hs.h.spawned
			hs.h.get(func(h *fakeHatchery) {
				require.Len(t, h.spawns, 1)
				m := h.spawns[0].Model
				assert.Equal(t, tt.want, V2Commands{PreCmd: m.PreCmd, Cmd: m.Cmd, PostCmd: m.PostCmd})
			})
		})
	}
	assert.Contains(t, DefaultV2Commands().PreCmd, `"{{.API}}/download/worker/{{.OSArch}}"`)
	assert.Equal(t, "./worker", DefaultV2Commands().Cmd)
}
