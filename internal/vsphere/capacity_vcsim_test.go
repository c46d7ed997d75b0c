package vsphere_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vsphere"
)

// viFlavors is the array example of docs/flavors-and-capacity.md.
func viFlavors() []config.Flavor {
	return []config.Flavor{
		{Name: "small", CPUs: 2, MemoryMB: 4096},
		{Name: "medium", CPUs: 4, MemoryMB: 8192},
		{Name: "large", CPUs: 8, MemoryMB: 16384},
		{Name: "xlarge", CPUs: 16, MemoryMB: 32768},
	}
}

// viSetPoolMemory sets the pool's memory.unreservedForVm (bytes) and a CPU
// headroom.
func viSetPool(env *vcsimtest.Env, memBytes, cpuMHz int64) {
	env.SetResourcePoolRuntime(func(rt *types.ResourcePoolRuntimeInfo) {
		rt.Memory.UnreservedForVm = memBytes
		rt.Cpu.UnreservedForVm = cpuMHz
	})
}

// TestVcsimFlavorLargeSpawn: a job asking flavor "large" gets a
// VM of 8 vCPU / 16384 MB cloned from a 2 vCPU / 4096 MB template.
func TestVcsimFlavorLargeSpawn(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := env.Context()
	const hatch = "hatch-vi-flavor"
	cfg := env.Config()
	cfg.CommonConfiguration.Name = hatch
	cfg.Flavors = viFlavors()
	cfg.IPRange, cfg.Gateway, cfg.SubnetMask, cfg.DNS = "192.168.79.10/24", "192.168.79.1", "255.255.255.0", "192.168.79.2"
	client := &viRecordingClient{Port: env.Client}
	h, err := vsphere.New(vsphere.Options{Config: cfg, Client: client, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)

	tpl := env.MustInspect(vcsimtest.DefaultTemplate)
	require.Equal(t, int32(2), tpl.NumCPU)
	require.Equal(t, int32(4096), tpl.MemoryMB)

	require.NoError(t, h.SpawnWorker(ctx, viV2Args(hatch, "vi-large-1", "run-large-1", "large")))
	st := env.MustInspect("vi-large-1")
	assert.Equal(t, int32(8), st.NumCPU, "flavor large vCPUs")
	assert.Equal(t, int32(16384), st.MemoryMB, "flavor large memory")
	assert.Equal(t, types.VirtualMachinePowerStatePoweredOn, st.PowerState)
	a, err := inventory.ParseAnnotation(st.Annotation)
	require.NoError(t, err)
	assert.Equal(t, "large", a.Flavor)
	rec := client.clone(t, "vi-large-1")
	require.NotNil(t, rec.Req.Growth)
	assert.Equal(t, int32(8), rec.Req.Growth.CPUs, "applied at clone time")
	assert.Equal(t, int64(16384), rec.Req.Growth.MemoryMB)

	// Without a flavor the template's resources are kept.
	require.NoError(t, h.SpawnWorker(ctx, viV2Args(hatch, "vi-plain-1", "run-plain-1", "")))
	plain := env.MustInspect("vi-plain-1")
	assert.Equal(t, int32(2), plain.NumCPU)
	assert.Equal(t, int32(4096), plain.MemoryMB)
}

// TestVcsimCapacityResourcePool: the resource pool's
// memory.unreservedForVm, read over the API from the simulator, decides:
// below the next worker's memory the answer is false, at it true; an
// allowed spawn still in flight counts against the pool (vCenter does not
// show it yet); no unreserved CPU is false.
func TestVcsimCapacityResourcePool(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := env.Context()
	cfg := env.Config()
	cfg.CommonConfiguration.Name = "hatch-vi-pool"
	cfg.Flavors = viFlavors()
	h, err := vsphere.New(vsphere.Options{Config: cfg, Client: env.Client, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	large := viV2Args(cfg.CommonConfiguration.Name, "w", "j", "large").Model
	plain := viV2Args(cfg.CommonConfiguration.Name, "w", "j", "").Model
	const mhz = 20000

	steps := []struct {
		name   string
		memMB  int64
		cpuMHz int64
		job    string
		large  bool
		want   bool
	}{
		{name: "pool nearly full: 16383 MB free for a 16384 MB worker", memMB: 16383, cpuMHz: mhz, job: "run-1", large: true, want: false},
		{name: "template footprint (4096 MB) below the free memory", memMB: 4095, cpuMHz: mhz, job: "run-2", want: false},
		{name: "pool freed: exactly the worker's memory", memMB: 16384, cpuMHz: mhz, job: "run-1", large: true, want: true},
		{name: "the allowed spawn in flight holds its 16384 MB", memMB: 16384, cpuMHz: mhz, job: "run-3", large: true, want: false},
		{name: "room for both", memMB: 32768, cpuMHz: mhz, job: "run-3", large: true, want: true},
		{name: "no unreserved cpu", memMB: 1 << 20, cpuMHz: 0, job: "run-4", large: true, want: false},
		{name: "template footprint fits", memMB: 1 << 20, cpuMHz: mhz, job: "run-5", want: true},
	}
	for _, s := range steps {
		viSetPool(env, s.memMB<<20, s.cpuMHz)
		m := plain
		if s.large {
			m = large
		}
		ok, err := h.CanAllocateResources(ctx, m, s.job, nil)
		require.NoError(t, err, s.name)
		assert.Equal(t, s.want, ok, s.name)
	}
}

// TestVcsimCapacityConcurrentLargeJobs (docs/design.md#allocated and
// docs/design.md#inventory): with
// maxCpus = 16, 40 concurrent "large" (8 vCPU) jobs — each deciding with
// CanAllocateResources and, when allowed, spawning through SpawnWorker
// (whose deferred releaseCapacity ends the reservation), the refused ones
// retrying as workers end — never have more than 16 vCPUs of our VMs
// powered on at once in the simulator. Run in every inventory mode: the
// shared inventory shows a spawn's VM only after its next refresh, which
// local bookkeeping must cover.
func TestVcsimCapacityConcurrentLargeJobs(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{config.InventoryListing, config.InventoryShared, config.InventoryWatch} {
		// One mode at a time: each loads the machine (40 jobs, the
		// simulator, SOAP) on its own.
		t.Run(mode, func(t *testing.T) { viRunConcurrentLarge(t, mode) })
	}
}

// viSignal is a broadcast: wait returns a channel closed at the next fire.
type viSignal struct {
	mu sync.Mutex
	ch chan struct{}
}

func newViSignal() *viSignal { return &viSignal{ch: make(chan struct{})} }

func (s *viSignal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ch
}

func (s *viSignal) fire() {
	s.mu.Lock()
	close(s.ch)
	s.ch = make(chan struct{})
	s.mu.Unlock()
}

func viRunConcurrentLarge(t *testing.T, mode string) {
	const (
		jobs        = 40
		maxCPUs     = 16
		target      = 4   // spawns before the run stops: two generations of workers at least
		maxAttempts = 200 // per job; the run stops long before
		probes      = 2   // jobs deciding again after a spawn ends or a refresh
		retries     = 4   // jobs deciding again after a worker's vm was destroyed
	)
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx, cancel := context.WithTimeout(env.Context(), 120*time.Second)
	defer cancel()
	hatch := "hatch-vi-conc-" + mode
	viSetPool(env, 1<<40, 1<<20) // the pool never limits: maxCpus does
	tracker := viTrackPower(env, hatch)

	cfg := env.Config()
	cfg.CommonConfiguration.Name = hatch
	cfg.Flavors = viFlavors()
	cfg.MaxCPUs = maxCPUs
	cfg.InventoryMode = mode
	cfg.InventoryRefreshInterval = 1
	cfg.IPRange, cfg.Gateway, cfg.SubnetMask, cfg.DNS = "10.77.0.10/24", "10.77.0.1", "255.255.255.0", "10.77.0.2"
	log := slog.New(slog.DiscardHandler)

	// Refused jobs decide again on signals, never on a timer, a few at a
	// time (every decision costs SOAP round trips): when a worker's VM was
	// destroyed (capacity freed), when a spawn ended (its reservation was
	// just released: the window before the inventory shows its VM) and
	// when the shared inventory refreshed. All wake when the run stops.
	wake := newViSignal()
	var budget atomic.Int64
	var stop atomic.Bool
	wakeN := func(n int64) { budget.Store(n); wake.fire() }
	refusedSig := newViSignal()
	var bg sync.WaitGroup // joined before the test ends
	runCtx, stopRun := context.WithCancel(ctx)
	defer func() { stopRun(); bg.Wait() }()

	var inv inventory.Inventory = inventory.Listing{Client: env.Client}
	var shared *inventory.Shared
	if mode != config.InventoryListing {
		shared = inventory.NewShared(env.Client, 500*time.Millisecond, 20*time.Millisecond, log)
		if mode == config.InventoryWatch {
			shared = inventory.NewWatch(env.Client, 500*time.Millisecond, 20*time.Millisecond, log)
		}
		inv = shared
		bg.Add(2)
		go func() { defer bg.Done(); shared.Run(runCtx) }()
		go func() {
			defer bg.Done()
			for shared.WaitRefresh(runCtx) == nil {
				wakeN(probes)
			}
		}()
	}
	h, err := vsphere.New(vsphere.Options{Config: cfg, Client: env.Client, Inventory: inv, Logger: log})
	require.NoError(t, err)

	// Sampler: after every power transition of ours, sums our powered-on
	// vCPUs from the simulator's registry a few times, as fast as it can. A
	// sample is valid when no VM of ours powered off while it was taken
	// (see viSampleCPUs).
	var samples, validSamples, maxSample atomic.Int64
	sampleDone := make(chan struct{})
	bg.Add(1)
	go func() {
		defer bg.Done()
		sctx := env.SimContext()
		for {
			next := tracker.changed.wait()
			for range 5 {
				off := tracker.powerOffs()
				sum := viSampleCPUs(env, sctx, hatch)
				samples.Add(1)
				if tracker.powerOffs() == off {
					validSamples.Add(1)
					if sum > maxSample.Load() {
						maxSample.Store(sum)
					}
				}
				runtime.Gosched()
			}
			select {
			case <-sampleDone:
				return
			case <-next:
			}
		}
	}()

	var (
		spawned    atomic.Int64
		refusals   atomic.Int64
		decisions  atomic.Int64 // decisions started
		lastRefuse atomic.Int64 // start number of the latest refused decision
		trying     atomic.Int64 // jobs still deciding
		errMu      sync.Mutex
		errs       []error
	)
	fail := func(err error) {
		errMu.Lock()
		errs = append(errs, err)
		errMu.Unlock()
	}
	trying.Store(jobs)
	leave := func() { trying.Add(-1); refusedSig.fire() }

	// waitRetry blocks until this refused job should decide again; ch was
	// taken before its decision, so no wake-up is missed.
	waitRetry := func(ch <-chan struct{}) {
		for {
			select {
			case <-ch:
				if stop.Load() || budget.Add(-1) >= 0 {
					return
				}
				ch = wake.wait()
			case <-ctx.Done():
				return
			}
		}
	}

	// hold keeps a spawned worker running until a decision that began
	// after its spawn ended (and, in shared mode, after the inventory
	// showed its VM) was refused, or nobody decides any more (the run is
	// stopping).
	hold := func(name string) {
		mark := decisions.Load()
		wakeN(probes) // the reservation was just released: decide now
		if shared != nil {
			if err := shared.WaitRefresh(ctx); err != nil {
				fail(fmt.Errorf("wait refresh after %s: %w", name, err))
			}
			mark = decisions.Load()
		}
		for ctx.Err() == nil {
			w := refusedSig.wait()
			if lastRefuse.Load() > mark || trying.Load() == 0 || stop.Load() {
				return
			}
			select {
			case <-w:
			case <-ctx.Done():
			}
		}
	}

	job := func(i int) {
		name, jobID := fmt.Sprintf("vi-large-%02d", i), fmt.Sprintf("run-large-%02d", i)
		args := viV2Args(hatch, name, jobID, "large")
		for attempt := 0; ; attempt++ {
			if stop.Load() || attempt >= maxAttempts || ctx.Err() != nil {
				leave()
				return
			}
			ch := wake.wait()
			seq := decisions.Add(1)
			ok, err := h.CanAllocateResources(ctx, args.Model, jobID, nil)
			if err != nil {
				fail(fmt.Errorf("can allocate %s: %w", jobID, err))
				leave()
				return
			}
			if !ok {
				refusals.Add(1)
				for { // lastRefuse = max(lastRefuse, seq)
					cur := lastRefuse.Load()
					if seq <= cur || lastRefuse.CompareAndSwap(cur, seq) {
						break
					}
				}
				refusedSig.fire()
				waitRetry(ch)
				continue
			}
			leave()
			if err := h.SpawnWorker(ctx, args); err != nil { // releases the reservation when it returns
				fail(fmt.Errorf("spawn %s: %w", name, err))
				return
			}
			if spawned.Add(1) >= target {
				stop.Store(true)
				wakeN(jobs)
			}
			hold(name)

			// The worker ends: its VM goes away.
			st, found := env.Inspect(name)
			if !found {
				fail(fmt.Errorf("vm %s not found after its spawn", name))
				return
			}
			vm := st.Ref
			// One ending worker at a time: two Destroy_Tasks at once race
			// inside vcsim v0.56.0 (its datastore map), which the race
			// detector reports against the test. The hatchery's own calls
			// stay concurrent.
			viDestroyMu.Lock()
			if err := env.Client.ShutdownVirtualMachine(ctx, vim.RefOf(vm)); err != nil {
				fail(err)
			} else if err := env.Client.DestroyVirtualMachine(ctx, vim.RefOf(vm)); err != nil {
				fail(err)
			}
			viDestroyMu.Unlock()
			wakeN(retries)
			return
		}
	}

	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			job(i)
		}()
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	close(sampleDone)
	stopRun()
	bg.Wait()

	require.NoError(t, ctx.Err(), "the run finished in time")
	errMu.Lock()
	for _, err := range errs {
		t.Error(err)
	}
	errMu.Unlock()

	peak, powerOns := tracker.stats()
	t.Logf("%s: %s, spawned %d, refusals %d, peak %d vCPUs at power transitions, samples %d (%d valid, max %d vCPUs)",
		mode, time.Since(t0).Round(time.Millisecond), spawned.Load(), refusals.Load(), peak, samples.Load(), validSamples.Load(), maxSample.Load())
	assert.LessOrEqual(t, peak, int64(maxCPUs), "vCPUs of our powered-on vms at any power transition")
	assert.LessOrEqual(t, maxSample.Load(), int64(maxCPUs), "vCPUs of our powered-on vms in any valid sample")
	assert.Positive(t, validSamples.Load(), "the sampler saw the run")
	assert.GreaterOrEqual(t, peak, int64(8), "workers did run")
	assert.GreaterOrEqual(t, spawned.Load(), int64(target), "capacity freed by ended workers is used again")
	assert.Equal(t, int(spawned.Load()), powerOns, "one power-on per spawn")
	assert.Positive(t, refusals.Load(), "jobs were refused at the limit")
}

// viDestroyMu serialises the simulated workers' VM teardown (see above).
var viDestroyMu sync.Mutex
