package e2e

import (
	"context"
	"errors"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/cdssim"
	"github.com/cds-contrib/hatchery-vsphere/internal/demo"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// instance is one daemon of the two-instance test, with its proxies:
// it reaches the simulators only through loopback proxies of its own, so
// that cutting them makes its hard stop look like kill -9 to the
// simulators (nothing it sends afterwards reaches them); its context is
// cancelled only after the cut, to join its goroutines.
type instance struct {
	n       int
	vc, api *testutil.Proxy
	run     *daemonRun
	obs     *spawnCounter
}

// startInstance runs daemon n on the rig's simulators, through proxies of
// its own, logging with instance=n.
func (r *rig) startInstance(n int) *instance {
	r.t.Helper()
	base := r.sims.Config
	vcURL, err := url.Parse(base.Endpoint)
	require.NoError(r.t, err)
	apiURL, err := url.Parse(base.CommonConfiguration.API.HTTP.URL)
	require.NoError(r.t, err)
	in := &instance{n: n, vc: testutil.StartProxy(r.t, vcURL.Host), api: testutil.StartProxy(r.t, apiURL.Host), obs: newSpawnCounter(0, 0)}
	cfg := *base
	vcURL.Host = in.vc.Addr() // same IP: the simulator's certificate holds
	apiURL.Host = in.api.Addr()
	cfg.Endpoint = vcURL.String()
	cfg.CommonConfiguration.API.HTTP.URL = apiURL.String()
	cfg.CommonConfiguration.CDN.URL = apiURL.String()
	in.run = r.startWith(&cfg, r.log.With("instance", n), in.obs)
	return in
}

// kill stops the instance as kill -9 would: its proxies are cut first,
// then its context ends and its goroutines are joined.
func (in *instance) kill(t *testing.T) {
	t.Helper()
	in.vc.Cut()
	in.api.Cut()
	_, err := in.run.stop(t, 30*time.Second)
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Logf("killed instance %d returned: %v", in.n, err)
	}
}

// haSample is what one look at the simulator found.
type haSample struct {
	claims  map[string][]string // job -> live worker VMs recording it, when more than one
	clashes []string            // "ip: vm, vm"
	cpus    int32               // vCPUs of the hatchery's powered-on VMs
}

func (r *rig) haSample() haSample {
	name := r.sims.Config.CommonConfiguration.Name
	vms := demo.ListVMs(r.sims.Env)
	s := haSample{claims: map[string][]string{}, clashes: demo.IPClashes(vms)}
	by := map[string][]string{}
	for _, v := range vms {
		if v.Template || v.Annotation == nil || v.Annotation.HatcheryName != name {
			continue
		}
		if v.PoweredOn {
			s.cpus += v.CPUs
		}
		if !v.Annotation.Provisioning && v.Annotation.JobID != "" {
			by[v.Annotation.JobID] = append(by[v.Annotation.JobID], v.Name)
		}
	}
	for j, names := range by {
		if len(names) > 1 {
			s.claims[j] = names
		}
	}
	return s
}

// TestTwoInstancesOneStoppedHard runs two instances of one hatchery name on
// the same vCenter and CDS API simulators, with a warm pool, static IPs and
// a vCPU limit, and feeds 100 jobs. With about half of them done, instance
// 1 is stopped hard: its connections to both simulators are cut at once
// (nothing it does afterwards reaches them, as after kill -9), then its
// context ends. The jobs it had booked (V1) or taken (V2) without a worker
// come back to the queue as the CDS API does it (the simulator's
// BookingTTL and SchedulingTimeout, shortened here), and the VMs it left
// booting are reclaimed by instance 2's cleanup once workerRegistrationTTL
// passed (a worker that never started, docs/design.md#cleanup). Shows:
//
//   - every job is Success with exactly one worker launched for it over
//     both instances, and no VM got two launches (no warm VM claimed
//     twice);
//   - no two live VMs recorded one job, the VMs instance 1 left booting
//     aside (sampled all along);
//   - no two powered-on VMs held one address at once (sampled);
//   - the powered-on vCPUs never exceeded maxCpus plus the other
//     instance's spawns in flight (at most maxConcurrentProvisioning, one
//     small footprint each), the bound of docs/high-availability.md
//     (sampled);
//   - in the end no VM of the hatchery is left but the warm pool, at its
//     size and powered off;
//   - the surviving instance logs no WARN.
//
// Unlike the other tests of this package it is built with the race
// detector too, and CI runs it under -race. For that the vCenter simulator
// runs its clone, destroy, reconfigure and rename tasks one at a time
// (vcsimtest.Options.SerialTasks): govmomi v0.56.0's simulator races with
// itself when two of those tasks run at once, in code with no frame of
// this repository, and two instances always have two tasks of the
// simulator at once (maxConcurrentTasks bounds each instance's, not the
// pair's). internal/vcsimtest/serialtasks.go names the races. This is a
// workaround for the simulator, not vCenter's behaviour: the hatchery's
// own requests stay as concurrent as in production (the instances call
// at once, up to maxConcurrentTasks each), only the simulator queues
// these tasks; the detector checks both instances, the daemon and the
// rig.
func TestTwoInstancesOneStoppedHard(t *testing.T) {
	const (
		jobs       = 100
		hold       = 15 * time.Second // booking / scheduling lifetime of a dead hatchery's jobs
		runTime    = 300 * time.Millisecond
		smallCPUs  = 2
		maxCpus    = 16
		maxPending = 4
	)
	r := newRigWith(t, demo.SimsOptions{
		API:         []func(*cdssim.Options){func(o *cdssim.Options) { o.BookingTTL, o.SchedulingTimeout = hold, hold }},
		SerialTasks: true,
	})
	cfg := r.sims.Config
	cfg.MaxCPUs = maxCpus
	cfg.CommonConfiguration.Provision.MaxWorker = 20
	cfg.CommonConfiguration.Provision.MaxConcurrentProvisioning = maxPending
	cfg.WorkerRegistrationTTL = 1 // minute: the dead instance's booting VMs are reclaimed within the test
	for i := range cfg.WorkerProvisioning {
		cfg.WorkerProvisioning[i].Number = 3
	}
	require.NotEmpty(t, cfg.IPRange, "static IPs")
	require.Positive(t, r.poolSize(), "a warm pool")
	require.NoError(t, cfg.Validate())

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r.playWorkers(ctx, runTime)

	// Sample the simulator all along.
	var (
		mu        sync.Mutex
		claims    = map[string][]string{}
		clashes   = map[string]bool{}
		maxSeen   int32
		samples   int
		abandoned map[string]bool // VMs instance 1 left booting, set at its kill
	)
	r.sampleAlong(50*time.Millisecond, func() {
		s := r.haSample()
		mu.Lock()
		samples++
		maxSeen = max(maxSeen, s.cpus)
		for j, vms := range s.claims {
			live := 0
			for _, v := range vms {
				if !abandoned[v] {
					live++
				}
			}
			if live > 1 {
				claims[j] = vms
			}
		}
		for _, c := range s.clashes {
			clashes[c] = true
		}
		mu.Unlock()
	})

	// Two daemons and the simulator share two cores under the race
	// detector: a read of the VM changes, which vcsim answers by collecting
	// every filter again (docs/inventory-watch.md), was seen to take more
	// than the production bound of 15 s, and the daemon then rightly warns
	// that vCenter did not answer. The simulator's slowness is not what this
	// test checks: its daemons get the bound of the test clients
	// (vcsimtest.TestRequestTimeout), and a WARN still fails it.
	r.requestTimeout = vcsimtest.TestRequestTimeout
	in1 := r.startInstance(1)
	in2 := r.startInstance(2)
	r.addJobs(jobs)
	r.mu.Lock()
	jobList := append([]rigJob(nil), r.jobs...)
	r.mu.Unlock()
	succeeded := func() int {
		n := 0
		for _, j := range jobList {
			if r.jobState(j).Status == "Success" {
				n++
			}
		}
		return n
	}

	// About half done, and instance 1 with spawns in flight: stop it hard.
	require.Eventually(t, func() bool { return succeeded() >= jobs/2 }, 4*time.Minute, 20*time.Millisecond, "half the jobs done")
	inFlight := func() int { s, ok, f := in1.obs.counts(); return s - ok - f }
	waitSpawn := time.NewTimer(20 * time.Second)
	defer waitSpawn.Stop()
	tick := time.NewTicker(5 * time.Millisecond) // the observer has no signal for "n in flight"
	defer tick.Stop()
wait:
	for inFlight() == 0 {
		select {
		case <-waitSpawn.C:
			break wait
		case <-tick.C:
		}
	}
	atKill, spawning := succeeded(), inFlight()
	in1.kill(t)
	s1, ok1, f1 := in1.obs.counts()
	t.Logf("instance 1 killed with %d/%d jobs done, %d spawns in flight (in all: %d started, %d succeeded, %d failed)", atKill, jobs, spawning, s1, ok1, f1)
	assert.Less(t, atKill, jobs*3/4, "the kill came in the middle of the run")
	assert.Positive(t, ok1, "instance 1 ran jobs before its kill")

	// What instance 1 left: worker VMs without a worker launched.
	_, workers := r.ourVMs()
	left := map[string]bool{}
	var held []string // their jobs: booked (V1) or taken (V2) by the dead instance
	r.mu.Lock()
	for _, v := range workers {
		if r.byVM[v.Name] == 0 {
			left[v.Name] = true
			if v.Annotation.JobID != "" { // a warm VM claimed and not yet renamed records none
				held = append(held, v.Annotation.JobID)
			}
		}
	}
	r.mu.Unlock()
	mu.Lock()
	abandoned = left
	mu.Unlock()
	t.Logf("instance 1 left %d worker VMs without a worker: %v; their jobs, held by the dead instance: %v", len(left), sortedNames(left), held)

	// Instance 2 runs every job to the end, the ones instance 1 held too.
	require.Eventually(t, func() bool { return succeeded() == jobs }, 4*time.Minute, 100*time.Millisecond, "every job Success after the kill")
	r.assertOnlyWarmPool(3*time.Minute, 200*time.Millisecond, "no VM of ours but the warm pool (the booting VMs instance 1 left reclaimed after workerRegistrationTTL)")
	s2, ok2, f2 := in2.obs.counts()
	_, err := in2.run.stop(t, 30*time.Second)
	require.NoError(t, err, "instance 2's error")
	t.Logf("instance 2: %d spawns started, %d succeeded, %d failed", s2, ok2, f2)
	logs := r.logs.String()
	t.Logf("arbiters: %d claims lost to the other instance, %d pool slots filled by the other instance",
		strings.Count(logs, "provisioned vm taken by another instance"), strings.Count(logs, "pool slot filled by another instance"))
	var warns []string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "level=WARN") && strings.Contains(l, " instance=2") || strings.Contains(l, "level=ERROR") && strings.Contains(l, " instance=2") {
			warns = append(warns, l)
		}
	}
	assert.Empty(t, warns, "the surviving instance logs no WARN: what the dead one left is an expected outcome")

	r.mu.Lock()
	for _, j := range jobList {
		assert.Len(t, r.launches[j.ID], 1, "job %s (v1 %v): workers launched %v", j.ID, j.V1, r.launches[j.ID])
	}
	for _, j := range held {
		assert.Len(t, r.launches[j], 1, "job %s held by the dead instance: launched once, by the survivor", j)
	}
	for vm, n := range r.byVM {
		assert.Equal(t, 1, n, "launches in VM %s", vm)
	}
	r.mu.Unlock()

	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, claims, "a job recorded on two live VMs")
	assert.Empty(t, sortedNames(clashes), "an address held by two powered-on VMs at once")
	bound := int32(maxCpus + maxPending*smallCPUs)
	t.Logf("capacity: at most %d powered-on vCPUs sampled (maxCpus %d, bound %d), %d samples", maxSeen, maxCpus, bound, samples)
	assert.LessOrEqual(t, maxSeen, bound, "powered-on vCPUs above maxCpus plus the other instance's spawns in flight")
	assert.Greater(t, samples, 100, "sampler ran")
}

func sortedNames(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
