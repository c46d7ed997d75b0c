package vsphere

// Test helpers of the capacity/flavor work. Names carry a "cap" prefix so
// that they do not collide with the helpers of other files of the package.

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/capacity"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory/inventorytest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/mock_vsphere"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

const capHatcheryName = "hatch-1"

// capFlavors is the array example of docs/flavors-and-capacity.md.
func capFlavors() []config.Flavor {
	return []config.Flavor{
		{Name: "small", CPUs: 2, MemoryMB: 4096},
		{Name: "medium", CPUs: 4, MemoryMB: 8192},
		{Name: "large", CPUs: 8, MemoryMB: 16384},
		{Name: "xlarge", CPUs: 16, MemoryMB: 32768},
	}
}

// capPool is the resource pool runtime the mock serves; err makes reads fail.
type capPool struct {
	mu           sync.Mutex
	memoryBytes  int64
	cpuMHz       int64
	err          error
	loadFailures int // LoadResourcePool fails while > 0
}

func (p *capPool) setErr(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.err = err
}

func (p *capPool) set(memoryMB, cpuMHz int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.memoryBytes, p.cpuMHz = memoryMB<<20, cpuMHz
}

// capLogs is a concurrency-safe buffer of JSON log lines.
type capLogs struct {
	testutil.SyncBuffer
}

// records returns the decoded log lines whose msg is msg.
func (l *capLogs) records(t *testing.T, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

type capEnv struct {
	h     *HatcheryVSphere
	inv   *inventorytest.Fixed
	pool  *capPool
	logs  *capLogs
	clock *testutil.Clock
	mock  *mock_vsphere.MockPort
}

// newCapEnv builds a hatchery over a mock client whose resource pool reads
// are served by env.pool (plenty of room unless changed), a fake inventory
// and a captured JSON logger. cfg is completed with the hatchery name and,
// when unset, the listing inventory mode: the fake inventory is always
// fresh, as the listing inventory is.
// poolRuntime is env.pool's runtime as the port reads it, or its error.
func (env *capEnv) poolRuntime() (*vctypes.PoolRuntime, error) {
	env.pool.mu.Lock()
	defer env.pool.mu.Unlock()
	if env.pool.err != nil {
		return nil, env.pool.err
	}
	return &vctypes.PoolRuntime{MemoryUnreservedBytes: env.pool.memoryBytes, CPUUnreservedMHz: env.pool.cpuMHz}, nil
}

func newCapEnv(t *testing.T, cfg config.Config) *capEnv {
	t.Helper()
	ctrl := gomock.NewController(t)
	m := mock_vsphere.NewMockPort(ctrl)
	expectIPLocks(m, &cfg)
	env := &capEnv{
		inv:   inventorytest.New(),
		pool:  &capPool{memoryBytes: 1 << 50, cpuMHz: 100000},
		logs:  &capLogs{},
		clock: testutil.NewClock(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)),
		mock:  m,
	}
	poolObj := vctypes.Ref{Type: "ResourcePool", Value: "resgroup-1"}
	m.EXPECT().LoadResourcePool(gomock.Any()).DoAndReturn(func(context.Context) (vctypes.Ref, error) {
		env.pool.mu.Lock()
		defer env.pool.mu.Unlock()
		if env.pool.loadFailures > 0 {
			env.pool.loadFailures--
			return vctypes.Ref{}, errCapPoolLoad
		}
		return poolObj, nil
	}).AnyTimes()
	m.EXPECT().ResourcePoolRuntime(gomock.Any(), poolObj).DoAndReturn(func(context.Context, vctypes.Ref) (*vctypes.PoolRuntime, error) {
		return env.poolRuntime()
	}).AnyTimes()
	cfg.CommonConfiguration.Name = capHatcheryName
	if cfg.InventoryMode == "" {
		cfg.InventoryMode = config.InventoryListing
	}
	h, err := New(Options{
		Config:    &cfg,
		Client:    m,
		Inventory: env.inv,
		Logger:    slog.New(slog.NewJSONHandler(env.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Now:       env.clock.Now,
	})
	require.NoError(t, err)
	env.h = h
	checkLifeBugs(t, h)
	return env
}

type capError string

func (e capError) Error() string { return string(e) }

const errCapPoolLoad = capError("pool not found")

// capVM is a VM owned by the test hatchery for jobID, powered on.
func capVM(name, jobID string, cpus, memMB int32) inventory.VM {
	return inventory.VM{
		Name: name, NumCPU: cpus, MemoryMB: memMB,
		PowerState: vctypes.PoweredOn,
		Annotation: &inventory.Annotation{HatcheryName: capHatcheryName, WorkerName: name, JobID: jobID},
	}
}

// capV2 is a V2 model on image "debian12" with an optional job flavor.
func capV2(jobFlavor string) sdk.WorkerStarterWorkerModel {
	return sdk.WorkerStarterWorkerModel{
		ModelV2:     &sdk.V2WorkerModel{Name: "debian12-generic", Type: sdk.VSphere},
		VSphereSpec: sdk.V2WorkerModelVSphereSpec{Image: "debian12"},
		JobFlavor:   jobFlavor,
	}
}

// capCode is the refusal code a capacity decision line with detail carries
// under the reason key: nil for an allowing decision (no code).
func capCode(detail string) any {
	switch detail {
	case capacity.DetailPoolCPU, capacity.DetailCPULimit, capacity.DetailCPUStarvation:
		return "capacity-cpu"
	case capacity.DetailPoolMemory, capacity.DetailMemoryLimit, capacity.DetailMemoryStarvation:
		return "capacity-memory"
	}
	return nil
}
