//go:build !race

package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/demo"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// TestRollingUpgradeWithDrain upgrades two instances of one hatchery name
// one after the other while jobs keep coming (docs/operations.md#drain):
// instance 1 is drained (Framework.Drain, what `ctl drain` calls) while it
// has a spawn in flight, stopped once drained, started again once instance
// 2 served a job meanwhile; then instance 2 is stopped while it has spawns
// in flight (its context ends, as on systemctl stop: the stop drains
// first, drainTimeout), and started again. Shows:
//
//   - the spawns in flight at each drain finish: no spawn of either
//     instance fails (without the drain the stop cuts them and releases
//     their jobs, counted as failed spawns);
//   - every job is Success with exactly one worker launched for it, no VM
//     got two launches;
//   - no job waits, from queued to its worker's launch, longer than
//     drainTimeout: the other instance serves the queue during a drain,
//     and serves jobs meanwhile;
//   - a drained instance stops within the shutdown bound; a stop with
//     spawns in flight drains them first, well within drainTimeout;
//   - in the end only the warm pool is left; nothing logs WARN or ERROR.
//
// Built without the race detector, as the other long tests of this
// package; the simulator runs its tasks one at a time
// (vcsimtest.Options.SerialTasks, see TestTwoInstancesOneStoppedHard).
func TestRollingUpgradeWithDrain(t *testing.T) {
	const (
		jobs         = 40
		every        = 500 * time.Millisecond // one job queued each
		runTime      = 300 * time.Millisecond
		drainTimeout = 30 // seconds
	)
	r := newRigWith(t, demo.SimsOptions{SerialTasks: true})
	cfg := r.sims.Config
	cfg.DrainTimeout = drainTimeout
	cfg.CommonConfiguration.Provision.MaxWorker = 10
	// Addresses for both instances' workers and pools: the demo's 14 run
	// out with two instances, and a spawn refused for want of an address
	// is not what this test looks at.
	cfg.IPRange = "10.0.0.64/26"
	require.NoError(t, cfg.Validate())
	r.requestTimeout = vcsimtest.TestRequestTimeout

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r.playWorkers(ctx, runTime)

	in := []*instance{r.startInstance(1), r.startInstance(2)}
	var runs []*instance // every run, for the counts
	runs = append(runs, in...)

	// Jobs keep coming all along the upgrade.
	var feed sync.WaitGroup
	feed.Add(1)
	go func() {
		defer feed.Done()
		tk := time.NewTicker(every) // the arrival rate, not a synchronisation
		defer tk.Stop()
		for range jobs {
			r.addJobs(1)
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
		}
	}()
	t.Cleanup(feed.Wait)

	// upgrade drains instance i (by Drain, or by the stop itself as
	// systemctl stop does: viaStop), stops it and starts it again.
	upgrade := func(i int, viaStop bool) {
		t.Helper()
		cur, other := in[i], in[1-i]
		inFlight := func() int { s, ok, f := cur.obs.counts(); return s - ok - f }
		waitSpawn := time.NewTimer(30 * time.Second)
		defer waitSpawn.Stop()
		tick := time.NewTicker(5 * time.Millisecond) // the observer has no signal for "n in flight"
		defer tick.Stop()
		for inFlight() == 0 {
			select {
			case <-waitSpawn.C:
				t.Fatalf("instance %d: no spawn in flight to drain within 30s", cur.n)
			case <-tick.C:
			}
		}
		_, otherOK0, _ := other.obs.counts()
		atDrain := inFlight()
		start := time.Now()
		if !viaStop {
			select {
			case <-cur.run.running.Framework.Drain("test"):
			case <-time.After(drainTimeout * time.Second):
				t.Fatalf("instance %d not drained within drainTimeout", cur.n)
			}
		}
		drainTook := time.Since(start)
		took, err := cur.run.stop(t, (drainTimeout+30)*time.Second)
		require.NoError(t, err, "instance %d's stop", cur.n)
		s, ok, f := cur.obs.counts()
		assert.Equal(t, s, ok+f, "instance %d: every spawn it started ended", cur.n)
		assert.Zero(t, cur.obs.cutSpawns(), "instance %d: a spawn cut by its stop", cur.n)
		if viaStop {
			assert.Less(t, took, drainTimeout*time.Second, "the stop's drain ends once nothing is in flight")
		} else {
			assert.Less(t, took, 20*time.Second, "a drained instance stops within the shutdown bound")
		}
		// While it is down (its binary replaced), the other instance
		// serves the queue: it launches a worker before the restart.
		require.Eventually(t, func() bool { _, ok, _ := other.obs.counts(); return ok > otherOK0 },
			drainTimeout*time.Second, 10*time.Millisecond, "instance %d serves the queue while instance %d is down", other.n, cur.n)
		next := r.startInstance(cur.n)
		runs = append(runs, next)
		in[i] = next
		_, otherOK1, _ := other.obs.counts()
		t.Logf("instance %d: drained in %s (%d spawns in flight at the drain), stopped in %s; meanwhile instance %d launched %d workers",
			cur.n, drainTook.Round(time.Millisecond), atDrain, took.Round(time.Millisecond), other.n, otherOK1-otherOK0)
	}
	upgrade(0, false) // ctl drain, then systemctl stop
	upgrade(1, true)  // systemctl stop alone: it drains first
	feed.Wait()

	r.mu.Lock()
	jobList := append([]rigJob(nil), r.jobs...)
	r.mu.Unlock()
	require.Len(t, jobList, jobs)
	require.Eventually(t, func() bool {
		for _, j := range jobList {
			if r.jobState(j).Status != "Success" {
				return false
			}
		}
		return true
	}, 3*time.Minute, 100*time.Millisecond, "every job Success")
	r.assertOnlyWarmPool(time.Minute, 100*time.Millisecond, "no VM of ours but the warm pool")
	for _, x := range in {
		_, err := x.run.stop(t, 40*time.Second)
		require.NoError(t, err)
	}
	for _, x := range runs {
		s, ok, f := x.obs.counts()
		t.Logf("instance %d run: %d spawns started, %d succeeded, %d failed", x.n, s, ok, f)
		assert.Zero(t, x.obs.cutSpawns(), "instance %d: spawns cut by a stop", x.n)
	}

	r.mu.Lock()
	var longest time.Duration
	for _, j := range jobList {
		assert.Len(t, r.launches[j.ID], 1, "job %s (v1 %v): workers launched %v", j.ID, j.V1, r.launches[j.ID])
		w := r.launchedAt[j.ID].Sub(r.queuedAt[j.ID])
		longest = max(longest, w)
		assert.Less(t, w, drainTimeout*time.Second, "job %s waited %s for its worker", j.ID, w)
	}
	for vm, n := range r.byVM {
		assert.Equal(t, 1, n, "launches in VM %s", vm)
	}
	r.mu.Unlock()
	t.Logf("longest wait from queued to worker launched: %s", longest.Round(time.Millisecond))

	logs := r.logs.String()
	assert.Equal(t, 1, strings.Count(logs, "spawns in flight finish\" instance=1 by=test"), "instance 1's drain")
	assert.Regexp(t, `spawns in flight finish" instance=2 by=stop in_flight=[1-9]`, logs, "instance 2's stop drained its spawns in flight")
	var warns []string
	for _, l := range strings.Split(logs, "\n") {
		if !strings.Contains(l, "level=WARN") && !strings.Contains(l, "level=ERROR") {
			continue
		}
		warns = append(warns, l)
	}
	assert.Empty(t, warns, "a rolling upgrade logs no WARN or ERROR")
}
