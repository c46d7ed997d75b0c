//go:build !race

// Package e2e runs the demo's path end to end as a test: the real daemon
// against the in-process vCenter and CDS API simulators.
//
// These tests are built without the race detector (//go:build !race):
// govmomi's simulator v0.56.0, pinned, races with itself when clones,
// destroys, reconfigures and renames run at once (a Destroy_Task removes
// the VM's files in a background task that races the next unregister; a
// clone's duplicate-name check reads its folder unlocked:
// internal/vcsimtest/serialtasks.go lists them), and the race detector
// fails a test for a race inside the simulator's own code. The exception
// is TestTwoInstancesOneStoppedHard (and the rig, harness_test.go), built
// with it too: its simulator runs those tasks one at a time
// (vcsimtest.Options.SerialTasks), and .ci/test runs it under -race. Our
// code's concurrency is also checked under -race by the other packages
// (the capacity-overshoot, concurrent-IP, claim and fault tests); .ci/test
// runs the rest of this package in a separate run without -race. One of
// those races could also crash the simulator (a clone's check finding a
// VM not yet named); every simulator runs clone bodies one at a time
// against it (internal/vcsimtest/clonebodies.go).
package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/demo"
)

// scrape is one GET of /mon/metrics.
type scrape struct {
	code     int
	vmCount  bool
	err      error
	duringAt time.Duration
}

// TestDemoOnce is `demo --jobs 8 --once` as a test: every job (V2 small,
// medium, large and V1) gets a worker VM whose CPU/RAM, read in the
// simulator when the worker is launched, is its flavor's; every worker VM
// is destroyed by the hatchery's cleanup at the end while the warm pool
// holds exactly its configured size; no IP is ever held by two powered-on
// VMs at once (sampled all along); /mon/metrics answers 200 with
// cds_hatchery_vsphere_vm_count throughout.
func TestDemoOnce(t *testing.T) {
	const jobs = 8
	var stdout, logs syncBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("demo output:\n%s\nlogs:\n%s", stdout.String(), logs.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	var (
		mu       sync.Mutex
		scrapes  []scrape
		clashes  []string
		samples  int
		final    []demo.SimVM
		poolSize int
		poolOK   bool
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	hc := &http.Client{Timeout: 5 * time.Second}
	start := time.Now()

	onReady := func(info demo.Info) {
		wg.Add(2)
		go func() { // scrape /mon/metrics every 500 ms until OnDone
			defer wg.Done()
			tk := time.NewTicker(500 * time.Millisecond)
			defer tk.Stop()
			for {
				s := scrape{duringAt: time.Since(start)}
				resp, err := hc.Get(info.MonURL + "/mon/metrics")
				if err != nil {
					s.err = err
				} else {
					body, rerr := io.ReadAll(resp.Body)
					resp.Body.Close()
					s.code, s.err = resp.StatusCode, rerr
					s.vmCount = strings.Contains(string(body), "cds_hatchery_vsphere_vm_count")
				}
				mu.Lock()
				scrapes = append(scrapes, s)
				mu.Unlock()
				select {
				case <-stop:
					return
				case <-tk.C:
				}
			}
		}()
		go func() { // sample the simulator: no IP on two powered-on VMs
			defer wg.Done()
			tk := time.NewTicker(50 * time.Millisecond)
			defer tk.Stop()
			for {
				holders := map[string]string{}
				for _, v := range demo.ListVMs(info.Env) {
					if !v.PoweredOn || v.IP == "" {
						continue
					}
					if other, ok := holders[v.IP]; ok {
						mu.Lock()
						clashes = append(clashes, fmt.Sprintf("%s and %s hold %s", other, v.Name, v.IP))
						mu.Unlock()
					}
					holders[v.IP] = v.Name
				}
				mu.Lock()
				samples++
				mu.Unlock()
				select {
				case <-stop:
					return
				case <-tk.C:
				}
			}
		}()
	}
	onDone := func(info demo.Info, _ *demo.Report) {
		close(stop)
		wg.Wait()
		want := 0
		for _, p := range info.Config.WorkerProvisioning {
			want += p.Number
		}
		// The warm pool refills after claims: wait for it to settle at its size.
		ours := func() (workers []string, pool int) {
			for _, v := range demo.ListVMs(info.Env) {
				if v.Template || v.Annotation == nil || v.Annotation.HatcheryName != info.Config.CommonConfiguration.Name || v.InstantParent {
					continue
				}
				if v.Annotation.Provisioning {
					pool++
				} else {
					workers = append(workers, v.Name)
				}
			}
			return workers, pool
		}
		ok := assert.Eventually(t, func() bool { w, p := ours(); return len(w) == 0 && p == want }, 20*time.Second, 100*time.Millisecond)
		_, p := ours()
		mu.Lock()
		final, poolSize, poolOK = demo.ListVMs(info.Env), want, ok && p == want
		mu.Unlock()
	}

	rep, err := demo.Run(ctx, demo.Options{
		Jobs: jobs, Once: true, Timeout: 60 * time.Second,
		JobEvery: 400 * time.Millisecond, WorkerRunTime: 500 * time.Millisecond,
		Stdout: &stdout, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		OnReady: onReady, OnDone: onDone,
	})
	require.NoError(t, err)
	require.NotNil(t, rep)
	elapsed := time.Since(start)
	t.Logf("demo of %d jobs done in %s", jobs, elapsed.Round(100*time.Millisecond))

	// Every job: a VM of its flavor's size, launched, finished, destroyed.
	require.Len(t, rep.Jobs, jobs)
	flavors := map[string]bool{}
	v1 := 0
	for _, j := range rep.Jobs {
		flavors[j.Flavor] = true
		if j.V1 {
			v1++
		}
		assert.NotEmpty(t, j.VM, "job %d got no VM", j.Seq)
		assert.Equal(t, j.WantCPUs, j.CPUs, "job %d (%s) vCPUs", j.Seq, j.Flavor)
		assert.Equal(t, j.WantMemoryMB, int64(j.MemoryMB), "job %d (%s) memory", j.Seq, j.Flavor)
		assert.NotEmpty(t, j.IP, "job %d ip", j.Seq)
		assert.False(t, j.Destroyed.IsZero(), "job %d VM %s destroyed", j.Seq, j.VM)
	}
	assert.Equal(t, map[string]bool{"small": true, "medium": true, "large": true}, flavors)
	assert.Positive(t, v1, "V1 jobs in the mix")
	assert.Empty(t, rep.IPClashes, "clashes at launch")
	// Workers register as soon as they are launched: the hatchery knows
	// them already, none is taken for an inconsistent one.
	assert.NotContains(t, logs.String(), `detail=inconsistent`, "a worker taken for an inconsistent one")

	mu.Lock()
	defer mu.Unlock()
	assert.True(t, poolOK, "worker VMs of ours left, or warm pool not at its size %d; final VMs: %+v", poolSize, final)
	assert.Empty(t, clashes, "an IP held by two powered-on VMs")
	assert.Greater(t, samples, 10, "IP sampler ran")
	require.GreaterOrEqual(t, len(scrapes), 3, "metrics scraped during the run")
	first := -1
	for i, s := range scrapes {
		require.NoError(t, s.err, "scrape at %s", s.duringAt)
		assert.Equal(t, http.StatusOK, s.code, "scrape at %s", s.duringAt)
		if s.vmCount && first < 0 {
			first = i
		}
		// Before the vCenter connection and the first collection pass the
		// gauge is absent; from then on, it is in every scrape.
		if first >= 0 {
			assert.True(t, s.vmCount, "scrape at %s lacks cds_hatchery_vsphere_vm_count", s.duringAt)
		}
	}
	require.GreaterOrEqual(t, first, 0, "no scrape had cds_hatchery_vsphere_vm_count")
	assert.GreaterOrEqual(t, len(scrapes)-first, 3, "scrapes with the gauge during the run")
	assert.Less(t, elapsed, 60*time.Second)
}
