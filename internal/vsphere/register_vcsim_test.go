package vsphere_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vsphere"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// viWaitLaunch blocks until the fake guest recorded a successful /bin/echo
// in vm (no polling: FakeGuest.WaitForCalls).
func viWaitLaunch(t *testing.T, ctx context.Context, env *vcsimtest.Env, vm string) vcsimtest.GuestCall {
	t.Helper()
	n := 1
	for {
		calls, err := env.Guest.WaitForCalls(ctx, n)
		require.NoError(t, err, "waiting for the launch in %q", vm)
		for _, c := range calls {
			if c.VM == vm && c.ProgramPath == "/bin/echo" && c.Fault == nil {
				return c
			}
		}
		n = len(calls) + 1
	}
}

// TestVcsimRegisterV1ModelThenSpawn: a V1 model is registered as
// a template of ours (its base image cloned as "<model>-tmp", the worker run
// in register mode with PostCmd, the VM shut down — by the test, standing
// in for the guest's PostCmd — renamed to the model and marked as a
// template with Model=true), then a V1 job is cloned from that template.
// A foreign VM and another hatchery's VM are untouched throughout.
func TestVcsimRegisterV1ModelThenSpawn(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx, cancel := context.WithTimeout(env.Context(), 30*time.Second)
	defer cancel()
	const hatch = "hatch-vi-v1"

	strangers := viStrangers(t, env, "192.168.78.10")
	before := map[string]viSnapshot{}
	for _, n := range strangers {
		before[n] = viSnap(t, env, n)
	}

	client := &viRecordingClient{Port: env.Client}
	cfg := env.Config()
	cfg.CommonConfiguration.Name = hatch
	cfg.IPRange, cfg.Gateway, cfg.SubnetMask, cfg.DNS = "192.168.78.10/24", "192.168.78.1", "255.255.255.0", "192.168.78.2"
	h, err := vsphere.New(vsphere.Options{Config: cfg, Client: client})
	require.NoError(t, err)

	model := &sdk.Model{
		Name: "vi-model", Type: sdk.VSphere, Group: &sdk.Group{Name: "shared.infra"},
		UserLastModified: time.Unix(1700000000, 0),
		ModelVirtualMachine: sdk.ModelVirtualMachine{
			Image: vcsimtest.DefaultTemplate, Cmd: "./worker", PostCmd: "sudo shutdown -h now",
			User: vcsimtest.DefaultGuestUser, Password: vcsimtest.DefaultGuestPassword,
		},
	}
	starter := sdk.WorkerStarterWorkerModel{ModelV1: model}
	require.True(t, h.NeedRegistration(ctx, model), "no template yet")

	// Registration. Nothing shuts the simulated guest down after PostCmd:
	// the test powers the tmp VM off once the register script was launched.
	regCfg := spawn.WorkerConfig{Name: "register-vi-model-1", HatcheryName: hatch, APIEndpoint: "http://api", APIToken: "jwt", Model: model.Path()}
	regArgs := spawn.Arguments{WorkerName: "register-vi-model-1", HatcheryName: hatch, Model: starter, RegisterOnly: true, WorkerConfig: regCfg}
	done := make(chan error, 1)
	go func() { done <- h.SpawnWorker(ctx, regArgs) }()
	launch := viWaitLaunch(t, ctx, env, "vi-model-tmp")
	tmp := env.MustInspect("vi-model-tmp")
	assert.Equal(t, types.VirtualMachinePowerStatePoweredOn, tmp.PowerState)
	require.NoError(t, env.Client.ShutdownVirtualMachine(ctx, vim.RefOf(tmp.Ref)))
	select {
	case err := <-done:
		require.NoError(t, err, "registration")
	case <-ctx.Done():
		t.Fatal("registration did not finish after the tmp vm powered off")
	}

	assert.Equal(t, "-n ;./worker register\nsudo shutdown -h now", launch.Arguments)
	assert.Equal(t, regCfg, viDecodeConfig(t, launch))
	regClone := client.clone(t, "vi-model-tmp")
	assert.Equal(t, env.MustInspect(vcsimtest.DefaultTemplate).Ref, regClone.Source, "tmp vm cloned from the model's image")

	_, tmpLeft := env.Inspect("vi-model-tmp")
	assert.False(t, tmpLeft, "the tmp vm became the template")
	tpl := env.MustInspect("vi-model")
	assert.Equal(t, tmp.Ref, tpl.Ref, "the registered vm itself is the template")
	assert.True(t, tpl.Template)
	assert.Equal(t, types.VirtualMachinePowerStatePoweredOff, tpl.PowerState)
	for _, raw := range []string{tpl.Annotation, tpl.ExtraConfig[inventory.AnnotationMirrorKey]} {
		a, err := inventory.ParseAnnotation(raw)
		require.NoError(t, err, "template annotation %q", raw)
		assert.Equal(t, hatch, a.HatcheryName)
		assert.True(t, a.Model, "Model=true")
		assert.False(t, a.RegisterOnly)
		assert.Equal(t, "shared.infra/vi-model", a.WorkerModelPath)
		assert.Equal(t, "1700000000", a.WorkerModelLastModified)
		assert.Empty(t, a.IPAddress, "a template holds no ip")
		assert.Empty(t, a.JobID)
	}
	assert.False(t, h.NeedRegistration(ctx, model), "registered template is current")

	// A V1 job on the registered model.
	wc := spawn.WorkerConfig{Name: "vi-worker-v1", HatcheryName: hatch, APIEndpoint: "http://api", APIToken: "jwt", BookedJobID: 42, Model: model.Path()}
	args := spawn.Arguments{WorkerName: "vi-worker-v1", JobID: "42", HatcheryName: hatch, Model: starter, WorkerConfig: wc}
	require.NoError(t, h.SpawnWorker(ctx, args))

	rec := client.clone(t, "vi-worker-v1")
	assert.Equal(t, tpl.Ref, rec.Source, "v1 worker cloned from the model's template")
	st := env.MustInspect("vi-worker-v1")
	assert.False(t, st.Template)
	assert.Equal(t, types.VirtualMachinePowerStatePoweredOn, st.PowerState)
	a, err := inventory.ParseAnnotation(st.Annotation)
	require.NoError(t, err, "Notes of the worker")
	assert.Equal(t, hatch, a.HatcheryName)
	assert.Equal(t, "42", a.JobID)
	assert.Equal(t, "shared.infra/vi-model", a.WorkerModelPath)
	assert.False(t, a.Model)
	assert.NotNil(t, a.WorkerStarted)
	ip, err := netip.ParseAddr(a.IPAddress)
	require.NoError(t, err)
	assert.True(t, netip.MustParsePrefix("192.168.78.0/24").Contains(ip))
	assert.NotEqual(t, "192.168.78.10", a.IPAddress, "held by another hatchery's vm")
	assert.Contains(t, st.GuestNetIPs, a.IPAddress)
	wl := viLaunch(t, env, "vi-worker-v1")
	assert.Equal(t, "-n ;./worker\nsudo shutdown -h now", wl.Arguments)
	assert.Equal(t, wc, viDecodeConfig(t, wl))

	// The template is still there, still ours, still a template.
	after := env.MustInspect("vi-model")
	assert.True(t, after.Template)
	assert.Equal(t, tpl.Annotation, after.Annotation)

	for _, n := range strangers {
		assert.Equal(t, before[n], viSnap(t, env, n), "vm %q untouched", n)
		assert.Empty(t, env.Guest.CallsFor(n), "no guest operation in %q", n)
	}
}
