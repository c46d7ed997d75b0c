package vsphere

import (
	"context"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/capacity"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/internal/modelref"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/internal/warmpool"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"
)

// wIdle records a hot idle state on a pool VM and puts the VM in the power
// state that state waits in.
func wIdle(state string) vmOpt {
	return func(v *inventory.VM) {
		v.Annotation.IdleState = state
		v.PowerState = vctypes.PowerState(warmpool.IdlePowerState(v.Annotation))
	}
}

// TestClaimOrCloneHotCheckFails: the first hot VM resumes but its guest
// never gets ready: it is powered off and marked, not renamed; the spawn
// takes the next hot VM, which passes the check and is renamed and
// annotated by one reconfigure (no rename task) without a resize. The job gets its worker.
func TestClaimOrCloneHotCheckFails(t *testing.T) {
	FaultsShortenReadiness(t, 200*time.Millisecond)
	large := &config.Flavor{Name: "large", CPUs: 4, MemoryMB: 8192}
	bad := warmProvVM("warmpool-v2-bad", "debian12", "large", wIdle(config.IdleStateSuspended), wCreated(2*time.Hour),
		wAnnot(func(a *inventory.Annotation) { a.IPAddress = "10.0.0.5" }))
	good := warmProvVM("warmpool-v2-good", "debian12", "large", wIdle(config.IdleStateSuspended), wCreated(time.Hour),
		wAnnot(func(a *inventory.Annotation) { a.IPAddress = "10.0.0.6" }))
	e := newWarmEnv(t, warmConfig(), []inventory.VM{bad, good}, nil)

	var written inventory.Annotation
	gomock.InOrder(
		e.vs.EXPECT().StartVirtualMachine(gomock.Any(), warmRefIs("warmpool-v2-bad")).Return(nil),
		e.vs.EXPECT().WaitForGuestOperationsReady(gomock.Any(), warmRefIs("warmpool-v2-bad")).Return(context.DeadlineExceeded),
		e.vs.EXPECT().ShutdownVirtualMachine(gomock.Any(), warmRefIs("warmpool-v2-bad")).Return(nil),
		e.vs.EXPECT().StartVirtualMachine(gomock.Any(), warmRefIs("warmpool-v2-good")).Return(nil),
		e.vs.EXPECT().WaitForGuestOperationsReady(gomock.Any(), warmRefIs("warmpool-v2-good")).Return(nil),
		e.vs.EXPECT().WaitForVirtualMachineIP(gomock.Any(), warmRefIs("warmpool-v2-good"), "10.0.0.6").Return("10.0.0.6", nil),
		e.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), warmRefIs("warmpool-v2-good"), gomock.Any()).
			DoAndReturn(func(_ context.Context, _ types.ManagedObjectReference, spec types.VirtualMachineConfigSpec) error {
				assert.Equal(t, "worker-1", spec.Name, "renamed by the reconfigure that writes the record")
				assert.Zero(t, spec.NumCPUs, "a hot vm is never resized")
				a, err := inventory.ParseAnnotation(spec.Annotation)
				require.NoError(t, err)
				written = *a
				return nil
			}),
	)
	annot := inventory.Annotation{HatcheryName: warmHatcheryName, WorkerName: "worker-1", JobID: "42", VMwareModelPath: "debian12", Flavor: "large"}
	args := spawn.Arguments{WorkerName: "worker-1", JobID: "42", Model: v2Model("debian12")}
	ref, err := e.h.claimOrClone(context.Background(), args, modelref.Template{Name: "debian12"}, &annot, large, nil, cloneTo{})
	require.NoError(t, err)
	assert.Equal(t, "vm-warmpool-v2-good", ref.Value)
	assert.True(t, e.h.life.In("warmpool-v2-bad", lifecycle.Marked), "the vm that failed its check is marked for deletion")
	assert.True(t, e.h.life.In("worker-1", lifecycle.Preparing))
	assert.Equal(t, "10.0.0.6", written.IPAddress)
	assert.Empty(t, written.IdleState, "a worker's record is no pool record")
	assert.False(t, written.Provisioning)
	assert.Equal(t, "42", written.JobID)
}

// TestProvisionHotSuspended: a suspended pool's VM is booted, waits for
// guest operations and its IP, records its idle state and IP, then is
// suspended (never powered off).
func TestProvisionHotSuspended(t *testing.T) {
	t.Parallel()
	cfg := warmConfig()
	cfg.WorkerProvisioning = []config.WorkerProvisioning{{ModelVMWare: "debian12", Number: 1, Flavor: "large", IdleState: config.IdleStateSuspended}}
	e := newWarmEnv(t, cfg, []inventory.VM{warmTpl("debian12")}, nil)
	ref := vctypes.Ref{Type: "VirtualMachine", Value: "vm-new"}
	e.h.pool.Clone = poolClone(func(_ context.Context, _ modelref.Template, _ string, _ *inventory.Annotation, _ *config.Flavor) (vctypes.Ref, error) {
		return ref, nil
	})
	var written *inventory.Annotation
	gomock.InOrder(
		e.vs.EXPECT().WaitForVirtualMachineIP(gomock.Any(), ref, "").Return("10.0.0.9", nil),
		e.vs.EXPECT().WaitForGuestOperationsReady(gomock.Any(), ref).Return(nil),
		e.vs.EXPECT().WaitForVirtualMachineIP(gomock.Any(), ref, "").Return("10.0.0.9", nil),
		e.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), vcenter.MORef(ref), gomock.Any()).
			DoAndReturn(func(_ context.Context, _ types.ManagedObjectReference, spec types.VirtualMachineConfigSpec) error {
				a, err := inventory.ParseAnnotation(spec.Annotation)
				require.NoError(t, err)
				written = a
				return nil
			}),
		e.vs.EXPECT().SuspendVirtualMachine(gomock.Any(), ref).Return(nil),
	)
	e.h.pool.Provision(context.Background())
	require.NotNil(t, written)
	assert.Equal(t, config.IdleStateSuspended, written.IdleState)
	assert.Equal(t, "10.0.0.9", written.IPAddress)
	assert.True(t, written.Provisioning)
}

// TestAwolHotPoolVMs: the cleanup keeps a hot pool VM in its recorded state
// and removes one found in another (a suspended-pool VM powered off).
func TestAwolHotPoolVMs(t *testing.T) {
	t.Parallel()
	e := newWarmEnv(t, warmConfig(), nil, nil)
	healthy := warmProvVM("warmpool-v2-ok", "debian12", "large", wIdle(config.IdleStateSuspended))
	running := warmProvVM("warmpool-v2-run", "debian12", "large", wIdle(config.IdleStatePoweredOn))
	broken := warmProvVM("warmpool-v2-broken", "debian12", "large", wAnnot(func(a *inventory.Annotation) { a.IdleState = config.IdleStateSuspended }))
	for _, v := range []inventory.VM{healthy, running} {
		assert.False(t, e.h.awolVerdict(context.Background(), v, apiWorkers{}).del, v.Name)
	}
	v := e.h.awolVerdict(context.Background(), broken, apiWorkers{})
	assert.True(t, v.del)
	assert.Contains(t, v.reason, "broken hot pool vm")
}

// TestCapacityCountsHotIdleVMs: a running idle pool VM uses CPU and RAM and
// counts against maxCpus/maxMemoryMB; a suspended one does not.
func TestCapacityCountsHotIdleVMs(t *testing.T) {
	t.Parallel()
	e := newWarmEnv(t, warmConfig(), nil, nil)
	sized := func(v *inventory.VM) { v.NumCPU, v.MemoryMB = 4, 8192 }
	vms := []inventory.VM{
		warmProvVM("warmpool-v2-run", "debian12", "large", wIdle(config.IdleStatePoweredOn), sized),
		warmProvVM("warmpool-v2-susp", "debian12", "large", wIdle(config.IdleStateSuspended), sized),
		warmProvVM("warmpool-v2-off", "debian12", "large", sized),
	}
	u := capacity.Count(e.h.admission().VMUsages(vms))
	assert.Equal(t, int64(4), u.CPUs)
	assert.Equal(t, int64(8192), u.MemoryMB)
	assert.Equal(t, 1, u.VMs)
}
