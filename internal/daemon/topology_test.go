package daemon_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/cdssim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// TestAmbiguousDefaultPoolAtStart: on a datacenter with a cluster and a
// standalone host (the simulator's VPX model) and resourcePoolString left
// empty, the daemon checks the topology before serving jobs; the ambiguous
// pool is logged once as an ERROR naming resourcePoolString and the two
// candidates, /mon/status has one "vCenter topology" line in alert saying
// the same (503), no WARN is logged, and over many metrics passes (every
// 200 ms here) and inventory refreshes (every second) the pool is not
// looked up again: the simulator counts no new walk of the hosts and
// clusters (vcsimtest.Env.HostReads). Before, every metrics pass, every
// admission and every refresh looked it up again (~840 KB each at 1,000
// VMs) with a WARN every metrics pass, and nothing showed on /mon/status.
func TestAmbiguousDefaultPoolAtStart(t *testing.T) {
	t.Parallel()
	log, logs := testLogger(t)
	api, err := cdssim.New(cdssim.Options{HatcheryName: "hatchery-daemon-test"})
	require.NoError(t, err)
	t.Cleanup(api.Close)
	// The demo configuration's templates (its Windows model's too), so
	// that the pool is the only problem.
	vc := vcsimtest.Start(t, vcsimtest.Options{User: vcUser, Password: vcPassword,
		Templates: []vcsimtest.Template{{Name: "debian12"}, {Name: "debian12-cloud"},
			{Name: "win2022", GuestID: vcsimtest.WindowsGuestID}}})
	cfg := testConfig(t, vc.Endpoint, api)
	cfg.ResourcePoolString = ""
	run := startDaemon(t, cfg, log)

	hc := &http.Client{Timeout: 5 * time.Second}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, st := monStatus(t, hc, run.MonAddr)
		assert.Equal(c, http.StatusServiceUnavailable, code)
		l, ok := line(st, "vCenter topology")
		if assert.True(c, ok, "%+v", st.Lines) {
			assert.Equal(c, sdk.MonitoringStatusAlert, l.Status)
			assert.Contains(c, l.Value, "hatchery.vsphere.resourcePoolString: ")
			assert.Contains(c, l.Value, "/DC0/host/DC0_C0/Resources, /DC0/host/DC0_H0/Resources")
		}
		assert.Contains(c, logs.String(), `msg="vcenter topology checked" problems=1`)
	}, 15*time.Second, 50*time.Millisecond)
	walks := vc.HostReads()
	require.Positive(t, walks)
	soap := run.VCenter.Stats()

	// Many metrics passes and inventory refreshes later (signals: the
	// collector's debug line and the inventory's refresh counter).
	refreshes := run.Inventory.Stats().Refreshes
	passes := strings.Count(logs.String(), `msg="metrics collected"`)
	require.Eventually(t, func() bool {
		return strings.Count(logs.String(), `msg="metrics collected"`) >= passes+10 && run.Inventory.Stats().Refreshes >= refreshes+3
	}, 30*time.Second, 20*time.Millisecond)
	assert.Equal(t, walks, vc.HostReads(), "the pool is not looked up again before its retry")
	t.Logf("SOAP over %d metrics passes and %d refreshes: %+v", 10, 3, run.VCenter.Stats().Sub(soap).Total())

	out := logs.String()
	var errorLines []string
	for _, l := range strings.Split(out, "\n") {
		assert.NotContains(t, l, "level=WARN")
		if strings.Contains(l, "level=ERROR") {
			errorLines = append(errorLines, l)
		}
	}
	require.Len(t, errorLines, 1, "one ERROR line: %q", errorLines)
	assert.Contains(t, errorLines[0], "setting=resourcePoolString")
	assert.Contains(t, errorLines[0], "/DC0/host/DC0_C0/Resources, /DC0/host/DC0_H0/Resources")
	assert.NotContains(t, out, vcPassword)
}
