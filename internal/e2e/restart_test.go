//go:build !race

package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/demo"
)

// TestRestartDuringSpawnBurst stops the daemon (its context ends, as on
// SIGTERM) while a burst of 20 queued jobs has about half of its spawns in
// flight, then starts it again on the same vCenter and CDS API simulators:
//
//   - the first Run returns within 30 s, without error;
//   - right after it, no job is held (booked V1 / taken V2) by the hatchery
//     without a worker launched for it: the jobs booked at shutdown were
//     released;
//   - the second run takes the released jobs again; in the end every job
//     is Success with exactly one worker launched for it over both runs
//     (no duplicate worker), no VM ever got two launches, no two live VMs
//     ever recorded the same job (sampled all along: no double claim);
//   - after the second run's cleanup passes, no VM of ours is left but the
//     warm pool, at its size and powered off (no leak).
func TestRestartDuringSpawnBurst(t *testing.T) {
	const jobs = 20
	r := newRig(t)
	cfg := r.sims.Config
	// Room for half the burst at once.
	cfg.CommonConfiguration.Provision.MaxWorker = 12
	cfg.CommonConfiguration.Provision.MaxConcurrentProvisioning = 10
	oneSimulatorTask(cfg)
	require.NoError(t, cfg.Validate())

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r.playWorkers(ctx, 300*time.Millisecond)

	// Sample the simulator all along: two live VMs recording one job.
	var (
		mu      sync.Mutex
		claims  []string
		samples int
	)
	r.sampleAlong(50*time.Millisecond, func() {
		_, workers := r.ourVMs()
		c := demo.JobClaims(workers, r.sims.Config.CommonConfiguration.Name)
		mu.Lock()
		claims = append(claims, c...)
		samples++
		mu.Unlock()
	})

	// Run 1: the burst; stop when 5 spawns are in flight at once after at
	// least 3 succeeded (workers running, jobs building).
	obs1 := newSpawnCounter(5, 3)
	run1 := r.start(obs1)
	r.addJobs(jobs)
	select {
	case <-obs1.reached:
	case <-time.After(60 * time.Second):
		t.Fatal("never 5 spawns in flight at once after 3 succeeded")
	}
	// ... and at least 2 of the spawns in flight have their VM in vCenter,
	// no worker launched yet (cloned or claimed, booting): the shutdown
	// cuts them there.
	booting := func() int {
		_, workers := r.ourVMs()
		r.mu.Lock()
		defer r.mu.Unlock()
		n := 0
		for _, v := range workers {
			if v.Annotation.JobID != "" && len(r.launches[v.Annotation.JobID]) == 0 {
				n++
			}
		}
		return n
	}
	waitBooting := time.NewTimer(30 * time.Second)
	defer waitBooting.Stop()
	tick := time.NewTicker(5 * time.Millisecond) // polls the simulator: no signal for "a clone exists"
	defer tick.Stop()
	for booting() < 2 {
		select {
		case <-waitBooting.C:
			t.Fatal("never 2 worker VMs booting at once")
		case <-tick.C:
		}
	}
	atCancel := booting()
	started1, ok1, failed1 := obs1.counts()
	took, err := run1.stop(t, 30*time.Second)
	require.NoError(t, err, "first run's error")
	s1, ok1b, failed1b := obs1.counts()
	t.Logf("run 1 stopped in %s; at cancel %d spawns started, %d succeeded, %d failed, %d worker VMs booting; at return %d/%d/%d",
		took.Round(time.Millisecond), started1, ok1, failed1, atCancel, s1, ok1b, failed1b)
	assert.Less(t, took, 30*time.Second, "shutdown bound")

	// Right after the shutdown: a job held by the hatchery has a worker.
	name := cfg.CommonConfiguration.Name
	held, released := 0, 0
	r.mu.Lock()
	jobList := append([]rigJob(nil), r.jobs...)
	launched := map[string]int{}
	for j, vms := range r.launches {
		launched[j] = len(vms)
	}
	r.mu.Unlock()
	for _, j := range jobList {
		st := r.jobState(j)
		if st.Holder == name && st.Status == "Waiting" {
			held++
			assert.Positive(t, launched[j.ID], "job %s (v1 %v) still held by the hatchery after shutdown, no worker launched", j.ID, j.V1)
		}
		if st.Holder == "" && st.Status == "Waiting" {
			released++
		}
	}
	t.Logf("after run 1: %d jobs launched, %d held and waiting for their worker, %d waiting unheld", len(launched), held, released)
	require.Positive(t, released, "the stop came after every job was served: no restart tested")

	// Run 2 on the same simulators.
	obs2 := newSpawnCounter(0, 0)
	run2 := r.start(obs2)
	deadline := 90 * time.Second
	require.Eventually(t, func() bool {
		for _, j := range jobList {
			if r.jobState(j).Status != "Success" {
				return false
			}
		}
		return true
	}, deadline, 100*time.Millisecond, "every job Success after the restart")
	// The cleanup passes (every 2 s) destroy the finished workers' VMs; the
	// warm pool refills to its size.
	r.assertOnlyWarmPool(30*time.Second, 100*time.Millisecond, "no VM of ours but the warm pool after the cleanup")
	s2, ok2, f2 := obs2.counts()
	took2, err := run2.stop(t, 30*time.Second)
	require.NoError(t, err, "second run's error")
	t.Logf("run 2: %d spawns started, %d succeeded, %d failed; stopped in %s", s2, ok2, f2, took2.Round(time.Millisecond))

	r.mu.Lock()
	defer r.mu.Unlock()
	for _, j := range jobList {
		assert.Len(t, r.launches[j.ID], 1, "job %s (v1 %v): workers launched %v", j.ID, j.V1, r.launches[j.ID])
	}
	for vm, n := range r.byVM {
		assert.Equal(t, 1, n, "launches in VM %s", vm)
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, claims, "a job recorded on two live VMs")
	assert.Greater(t, samples, 20, "sampler ran")
}
