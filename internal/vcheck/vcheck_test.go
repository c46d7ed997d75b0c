package vcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/latencyfile"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// envConfig is a configuration of env: its default template as a V2
// model started by guest operations with the simulator's guest account,
// cloned by instant clone when instant.
func envConfig(env *vcsimtest.Env, instant bool) *config.Config {
	cfg := env.Config()
	e := config.GuestCredential{ModelVMWare: vcsimtest.DefaultTemplate, Username: vcsimtest.DefaultGuestUser, Password: vcsimtest.DefaultGuestPassword}
	if instant {
		e.CloneMode = config.CloneModeInstant
	}
	cfg.Models = []config.GuestCredential{e}
	// The fake guest fetches nothing: any URL stands for the API's.
	cfg.CommonConfiguration.API.HTTP.URL = "http://127.0.0.1:8081"
	return cfg
}

// envDialer dials env with its client configuration.
func envDialer(env *vcsimtest.Env) Dialer {
	return func(ctx context.Context) (*vcenter.Client, error) {
		return vcenter.Dial(ctx, env.ClientConfig())
	}
}

// byCapability indexes rep's results by "capability object".
func statuses(rep *Report) map[string]Status {
	out := map[string]Status{}
	for _, r := range rep.Results {
		out[r.Capability] = r.Status
	}
	return out
}

// text renders rep as the command prints it.
func text(rep *Report) string {
	var b bytes.Buffer
	rep.WriteText(&b)
	return b.String()
}

// scratchLeft lists the check's folders and VMs still in env.
func scratchLeft(t *testing.T, env *vcsimtest.Env) []string {
	t.Helper()
	var left []string
	for _, vm := range env.VMs() {
		if strings.HasPrefix(vm.Name, FolderPrefix) {
			left = append(left, vm.Name)
		}
	}
	fs, err := env.Client.ScratchFolders(context.Background(), FolderPrefix)
	require.NoError(t, err)
	for _, f := range fs {
		left = append(left, f.Name)
	}
	locks, err := env.Client.ListLocks(context.Background(), FolderPrefix)
	require.NoError(t, err)
	for n := range locks {
		left = append(left, "lock "+n)
	}
	return left
}

// TestEveryCapabilityPassesOnTheExtendedSimulator: on the project's
// simulator (its guest, readiness, changeVersion check and instant clone:
// internal/vcsimtest) every capability of a guestops model with instant
// clones passes, nothing fails, and nothing is left behind.
func TestEveryCapabilityPassesOnTheExtendedSimulator(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	latency := filepath.Join(t.TempDir(), "latency.toml")
	rep := Run(context.Background(), envConfig(env, true), envDialer(env), Options{RunID: "r1", NotifyTimeout: time.Minute, LatencyModel: latency})
	t.Logf("report:\n%s", text(rep))
	for _, r := range rep.Results {
		assert.Equal(t, Pass, r.Status, "%s %s: %s", r.Capability, r.Object, r.Detail)
	}
	got := statuses(rep)
	for _, c := range []string{"session", "clean-up of earlier runs", "topology", "scratch folder", "unique-name lock", "datastore space", "clone",
		"guestinfo at clone", "reconfigure", "change notification", "changeVersion swap", "power on", "guest ready", "customization", "guest program", "guestinfo in guest", "api from guest",
		"instant clone", "suspend", "resume", "power off", "clean-up", "latency model"} {
		assert.Equal(t, Pass, got[c], c)
	}
	assert.False(t, rep.Failed())
	assert.Empty(t, scratchLeft(t, env))
	measured, err := latencyfile.Read(latency)
	require.NoError(t, err)
	for _, op := range []string{latencyfile.OpFullClone, latencyfile.OpPowerOn, latencyfile.OpGuestReady, latencyfile.OpReconfigure,
		latencyfile.OpResume, latencyfile.OpInstantCloneTask, latencyfile.OpInstantReidentify} {
		assert.Positive(t, measured[op], "%s measured", op)
	}
	assert.NotContains(t, measured, latencyfile.OpLinkedClone, "the template has no snapshot: no linked clone was made")
	assert.NotContains(t, text(rep), vcsimtest.DefaultPassword)
	assert.NotContains(t, text(rep), vcsimtest.DefaultGuestPassword)
	var b bytes.Buffer
	require.NoError(t, rep.WriteJSON(&b))
	var back Report
	require.NoError(t, json.Unmarshal(b.Bytes(), &back))
	assert.Len(t, back.Results, len(rep.Results))
	assert.NotContains(t, b.String(), vcsimtest.DefaultPassword)
	assert.NotContains(t, b.String(), vcsimtest.DefaultGuestPassword)
}

// TestPlainSimulatorIsUnsupportedNeverPass: govmomi's simulator without
// the project's extensions has no guest (no VMware Tools), no instant
// clone and no changeVersion check: the check learns it by trying and
// says unsupported, never pass; the run fails (the configuration needs
// them) and leaves nothing behind. Not parallel: the plain simulator is
// created beside the Envs of the parallel tests.
func TestPlainSimulatorIsUnsupportedNeverPass(t *testing.T) {
	p := vcsimtest.StartPlain(t)
	cfg := p.Config()
	cfg.Models = []config.GuestCredential{{ModelVMWare: vcsimtest.PlainTemplate, Username: "root", Password: "guest-pw", CloneMode: config.CloneModeInstant}}
	cfg.WorkerProvisioning = []config.WorkerProvisioning{{ModelVMWare: vcsimtest.PlainTemplate, Number: 1}}
	dial := func(ctx context.Context) (*vcenter.Client, error) {
		return vcenter.Dial(ctx, vcenter.Config{Endpoint: p.Endpoint, User: p.User, Password: p.Password, Insecure: true,
			Datacenter: vcsimtest.DatacenterName, ResourcePool: vcsimtest.ResourcePoolPath, Folder: vcsimtest.FolderPath,
			RequestTimeout: vcsimtest.TestRequestTimeout})
	}
	rep := Run(context.Background(), cfg, dial, Options{RunID: "plain"})
	t.Logf("report:\n%s", text(rep))
	got := statuses(rep)
	assert.Equal(t, Unsupported, got["guest ready"])
	assert.Equal(t, Unsupported, got["guest program"])
	assert.Equal(t, Unsupported, got["customization"], "no Tools: no customization, no address reported")
	assert.Equal(t, Unsupported, got["instant clone"])
	assert.Equal(t, Unsupported, got["changeVersion swap"])
	assert.Equal(t, Pass, got["clone"])
	assert.Equal(t, Pass, got["clean-up"])
	assert.True(t, rep.Failed())
}
