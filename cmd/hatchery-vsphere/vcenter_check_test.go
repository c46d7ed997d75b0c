package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcheck"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// TestVCenterCheck: `vcenter check --config FILE` against the project's
// simulator passes every line and exits 0, in text and in JSON; an
// unknown template is one failed line and exit 1; neither the vCenter
// nor the guest password ever shows.
func TestVCenterCheck(t *testing.T) {
	t.Parallel()
	vc := vcsimtest.Start(t, vcsimtest.Options{Password: plantedPassword})
	env := secretsEnv()
	const guestPassword = "guest-Pa55-planted"
	vc.Guest.SetCredentials("root", guestPassword)
	model := func(template string) string {
		return `
[[hatchery.vsphere.guestCredentials]]
  modelVMWare = "` + template + `"
  username = "root"
  password = "` + guestPassword + `"
`
	}

	t.Run("ok", func(t *testing.T) {
		path := onlineConfig(t, vc, vc.ResourcePool, model(vcsimtest.DefaultTemplate))
		r := runCmd(t, env, nil, "vcenter", "check", "--config", path)
		t.Logf("vcenter check:\n%s%s", r.stdout, r.stderr)
		require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
		assert.Contains(t, r.stdout, "vcenter check OK")
		assert.Contains(t, r.stdout, "PASS        guest program")
		assert.NotContains(t, r.stdout+r.stderr, plantedPassword)
		assert.NotContains(t, r.stdout+r.stderr, guestPassword)

		r = runCmd(t, env, nil, "vcenter", "check", "--config", path, "--json")
		require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
		var rep vcheck.Report
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
		require.NotEmpty(t, rep.Results)
		for _, x := range rep.Results {
			assert.Equal(t, vcheck.Pass, x.Status, "%s %s", x.Capability, x.Object)
		}
		assert.NotContains(t, r.stdout+r.stderr, plantedPassword)
		assert.NotContains(t, r.stdout+r.stderr, guestPassword)
	})

	t.Run("unknown template", func(t *testing.T) {
		path := onlineConfig(t, vc, vc.ResourcePool, model("no-such-template"))
		r := runCmd(t, env, nil, "vcenter", "check", "--config", path)
		t.Logf("vcenter check:\n%s%s", r.stdout, r.stderr)
		require.Equal(t, exitFail, r.code)
		assert.Contains(t, r.stdout, "FAIL        topology")
		assert.Contains(t, r.stdout, `no template "no-such-template"`)
		assert.NotContains(t, r.stdout, "scratch folder")
	})

	t.Run("usage", func(t *testing.T) {
		r := runCmd(t, env, nil, "vcenter", "check")
		assert.Equal(t, exitUsage, r.code)
		assert.Contains(t, r.stderr, "--config FILE is required")
		r = runCmd(t, env, nil, "vcenter", "--help")
		assert.Equal(t, exitOK, r.code)
		assert.Contains(t, r.stdout, "vcenter check --config FILE")
	})
}
