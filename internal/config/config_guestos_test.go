package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
)

// TestOSOf: a model's OS is its entry's os, linux without one; the clone
// specification's lookup by record finds the same entry for a V1 model
// path and a V2 template.
func TestOSOf(t *testing.T) {
	t.Parallel()
	c := validConfig()
	c.GuestCredentials = []GuestCredential{{ModelVMWare: "win2022", Username: "Administrator", OS: OSWindows}, {ModelVMWare: "debian12", Username: "u"}}
	c.Models = []GuestCredential{{ModelPath: "shared.infra/win-v1", Username: "Administrator", OS: OSWindows}}
	v2 := func(img string) sdk.WorkerStarterWorkerModel {
		return sdk.WorkerStarterWorkerModel{ModelV2: &sdk.V2WorkerModel{Name: img}, VSphereSpec: sdk.V2WorkerModelVSphereSpec{Image: img}}
	}
	assert.Equal(t, OSWindows, c.OSOf(v2("win2022")))
	assert.True(t, c.IsWindows(v2("win2022")))
	assert.Equal(t, OSLinux, c.OSOf(v2("debian12")), "an entry without os")
	assert.Equal(t, OSLinux, c.OSOf(v2("rocky")), "no entry")
	v1 := sdk.WorkerStarterWorkerModel{ModelV1: &sdk.Model{Name: "win-v1", Group: &sdk.Group{Name: "shared.infra"}}}
	assert.True(t, c.IsWindows(v1), "a models (alias) entry of a V1 model")
	assert.Equal(t, OSWindows, c.OSOfRecord("", "win2022"))
	assert.Equal(t, OSWindows, c.OSOfRecord("shared.infra/win-v1", ""))
	assert.Equal(t, OSLinux, c.OSOfRecord("", "debian12"))
	assert.Equal(t, OSLinux, c.OSOfRecord("", "unknown"))
	require.NoError(t, c.Validate())
}

// TestValidateOS: an unknown os is refused with its key path; the
// readiness keys are range-checked durations.
func TestValidateOS(t *testing.T) {
	t.Parallel()
	c := validConfig()
	c.GuestCredentials = []GuestCredential{{ModelVMWare: "win2022", Username: "Administrator", OS: "win"}}
	c.Models = []GuestCredential{{ModelVMWare: "mac", Username: "u", OS: "macos"}}
	c.WindowsIPTimeout = 0
	p := problems(t, c)
	assert.Contains(t, p[KeyPrefix+".guestCredentials[0].os"], `"win" is not an os`)
	assert.Contains(t, p[KeyPrefix+".models[0].os"], `"macos" is not an os`)
	assert.Contains(t, p[KeyPrefix+".windowsIPTimeout"], "out of range")
}

// TestWindowsDefaults: an old configuration (no Windows key) gets the
// documented readiness bounds; a Windows V2 model without commands of its
// own gets the PowerShell defaults downloading windows/amd64, a Linux one
// the hatchery-wide ones.
func TestWindowsDefaults(t *testing.T) {
	t.Parallel()
	c := validConfig()
	r := c.WindowsReadinessTimeouts()
	assert.Equal(t, 15*time.Minute, r.GuestOps)
	assert.Equal(t, 10*time.Minute, r.IP)
	assert.Equal(t, 3*time.Minute, r.Env)
	c.WindowsGuestOpsTimeout = 0 // unvalidated: the default, not zero
	assert.Equal(t, 15*time.Minute, c.WindowsReadinessTimeouts().GuestOps)

	c.GuestCredentials = []GuestCredential{{ModelVMWare: "win2022", Username: "Administrator", OS: OSWindows}}
	win := sdk.WorkerStarterWorkerModel{ModelV2: &sdk.V2WorkerModel{Name: "w"}, VSphereSpec: sdk.V2WorkerModelVSphereSpec{Image: "win2022"}}
	lin := sdk.WorkerStarterWorkerModel{ModelV2: &sdk.V2WorkerModel{Name: "l"}, VSphereSpec: sdk.V2WorkerModelVSphereSpec{Image: "debian12"}}
	wc := c.V2CommandsOf(win)
	assert.Equal(t, WindowsV2Commands(), wc)
	assert.Contains(t, wc.PreCmd, "/download/worker/windows/amd64")
	assert.Contains(t, wc.PreCmd, "worker.exe")
	assert.Equal(t, hatchery.DefaultV2Commands(), c.V2CommandsOf(lin))
	c.GuestCredentials[0].V2Cmd = `& C:\cds\worker.exe`
	assert.Equal(t, `& C:\cds\worker.exe`, c.V2CommandsOf(win).Cmd, "an entry's own commands win")
}
