package admission_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/cds-contrib/hatchery-vsphere/internal/admission"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory/inventorytest"
	"github.com/cds-contrib/hatchery-vsphere/internal/placement"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
)

// The admission's own tests: an Admission on fakes of its two ports (the
// resource pool, the placements' figures), a fixed inventory and a
// settable clock, without the hatchery or vCenter. The rules tested are
// docs/flavors-and-capacity.md's ("Capacity", "Worked examples",
// "Reservation lifecycle", "Graceful degradation") and
// docs/placements.md's ("The decision").

// fakePool is the admission's Port: the hatchery's resource pool. A nil
// runtime with a nil error answers an empty runtime.
type fakePool struct {
	mu      sync.Mutex
	rt      *vctypes.PoolRuntime
	loadErr error // LoadResourcePool's answer
	readErr error // ResourcePoolRuntime's answer
	loads   int   // LoadResourcePool calls
	reads   int   // ResourcePoolRuntime calls
}

func (p *fakePool) LoadResourcePool(context.Context) (vctypes.Ref, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.loads++
	if p.loadErr != nil {
		return vctypes.Ref{}, p.loadErr
	}
	return vctypes.Ref{Type: "ResourcePool", Value: "resgroup-1"}, nil
}

func (p *fakePool) ResourcePoolRuntime(_ context.Context, pool vctypes.Ref) (*vctypes.PoolRuntime, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reads++
	if pool.Value != "resgroup-1" {
		return nil, errors.New("unknown pool " + pool.Value)
	}
	if p.readErr != nil {
		return nil, p.readErr
	}
	if p.rt == nil {
		return nil, nil
	}
	rt := *p.rt
	return &rt, nil
}

// set changes the pool's answers.
func (p *fakePool) set(rt *vctypes.PoolRuntime, readErr error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rt, p.readErr = rt, readErr
}

// counts are the calls made so far.
func (p *fakePool) counts() (loads, reads int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.loads, p.reads
}

// unreadable is a pool whose runtime cannot be read.
func unreadable() *fakePool {
	return &fakePool{readErr: errors.New("permission denied")}
}

// readable is a pool with memMB of memory and cpuMHz of CPU unreserved.
func readable(memMB, cpuMHz int64) *fakePool {
	return &fakePool{rt: &vctypes.PoolRuntime{MemoryUnreservedBytes: memMB << 20, CPUUnreservedMHz: cpuMHz}}
}

// fakePlaces is the admission's PlacementPort: each placement's pool
// runtime by path and each datastore's space by name; a missing one is
// unreadable. It counts the reads.
type fakePlaces struct {
	mu    sync.Mutex
	pools map[string]*vctypes.PoolRuntime
	ds    map[string]*vctypes.DatastoreSpace
	reads int
}

func (f *fakePlaces) PoolRuntimeAt(_ context.Context, path string) (*vctypes.PoolRuntime, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if rt, ok := f.pools[path]; ok {
		return rt, nil
	}
	return nil, errors.New("no pool at " + path)
}

func (f *fakePlaces) DatastoreSpaceOf(_ context.Context, name string) (*vctypes.DatastoreSpace, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if s, ok := f.ds[name]; ok {
		return s, nil
	}
	return nil, errors.New("no datastore " + name)
}

func (f *fakePlaces) readCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

// The flavors of the docs' worked examples (docs/flavors-and-capacity.md).
var (
	small  = config.Flavor{Name: "small", CPUs: 2, MemoryMB: 4096}
	medium = config.Flavor{Name: "medium", CPUs: 4, MemoryMB: 8192}
	large  = config.Flavor{Name: "large", CPUs: 8, MemoryMB: 16384, DiskSizeGB: 80}
)

// exampleConfig is the worked examples' configuration: the three flavors,
// countSmallerFlavorToKeep = 2, the listing inventory (no release grace)
// and the given static limits.
func exampleConfig(maxCPUs int, maxMemoryMB int64) *config.Config {
	return &config.Config{
		CommonConfiguration:      hatchery.CommonConfiguration{Name: testutil.Hatchery},
		MaxCPUs:                  maxCPUs,
		MaxMemoryMB:              maxMemoryMB,
		Flavors:                  []config.Flavor{small, medium, large},
		CountSmallerFlavorToKeep: 2,
		InventoryMode:            config.InventoryListing,
	}
}

// env is an Admission and what it reads.
type env struct {
	a     admission.Admission
	inv   *inventorytest.Fixed
	pool  *fakePool
	clock *testutil.Clock
	log   *testutil.SyncBuffer
}

// newEnv builds an admission of testutil.Hatchery on cfg, the VMs vms and
// pool (nil: an unreadable pool). Its flavors are resolved by the
// configuration's own rule (config.Config.ResolveFlavor).
func newEnv(cfg *config.Config, pool *fakePool, vms ...inventory.VM) *env {
	if pool == nil {
		pool = unreadable()
	}
	e := &env{inv: inventorytest.New(vms...), pool: pool, clock: testutil.NewClock(testutil.Epoch), log: &testutil.SyncBuffer{}}
	e.a = admission.Admission{
		State:     admission.NewState(),
		Hatchery:  testutil.Hatchery,
		Config:    cfg,
		Inventory: e.inv,
		Port:      pool,
		Resolve:   cfg.ResolveFlavor,
		Log:       slog.New(slog.NewTextHandler(e.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Now:       e.clock.Now,
	}
	return e
}

// withPlacements gives e's admission placements read through places,
// decided by a Book on e's clock.
func (e *env) withPlacements(places *fakePlaces, ps ...config.Placement) *placement.Book {
	e.a.Config.Placements = ps
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	book := placement.NewBook(placement.BookOptions{Names: names, Backoff: true, Now: e.clock.Now})
	e.a.State.Book = book
	e.a.Places = places
	return book
}

// job is a V2 model on template debian12 whose job asks for flavor ("":
// none).
func job(flavor string) sdk.WorkerStarterWorkerModel {
	return sdk.WorkerStarterWorkerModel{
		ModelV2:     &sdk.V2WorkerModel{Name: "debian12-generic", Type: sdk.VSphere},
		VSphereSpec: sdk.V2WorkerModelVSphereSpec{Image: "debian12"},
		JobFlavor:   flavor,
	}
}

// vm is a VM named name of owner with cpus vCPUs and memMB of memory,
// powered on when on.
func vm(name, owner string, cpus, memMB int32, on bool) inventory.VM {
	v := inventory.VM{Name: name, NumCPU: cpus, MemoryMB: memMB, PowerState: "poweredOff"}
	if on {
		v.PowerState = "poweredOn"
	}
	if owner != "" {
		v.Annotation = &inventory.Annotation{HatcheryName: owner, WorkerName: name}
	}
	return v
}

// worker is a powered-on worker of this hatchery.
func worker(name string, cpus, memMB int32) inventory.VM {
	return vm(name, testutil.Hatchery, cpus, memMB, true)
}

// template is the template named name with cpus vCPUs and memMB memory.
func template(name string, cpus, memMB int32) inventory.VM {
	v := vm(name, "", cpus, memMB, false)
	v.Template = true
	return v
}
