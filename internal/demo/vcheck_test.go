package demo

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/daemon"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcheck"
)

// TestVCenterCheckPassesOnTheDemoSimulators: `vcenter check` with the
// demo's configuration (its templates: guest operations, cloud-init,
// Windows, instant clones; its two placements; its warm pools and static
// IPs) against the demo's simulators passes every line and leaves
// nothing behind.
func TestVCenterCheckPassesOnTheDemoSimulators(t *testing.T) {
	t.Parallel()
	sims, err := StartSims("", nil, SimsOptions{})
	require.NoError(t, err)
	t.Cleanup(sims.Close)
	dial := func(ctx context.Context) (*vcenter.Client, error) {
		cc := daemon.VCenterConfig(sims.Config)
		DaemonOptions(sims.Config, nil).VCenterConfig(&cc)
		return vcenter.Dial(ctx, cc)
	}
	rep := vcheck.Run(context.Background(), sims.Config, dial, vcheck.Options{RunID: "demo", GuestReadyTimeout: time.Minute})
	var out bytes.Buffer
	rep.WriteText(&out)
	t.Logf("report:\n%s", out.String())
	for _, r := range rep.Results {
		assert.Equal(t, vcheck.Pass, r.Status, "%s %s: %s", r.Capability, r.Object, r.Detail)
	}
	assert.False(t, rep.Failed())
	assert.NotContains(t, out.String(), sims.Config.Password)
	for _, vm := range sims.Env.VMs() {
		assert.NotContains(t, vm.Name, vcheck.FolderPrefix, "left behind")
	}
}
