package vsphere

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/capacity"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"
)

// holdConfig turns the debug hold on: n VMs held at most, for 10 minutes.
func holdConfig(n int) *config.Config {
	cfg := spIPConfig()
	cfg.KeepFailedWorkers, cfg.KeepFailedWorkersFor = n, 600
	return cfg
}

// heldAt is a VM of ours held until until (a failed spawn of job).
func heldAt(name, job string, until time.Time) inventory.VM {
	return inventory.VM{
		Ref: spRef("VirtualMachine", "vm-"+name), Name: name, PowerState: vctypes.PoweredOn,
		NumCPU: 2, MemoryMB: 4096,
		Annotation: &inventory.Annotation{HatcheryName: spHatchery, WorkerName: name, JobID: job, HeldUntil: &until, HeldReason: "wait for guest operations ready"},
	}
}

// failGuestReady makes the fresh clone's guest never ready; it returns the
// spec the hold writes on the VM, filled when the spawn returns.
func failGuestReady(f *spFixture, written *types.VirtualMachineConfigSpec) {
	vm := f.expectClone("debian12", "worker-v2-1", nil)
	f.vs.EXPECT().WaitForGuestOperationsReady(gomock.Any(), vm).Return(context.DeadlineExceeded)
	f.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), vcenter.MORef(vm), gomock.Any()).
		DoAndReturn(func(_ context.Context, _ types.ManagedObjectReference, s types.VirtualMachineConfigSpec) error {
			*written = s
			return nil
		})
	// No ShutdownVirtualMachine: the strict mock fails the test if the
	// held VM is powered off.
}

// TestSpawnFailureHoldsTheVM: with keepFailedWorkers set, a spawn whose
// guest never becomes ready leaves its VM powered on, annotated as held
// with the failed step, in the held phase, not marked; the job is still
// failed, its IP reservation released (the annotation keeps the address).
func TestSpawnFailureHoldsTheVM(t *testing.T) {
	t.Parallel()
	f := newSpFixture(t, holdConfig(2))
	f.inv.Add(inventory.VM{Name: "debian12", Template: true})
	var written types.VirtualMachineConfigSpec
	failGuestReady(f, &written)

	err := f.h.SpawnWorker(context.Background(), spV2Args())

	require.ErrorIs(t, err, context.DeadlineExceeded)
	annot, perr := inventory.AnnotationFromVM(written.Annotation, vcenter.OptionsOf(written.ExtraConfig))
	require.NoError(t, perr)
	require.True(t, annot.Held())
	assert.Equal(t, f.clock.Now().Add(10*time.Minute), *annot.HeldUntil)
	assert.Equal(t, "wait for guest operations ready", annot.HeldReason)
	assert.Equal(t, "run-1", annot.JobID)
	assert.NotContains(t, written.Annotation, spSecret)
	assert.NotContains(t, written.Annotation, "jwt-token")
	assert.Equal(t, lifecycle.Held, f.h.life.Phase("worker-v2-1"))
	assert.False(t, isMarked(f.h, "worker-v2-1"))
	used, _ := f.h.ips.Counts(nil)
	assert.Zero(t, used, "ip reservation released")

	held := f.h.HeldWorkers(context.Background())
	require.Len(t, held, 1, "listed for /mon/workers from the table while the snapshot lags")
	assert.Equal(t, "worker-v2-1", held[0].Name)
}

// TestSpawnFailureNotHeldByDefault: keepFailedWorkers = 0 (the default)
// powers the VM off and marks it for deletion, as before the hold existed.
func TestSpawnFailureNotHeldByDefault(t *testing.T) {
	t.Parallel()
	cfg := spIPConfig()
	require.Equal(t, config.DefaultKeepFailedWorkers, cfg.KeepFailedWorkers)
	require.Zero(t, config.Default().KeepFailedWorkers, "off by default")
	f := newSpFixture(t, cfg)
	f.inv.Add(inventory.VM{Name: "debian12", Template: true})
	vm := f.expectClone("debian12", "worker-v2-1", nil)
	f.vs.EXPECT().WaitForGuestOperationsReady(gomock.Any(), vm).Return(context.DeadlineExceeded)
	f.vs.EXPECT().ShutdownVirtualMachine(gomock.Any(), vm).Return(nil)

	require.Error(t, f.h.SpawnWorker(context.Background(), spV2Args()))
	assert.True(t, isMarked(f.h, "worker-v2-1"))
	assert.Empty(t, f.h.HeldWorkers(context.Background()))
}

// TestHoldEvictsTheOldest: at most keepFailedWorkers VMs are held; a new
// hold releases (marks for deletion) the oldest, here known only from its
// annotation (an earlier run's hold). A foreign VM whose record looks held
// is neither counted nor marked.
func TestHoldEvictsTheOldest(t *testing.T) {
	t.Parallel()
	f := newSpFixture(t, holdConfig(2))
	now := f.clock.Now()
	f.inv.Add(inventory.VM{Name: "debian12", Template: true})
	f.inv.Add(heldAt("old-1", "run-a", now.Add(time.Minute)))
	f.inv.Add(heldAt("old-2", "run-b", now.Add(5*time.Minute)))
	foreign := heldAt("foreign", "run-c", now.Add(-time.Hour))
	foreign.Annotation.HatcheryName = "other-hatchery"
	f.inv.Add(foreign)
	var written types.VirtualMachineConfigSpec
	failGuestReady(f, &written)

	require.Error(t, f.h.SpawnWorker(context.Background(), spV2Args()))

	assert.Equal(t, []string{"old-1"}, markedNames(f.h), "only the oldest hold is released")
	assert.Equal(t, lifecycle.Held, f.h.life.Phase("worker-v2-1"))
	var names []string
	for _, w := range f.h.HeldWorkers(context.Background()) {
		names = append(names, w.Name)
	}
	assert.Equal(t, []string{"old-2", "worker-v2-1"}, names, "two held, oldest first; never the foreign vm")
}

// TestHoldNotWrittenDeletesTheVM: a hold that cannot be written on the VM
// (its record is the truth) is no hold: the VM is powered off and marked.
func TestHoldNotWrittenDeletesTheVM(t *testing.T) {
	t.Parallel()
	f := newSpFixture(t, holdConfig(1))
	f.inv.Add(inventory.VM{Name: "debian12", Template: true})
	vm := f.expectClone("debian12", "worker-v2-1", nil)
	f.vs.EXPECT().WaitForGuestOperationsReady(gomock.Any(), vm).Return(context.DeadlineExceeded)
	f.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), vcenter.MORef(vm), gomock.Any()).Return(context.DeadlineExceeded)
	f.vs.EXPECT().ShutdownVirtualMachine(gomock.Any(), vm).Return(nil)

	require.Error(t, f.h.SpawnWorker(context.Background(), spV2Args()))
	assert.True(t, isMarked(f.h, "worker-v2-1"))
}

// TestHeldVMCountsInCapacity: a held VM's CPU and memory count in the
// usage; its job does not (a new spawn of the job reserves its own), and
// the job is not refused as "already served".
func TestHeldVMCountsInCapacity(t *testing.T) {
	t.Parallel()
	f := newSpFixture(t, holdConfig(1))
	held := heldAt("w-held", "run-1", f.clock.Now().Add(time.Minute))
	u := capacity.Count(f.h.admission().VMUsages([]inventory.VM{held}))
	assert.Equal(t, int64(2), u.CPUs)
	assert.Equal(t, int64(4096), u.MemoryMB)
	assert.Equal(t, 1, u.VMs)
	assert.False(t, u.Keys["run-1"], "the held vm no longer serves its job")
	_, serves := inventory.IndexOf(nil, []inventory.VM{held}).Jobs["run-1"]
	assert.False(t, serves)
}

// heldGauge scrapes held_vm_count from m.
func heldGauge(t *testing.T, m *metrics.Metrics) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/mon/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	for _, l := range strings.Split(rec.Body.String(), "\n") {
		if strings.HasPrefix(l, "cds_hatchery_vsphere_held_vm_count{") {
			v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
			require.NoError(t, err)
			return v
		}
	}
	t.Fatal("held_vm_count not exported")
	return 0
}

// TestHoldExpiresOnTime: the hold of this run is kept by the cleanup until
// its end (fake clock), even while a lagging snapshot shows the VM without
// its hold, and deleted from then on; held_vm_count follows (0 before any
// hold, 1 while held, 0 once the expired entry's VM is gone).
func TestHoldExpiresOnTime(t *testing.T) {
	t.Parallel()
	f := newSpFixture(t, holdConfig(1))
	m, err := metrics.New("hold-expiry-test")
	require.NoError(t, err)
	f.h.metrics = m
	assert.Zero(t, heldGauge(t, m), "exported at 0 before any hold")
	f.inv.Add(inventory.VM{Name: "debian12", Template: true})
	var written types.VirtualMachineConfigSpec
	failGuestReady(f, &written)
	require.Error(t, f.h.SpawnWorker(context.Background(), spV2Args()))
	assert.Equal(t, float64(1), heldGauge(t, m))

	lagging := inventory.VM{
		Ref: spNewRef, Name: "worker-v2-1", PowerState: vctypes.PoweredOn,
		Annotation: &inventory.Annotation{HatcheryName: spHatchery, WorkerName: "worker-v2-1", JobID: "run-1", Created: f.clock.Now()},
	}
	f.clock.Advance(10*time.Minute - time.Second)
	v, ok := f.h.holdVerdict(lagging)
	require.True(t, ok)
	assert.False(t, v.del, "kept until its end: %s", v.reason)
	f.clock.Advance(time.Second)
	v, ok = f.h.holdVerdict(lagging)
	require.True(t, ok)
	assert.True(t, v.del, "deleted once expired: %s", v.reason)

	f.h.tendHolds(nil) // expired, and no listing shows it any more
	assert.Equal(t, lifecycle.Gone, f.h.life.Phase("worker-v2-1"))
	assert.Zero(t, heldGauge(t, m))
}
