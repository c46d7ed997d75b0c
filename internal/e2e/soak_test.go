//go:build !race

package e2e

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/demo"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// soakFlag selects the long soak: go test ./internal/e2e -run Soak -soak
// (or HATCHERY_VSPHERE_SOAK=1). Without it the short version runs (CI).
var soakFlag = flag.Bool("soak", false, "run the long soak (250 jobs) instead of the short one")

// memSample is the process's goroutines and live heap after a GC.
type memSample struct {
	at         string
	goroutines int
	heapMB     float64
}

func sampleMem(at string) memSample {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memSample{at: at, goroutines: runtime.NumGoroutine(), heapMB: float64(ms.HeapAlloc) / (1 << 20)}
}

func (m memSample) String() string {
	return fmt.Sprintf("%s: %d goroutines, heap %.1f MB", m.at, m.goroutines, m.heapMB)
}

// TestSoakWithFaults is the demo path (the real daemon, the simulators,
// simulated workers) with many jobs while vCenter fails CloneVM_Task,
// PowerOnVM_Task, ReconfigVM_Task and Destroy_Task at random (5 %) and the
// CDS API answers 503 to everything in 300 ms bursts every 4 s. It ends
// with every job done (worker ran, VM destroyed) or, for a V1 job, failed
// with a result by the hatchery; no job left booked/taken and waiting; no
// VM of ours left but the powered-off warm pool at its size; no worker VM
// destroyed under its running worker; no IP on two VMs at a launch. It
// prints the goroutine count and the live heap at the start, the middle
// (half the jobs done) and the end, and asserts the end is within a
// tolerance of the middle (no growth with the number of jobs).
//
// Short version (CI): 40 jobs. Long: -soak or HATCHERY_VSPHERE_SOAK=1,
// 250 jobs (a few minutes).
func TestSoakWithFaults(t *testing.T) {
	jobs, timeout := 40, 100*time.Second
	if *soakFlag || os.Getenv("HATCHERY_VSPHERE_SOAK") != "" {
		jobs, timeout = 250, 8*time.Minute
	}
	var stdout, logs syncBuffer
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("SOAKDBG") != "" {
			t.Logf("demo output:\n%s\nlogs (last 300 kB):\n%s", stdout.String(), tail(logs.String(), 300<<10))
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), timeout+30*time.Second)
	defer cancel()

	done := newLineCounter(&stdout, "destroyed by the hatchery's cleanup")
	var (
		mu       sync.Mutex
		samples  []memSample
		bursts   *int64
		faults   int64
		leftover []demo.SimVM
		pool     int
		settled  bool
		stuck    []string
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var stopOnce sync.Once
	stopAll := func() { stopOnce.Do(func() { close(stop) }); wg.Wait() }
	t.Cleanup(stopAll)

	var got demo.Info
	onReady := func(info demo.Info) {
		mu.Lock()
		got = info
		samples = append(samples, sampleMem("start"))
		mu.Unlock()
		roomy := func(rt *types.ResourcePoolRuntimeInfo) {
			rt.Memory.MaxUsage, rt.Memory.UnreservedForVm, rt.Memory.UnreservedForPool = 256<<30, 256<<30, 256<<30
		}
		info.Env.SetResourcePoolRuntime(roomy)
		// The demo's clones go to its placements' clusters (demo.toml).
		for _, cluster := range []string{vcsimtest.ClusterA, vcsimtest.ClusterB} {
			info.Env.SetClusterPoolRuntime(cluster, roomy)
		}
		injectVCenterFaults(info.Env, 0.05)
		bursts = apiBursts(info.API, 4*time.Second, 300*time.Millisecond, stop, &wg)
		wg.Add(1)
		go func() { // the middle sample: half the jobs done
			defer wg.Done()
			mctx, mcancel := context.WithCancel(ctx)
			defer mcancel()
			go func() {
				select {
				case <-stop:
					mcancel()
				case <-mctx.Done():
				}
			}()
			if done.waitCount(mctx, jobs/2) {
				s := sampleMem(fmt.Sprintf("middle (%d jobs done)", done.count()))
				mu.Lock()
				samples = append(samples, s)
				mu.Unlock()
			}
		}()
	}
	onDone := func(info demo.Info, rep *demo.Report) {
		stopAll() // no more API bursts; vCenter faults stay on
		mu.Lock()
		faults = info.Env.InjectedFaults()
		mu.Unlock()
		// The warm pool refills after the last claims.
		ok := assert.Eventually(t, func() bool {
			w, p := ourLeft(info)
			return len(w) == 0 && p == poolSizeOf(info.Config)
		}, 30*time.Second, 100*time.Millisecond, "no VM of ours but the warm pool")
		w, p := ourLeft(info)
		// No job left booked or taken by the hatchery and still waiting.
		var st []string
		for _, j := range rep.Jobs {
			if s := jobStateOf(info, j); s != "" {
				st = append(st, fmt.Sprintf("job %d (%s): %s", j.Seq, j.JobID, s))
			}
		}
		mu.Lock()
		leftover, pool, settled, stuck = w, p, ok, st
		samples = append(samples, sampleMem("end"))
		mu.Unlock()
	}

	start := time.Now()
	rep, err := demo.Run(ctx, demo.Options{
		Jobs: jobs, Once: true, Timeout: timeout,
		JobEvery: 150 * time.Millisecond, WorkerRunTime: 300 * time.Millisecond,
		Stdout: done, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Tune: func(cfg *config.Config) {
			// Room for 16 workers at once, loops every second: the
			// throughput is bounded by the loops' periods, not by limits.
			cfg.CommonConfiguration.Provision.MaxWorker = 16
			cfg.CommonConfiguration.Provision.MaxConcurrentProvisioning = 16
			cfg.MaxCPUs = 128
			cfg.KillAwolServersInterval = 1
			cfg.InventoryRefreshInterval = 1
			oneSimulatorTask(cfg)
		},
		OnReady: onReady, OnDone: onDone,
	})
	elapsed := time.Since(start)
	if err != nil && rep != nil {
		mu.Lock()
		for _, j := range rep.Jobs {
			if j.Destroyed.IsZero() && j.Failed.IsZero() {
				t.Logf("job %d (%s, v1 %v) not ended: %s; report %+v", j.Seq, j.JobID, j.V1, jobStateOf(got, j), j)
			}
		}
		mu.Unlock()
	}
	require.NoError(t, err)
	require.Len(t, rep.Jobs, jobs)

	mu.Lock()
	defer mu.Unlock()
	t.Logf("soak: %d jobs in %s: %d done, %d failed by the hatchery; %d vCenter faults injected, %d API 503 bursts",
		jobs, elapsed.Round(100*time.Millisecond), rep.Done(), rep.Failed(), faults, *bursts)
	for _, s := range samples {
		t.Log(s)
	}
	assert.Equal(t, jobs, rep.Done()+rep.Failed(), "every job done or failed")
	assert.Empty(t, rep.Lost(), "worker VMs destroyed under their running worker")
	assert.Empty(t, rep.IPClashes, "IP clashes at launch")
	assert.True(t, settled, "left: %+v, pool %d", leftover, pool)
	assert.Empty(t, stuck, "jobs stuck booked/taken or not ended")
	assert.Positive(t, faults, "vCenter faults were injected")

	require.Len(t, samples, 3, "start, middle and end samples")
	mid, end := samples[1], samples[2]
	// The end, every worker gone, may not exceed the middle, workers
	// running, by more than a margin for connection pools and timers.
	assert.LessOrEqual(t, end.goroutines, mid.goroutines+mid.goroutines/4+10, "goroutines grew: %s -> %s", mid, end)
	assert.LessOrEqual(t, end.heapMB, mid.heapMB*1.5+8, "heap grew: %s -> %s", mid, end)
}

// poolSizeOf is the configured warm pool size.
func poolSizeOf(cfg *config.Config) int {
	n := 0
	for _, p := range cfg.WorkerProvisioning {
		n += p.Number
	}
	return n
}

// jobStateOf says what is wrong with a job at the end ("" when it ended:
// Success, or Fail with a result for a V1 job).
func jobStateOf(info demo.Info, j demo.JobReport) string {
	if j.V1 {
		id, _ := strconv.ParseInt(j.JobID, 10, 64)
		st, ok := info.API.JobV1(id)
		switch {
		case !ok:
			return "unknown"
		case st.Status == sdk.StatusSuccess:
			return ""
		case st.Status == sdk.StatusFail && len(st.Results) > 0:
			return ""
		}
		return fmt.Sprintf("status %s, booked by %q", st.Status, st.BookedBy)
	}
	st, ok := info.API.JobV2(j.JobID)
	switch {
	case !ok:
		return "unknown"
	case st.Status == sdk.StatusSuccess:
		return ""
	}
	return fmt.Sprintf("status %s, taken by %q", st.Status, st.TakenBy)
}
