//go:build !race

package e2e

import (
	"context"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// vcenterLines are the daemon's log lines about its vCenter connection and
// session at INFO or above, after the first `from` bytes of the logs.
func (r *rig) vcenterLines(from int) []string {
	var out []string
	re := regexp.MustCompile(`level=(INFO|WARN|ERROR) msg="?(vcenter|vm change watch|vm inventory|inventory)`)
	for _, l := range strings.Split(r.logs.String()[from:], "\n") {
		if re.MatchString(l) {
			out = append(out, l)
		}
	}
	return out
}

// burst queues jobs and returns once some of their spawns are in flight
// and some workers already run, with the counter watching the daemon.
func (r *rig) burst(obs *spawnCounter, jobs int) {
	r.t.Helper()
	r.addJobs(jobs)
	select {
	case <-obs.reached:
	case <-time.After(90 * time.Second):
		r.t.Fatal("never 4 spawns in flight at once after 2 succeeded")
	}
}

// assertBurstServed waits for every job to be Success and checks: one
// worker launched per job (none run twice), one launch per VM, no job
// failed or given up on, and only the warm pool left once the cleanup
// passed (nothing leaked).
func (r *rig) assertBurstServed() {
	r.t.Helper()
	require.Eventually(r.t, func() bool {
		for _, j := range r.jobs {
			if r.jobState(j).Status != sdk.StatusSuccess {
				return false
			}
		}
		return true
	}, 3*time.Minute, 100*time.Millisecond, "every job Success after vCenter came back")
	r.assertOnlyWarmPool(time.Minute, 100*time.Millisecond, "no VM of ours but the warm pool after the cleanup")
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, j := range r.jobs {
		assert.Len(r.t, r.launches[j.ID], 1, "job %s (v1 %v): workers launched %v", j.ID, j.V1, r.launches[j.ID])
		assert.False(r.t, r.jobState(j).Failed, "job %s failed", j.ID)
	}
	for vm, n := range r.byVM {
		assert.Equal(r.t, 1, n, "launches in VM %s", vm)
	}
	assert.NotContains(r.t, r.logs.String(), "giving up on")
}

// TestVCenterRestartMidBurst: vCenter restarts while a burst of 20 jobs
// has spawns in flight and workers running. The restart, in test code
// (the simulator has none): a proxy between the daemon and the simulator
// closes every connection and refuses new ones (vCenter down), every
// session is ended with its property collectors and filters
// (vcsimtest.Env.RestartSessions), the VMs stay; the proxy lets
// connections through again (vCenter back) once the daemon's inventory
// went stale (its passes met no vCenter several times). Then:
//
//   - every job is Success, with one worker launched for it (none lost,
//     none run twice), no VM launched twice, no job failed;
//   - once the cleanup passed only the warm pool is left (nothing leaked);
//   - the daemon logs one line about vCenter when it is lost and one when
//     it is back, at INFO or above, whatever the number of calls, waits,
//     collectors and passes the restart cut (a WARN, then an INFO saying
//     session=renewed: it logged in again);
//   - above INFO, besides that WARN, only the decisions about the spawns
//     the restart cut and at most one failed worker pool refresh.
func TestVCenterRestartMidBurst(t *testing.T) {
	const jobs = 20
	r := newRig(t)
	cfg := r.sims.Config
	cfg.CommonConfiguration.Provision.MaxWorker = 12
	cfg.CommonConfiguration.Provision.MaxConcurrentProvisioning = 8
	oneSimulatorTask(cfg)
	proxy := testutil.StartProxy(t, r.sims.Env.URL.Host)
	ep, err := url.Parse(cfg.Endpoint)
	require.NoError(t, err)
	ep.Host = proxy.Addr()
	cfg.Endpoint = ep.String()
	require.NoError(t, cfg.Validate())

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r.playWorkers(ctx, 300*time.Millisecond)
	obs := newSpawnCounter(4, 2)
	r.start(obs)
	r.burst(obs, jobs)

	from := len(r.logs.String())
	proxy.Pause() // vCenter down: every connection closed, new ones refused
	n, err := r.sims.Env.RestartSessions(ctx)
	require.NoError(t, err)
	require.Positive(t, n, "the daemon's session was ended")
	// Down until the daemon saw it: a call of it found no vCenter.
	require.Eventually(t, func() bool { return strings.Contains(r.logs.String()[from:], "vcenter unreachable") },
		time.Minute, 20*time.Millisecond, "the daemon never noticed vCenter down")
	// Down until the daemon's inventory is stale (four refresh intervals
	// with no answer): by then its refreshes, cleanup and metrics passes
	// and spawns have met no vCenter several times each, so that a line
	// per pass or attempt would show.
	require.Eventually(t, func() bool { return strings.Contains(r.logs.String()[from:], "vm inventory is stale") },
		2*time.Minute, 20*time.Millisecond, "the daemon's inventory never went stale")
	proxy.Resume() // vCenter back, with none of the sessions it had

	r.assertBurstServed()
	lines := r.vcenterLines(from)
	t.Logf("vcenter lines after the restart:\n%s", strings.Join(lines, "\n"))
	started, ok, failed := obs.counts()
	t.Logf("spawns: %d started, %d succeeded, %d failed; %d sessions ended", started, ok, failed, n)
	// Above INFO, besides the outage's own line, only the decisions about
	// the spawns the outage cut (one line each) and one refresh of the
	// worker pool that failed on the stale inventory: no line per pass.
	decisions := regexp.MustCompile(`msg="(spawn failed|spawn failed, releasing job|clone failed|power off failed vm|record worker start failed)"`)
	poolFailed := 0
	for _, l := range strings.Split(r.logs.String()[from:], "\n") {
		if !strings.Contains(l, "level=WARN") && !strings.Contains(l, "level=ERROR") {
			continue
		}
		switch {
		case strings.Contains(l, `msg="vcenter unreachable"`), decisions.MatchString(l):
		case strings.Contains(l, `msg="refresh worker pool failed"`):
			poolFailed++
		default:
			t.Errorf("a line above INFO beyond the outage's and the cut spawns' own: %s", l)
		}
	}
	assert.LessOrEqual(t, poolFailed, 1, "refresh worker pool failed: once for the outage")
	assert.Len(t, lines, 2, "one line when vCenter is lost, one when it is back")
	if len(lines) == 2 {
		assert.Contains(t, lines[0], "level=WARN")
		assert.Contains(t, lines[1], "level=INFO")
		assert.Contains(t, lines[1], "session=renewed", "the daemon logged in again")
	}
}

// TestVCenterSessionExpiresMidBurst: the daemon's vCenter session expires
// while a burst of 20 jobs has spawns in flight and workers running
// (vcsimtest.Env.EndSession: the session and its property collectors and
// filters gone, as vCenter's session timeout ends it; the simulator has
// no timeout for a session in use). vCenter answers throughout. Then
// every job is Success with one worker (none lost, none run twice), only
// the warm pool is left, and the daemon logs one line at INFO or above:
// it logged in again.
func TestVCenterSessionExpiresMidBurst(t *testing.T) {
	const jobs = 20
	r := newRig(t)
	cfg := r.sims.Config
	cfg.CommonConfiguration.Provision.MaxWorker = 12
	cfg.CommonConfiguration.Provision.MaxConcurrentProvisioning = 8
	oneSimulatorTask(cfg)
	require.NoError(t, cfg.Validate())

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r.playWorkers(ctx, 300*time.Millisecond)
	// The sessions before the daemon's (the simulators' own clients).
	before, err := r.sims.Env.Sessions(ctx)
	require.NoError(t, err)

	obs := newSpawnCounter(4, 2)
	r.start(obs)
	r.burst(obs, jobs)

	now, err := r.sims.Env.Sessions(ctx)
	require.NoError(t, err)
	var daemon []string
	for _, k := range now {
		if !slices.Contains(before, k) {
			daemon = append(daemon, k)
		}
	}
	require.Len(t, daemon, 1, "the daemon's one session")
	from := len(r.logs.String())
	require.NoError(t, r.sims.Env.EndSession(ctx, daemon[0]))

	r.assertBurstServed()
	lines := r.vcenterLines(from)
	t.Logf("vcenter lines after the expiry:\n%s", strings.Join(lines, "\n"))
	started, ok, failed := obs.counts()
	t.Logf("spawns: %d started, %d succeeded, %d failed", started, ok, failed)
	require.Len(t, lines, 1, "one line: the daemon logged in again")
	assert.Contains(t, lines[0], `level=INFO msg="vcenter session ended by vcenter: logged in again"`)
	assert.Zero(t, failed, "no spawn failed: the calls the expiry met were retried in the new session")
}
