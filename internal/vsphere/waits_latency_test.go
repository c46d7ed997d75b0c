//go:build !race

// A timing test: built without the race detector, which slows the
// simulator's every request several times over; .ci/test runs it in its
// no-race step.

package vsphere_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/cds-contrib/hatchery-vsphere/internal/spawntiming"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
)

// TestLatencySuspendedClaimWaitsOnNotifications: in the latency model
// (vcsimtest.ApplyTaskDelays, LatencyOptions), with the daemon's
// production wait settings (vcenter.DefaultPollInterval, not the
// simulator's scaled poll), a claim from a suspended pool's task and guest
// waits end on the wait collector's notifications, not on polls. With the
// waits polling (before internal/vcenter's wait collector) the power-on
// stage alone took a whole poll interval beyond the model (about 1 s); a
// wait woken by a poll loses half an interval on average. So the median
// job's power-on and IP stages beyond the model stay under a quarter of
// the poll interval only when notifications end the waits. The figure
// itself (the < 0.1 s target of the latency model) is a benchmark's:
// `make bench-latency` prints it per spawn path (BenchmarkSpawnPaths,
// "hot claim (suspended) ... beyond"); as a bound here it failed once at
// 103 ms on a machine at load average 8, where the machine, not the
// waits, was slow. Not parallel: the latency model's task delays are
// process-wide.
func TestLatencySuspendedClaimWaitsOnNotifications(t *testing.T) {
	if testing.Short() {
		t.Skip("latency model: several seconds")
	}
	const jobs = 3
	r := runLatencyScenario(t, latencyScenario{name: "suspended claim, production waits", pool: "suspended", linked: true,
		jobs: jobs, tasks: 8, pollInterval: vcenter.DefaultPollInterval})
	beyond := make([]time.Duration, jobs)
	for _, s := range []spawntiming.Stage{spawntiming.StagePowerOn, spawntiming.StageIP} {
		for i, d := range r.stageOverhead[s] {
			beyond[i] += d
		}
	}
	// The median job: one job's scheduling hiccup on a loaded 2-core
	// machine (-race) is not the waits' doing; a poll would add about
	// 1 s to every job.
	median := pct(beyond, 0.5)
	t.Logf("power_on + ip beyond the model, per job: %v (median %v)", beyond, median)
	assert.Less(t, median, vcenter.DefaultPollInterval/4, "a suspended-pool claim waits on notifications, not on polls")
}
