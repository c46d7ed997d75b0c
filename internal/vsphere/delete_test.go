package vsphere

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/custody"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/ippool"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient/cdsclienttest"
	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/task"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// TestDeleteServer covers the power-off, destroy and mark bookkeeping.
func TestDeleteServer(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	// The port's errors come classified (vcenter.Classify), as the
	// adapter's do.
	invalidPower := vcenter.Classify(task.Error{LocalizedMethodFault: &types.LocalizedMethodFault{
		Fault: &types.InvalidPowerState{ExistingState: types.VirtualMachinePowerStatePoweredOn},
	}})
	// Two instances clean up one finished VM: the second's power off finds
	// it destroyed (docs/high-availability.md).
	gone := vcenter.Classify(fmt.Errorf("read power state of %q: %w", "w-1", soap.WrapSoapFault(&soap.Fault{
		String: "The object has already been deleted or has not been completely created",
		Detail: struct {
			Fault types.AnyType `xml:",any,typeattr"`
		}{Fault: &types.ManagedObjectNotFound{}}})))
	cases := []struct {
		name       string
		vm         inventory.VM
		setup      func(e *warmEnv)
		wantErr    string
		stayMarked bool
	}{
		{"powered on: off then destroy", warmVM("w-1"), func(e *warmEnv) {
			gomock.InOrder(
				e.vs.EXPECT().ShutdownVirtualMachine(gomock.Any(), warmRefIs("w-1")).Return(nil),
				e.vs.EXPECT().DestroyVirtualMachine(gomock.Any(), warmRefIs("w-1")).Return(nil),
			)
		}, "", false},
		{"powered off: destroy only", warmVM("w-1", wOff), func(e *warmEnv) {
			e.vs.EXPECT().DestroyVirtualMachine(gomock.Any(), warmRefIs("w-1")).Return(nil)
		}, "", false},
		{"stale power state: invalid power state, off, destroy again", warmVM("w-1", wOff), func(e *warmEnv) {
			gomock.InOrder(
				e.vs.EXPECT().DestroyVirtualMachine(gomock.Any(), warmRefIs("w-1")).Return(invalidPower),
				e.vs.EXPECT().ShutdownVirtualMachine(gomock.Any(), warmRefIs("w-1")).Return(nil),
				e.vs.EXPECT().DestroyVirtualMachine(gomock.Any(), warmRefIs("w-1")).Return(nil),
			)
		}, "", false},
		{"gone already (the other instance destroyed it): done", warmVM("w-1"), func(e *warmEnv) {
			gomock.InOrder(
				e.vs.EXPECT().ShutdownVirtualMachine(gomock.Any(), warmRefIs("w-1")).Return(gone),
				// vcenter.Client's destroy answers a gone VM with success
				e.vs.EXPECT().DestroyVirtualMachine(gomock.Any(), warmRefIs("w-1")).Return(nil),
			)
		}, "", false},
		{"power off fails: stays marked", warmVM("w-1"), func(e *warmEnv) {
			e.vs.EXPECT().ShutdownVirtualMachine(gomock.Any(), warmRefIs("w-1")).Return(boom)
		}, `delete vm "w-1": power off: boom`, true},
		{"destroy fails: stays marked", warmVM("w-1", wOff), func(e *warmEnv) {
			e.vs.EXPECT().DestroyVirtualMachine(gomock.Any(), warmRefIs("w-1")).Return(boom)
		}, `delete vm "w-1": destroy: boom`, true},
		{"our model template being replaced may go", warmVM("m1", wOff, wTemplate, wAnnot(func(a *inventory.Annotation) { a.Model = true })), func(e *warmEnv) {
			e.vs.EXPECT().DestroyVirtualMachine(gomock.Any(), warmRefIs("m1")).Return(nil)
		}, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newWarmEnv(t, warmConfig(), []inventory.VM{tc.vm}, nil)
			tc.setup(e)
			err := e.h.deleteServer(context.Background(), tc.vm, custody.StopRunning)
			if tc.wantErr != "" {
				require.EqualError(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.stayMarked, isMarked(e.h, tc.vm.Name))
			assert.Positive(t, e.inv.Invalidations())
		})
	}
}

// TestDeleteServerInProgress: a VM being deleted by one loop is not deleted
// again by another at the same time.
func TestDeleteServerInProgress(t *testing.T) {
	t.Parallel()
	vm := warmVM("w-1", wOff)
	e := newWarmEnv(t, warmConfig(), []inventory.VM{vm}, nil)
	inDestroy := make(chan struct{})
	finish := make(chan struct{})
	e.vs.EXPECT().DestroyVirtualMachine(gomock.Any(), warmRefIs("w-1")).DoAndReturn(func(context.Context, interface{}) error {
		close(inDestroy)
		<-finish
		return nil
	})
	done := make(chan error)
	go func() { done <- e.h.deleteServer(context.Background(), vm, custody.StopRunning) }()
	<-inDestroy
	err := e.h.deleteServer(context.Background(), vm, custody.StopRunning)
	require.ErrorIs(t, err, custody.ErrDeleteInProgress)
	close(finish)
	require.NoError(t, <-done)
}

// TestDeleteServerRegistrationReport: deleting a register- VM reports a
// spawn error when the model still needs registration, not otherwise.
func TestDeleteServerRegistrationReport(t *testing.T) {
	t.Parallel()
	created := warmNow.Add(-time.Hour)
	cases := []struct {
		name  string
		model sdk.Model
		want  []string
	}{
		{"still needs registration", sdk.Model{Name: "m1", Group: &sdk.Group{Name: "grp"}, NeedRegistration: true, LastRegistration: created.Add(time.Minute)},
			[]string{"grp/m1: worker model grp/m1: registration vm register-m1-x was deleted before the registration ended"}},
		{"last registered before the vm", sdk.Model{Name: "m1", Group: &sdk.Group{Name: "grp"}, LastRegistration: created.Add(-time.Minute)},
			[]string{"grp/m1: worker model grp/m1: registration vm register-m1-x was deleted before the registration ended"}},
		{"registered since", sdk.Model{Name: "m1", Group: &sdk.Group{Name: "grp"}, LastRegistration: created.Add(time.Minute)}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			vm := warmVM("register-m1-x", wOff, wAnnot(func(a *inventory.Annotation) {
				a.RegisterOnly = true
				a.WorkerModelPath = "grp/m1"
				a.Created = created
			}))
			cds := &cdsclienttest.Fake{Models: []sdk.Model{tc.model}}
			e := newWarmEnv(t, warmConfig(), []inventory.VM{vm}, cds)
			e.vs.EXPECT().DestroyVirtualMachine(gomock.Any(), warmRefIs("register-m1-x")).Return(nil)
			require.NoError(t, e.h.deleteServer(context.Background(), vm, custody.StopRunning))
			assert.Equal(t, tc.want, cds.SpawnErrors())
		})
	}
}

// TestDeleteServerStaleSecondDeletionKeepsANewReservation: a snapshot
// older than a VM's destruction makes a loop delete it again (vCenter says
// "gone", a success). The address it held may already be reserved by a new
// spawn: that reservation must survive (the soak test once saw two workers
// launched on one IP this way).
func TestDeleteServerStaleSecondDeletionKeepsANewReservation(t *testing.T) {
	t.Parallel()
	cfg := warmConfig()
	cfg.IPRange = "10.0.0.15/32" // one address
	old := warmVM("w-old", wOff, wAnnot(func(a *inventory.Annotation) { a.IPAddress = "10.0.0.15" }))
	e := newWarmEnv(t, cfg, []inventory.VM{old}, nil)
	e.vs.EXPECT().DestroyVirtualMachine(gomock.Any(), warmRefIs("w-old")).Return(nil).Times(2)

	_, err := e.h.ips.Reserve(context.Background(), inventory.UsedBy([]inventory.VM{old}), "w-old")
	require.ErrorIs(t, err, ippool.ErrNoIPAvailable, "the old vm holds the only address")
	require.NoError(t, e.h.deleteServer(context.Background(), old, custody.StopRunning))
	lease, err := e.h.ips.Reserve(context.Background(), nil, "w-new")
	require.NoError(t, err, "the address is free once the vm is destroyed")
	require.Equal(t, "10.0.0.15", lease.IP)

	require.NoError(t, e.h.deleteServer(context.Background(), old, custody.StopRunning), "deleting a vm already gone succeeds")
	_, err = e.h.ips.Reserve(context.Background(), nil, "w-third")
	require.ErrorIs(t, err, ippool.ErrNoIPAvailable, "w-new keeps its reservation")
}

// TestDeleteServerLeavesAVMAnotherLoopIsWorkingOn: a VM being cloned,
// provisioned, claimed or prepared belongs to the loop doing it; a deletion
// started from a stale verdict is refused without a vCenter call and the
// VM keeps its phase.
func TestDeleteServerLeavesAVMAnotherLoopIsWorkingOn(t *testing.T) {
	t.Parallel()
	for _, p := range []lifecycle.Phase{lifecycle.Cloning, lifecycle.Provisioning, lifecycle.Claimed, lifecycle.Preparing} {
		t.Run(p.String(), func(t *testing.T) {
			t.Parallel()
			vm := warmVM("w-1", wOff)
			e := newWarmEnv(t, warmConfig(), []inventory.VM{vm}, nil) // no vCenter call expected
			putPhase(e.h, vm.Name, p)
			err := e.h.deleteServer(context.Background(), vm, custody.StopRunning)
			require.ErrorIs(t, err, lifecycle.ErrWrongPhase)
			assert.NotErrorIs(t, err, custody.ErrDeleteInProgress)
			assert.Equal(t, p, e.h.life.Phase(vm.Name))
		})
	}
}

// TestDestroyedVMLeavesWhenNoListingShowsIt: a VM this run destroyed stays
// "destroyed" while a listing still shows its reference (a snapshot older
// than the destroy), and is forgotten once none does, even when a new VM
// took its name.
func TestDestroyedVMLeavesWhenNoListingShowsIt(t *testing.T) {
	t.Parallel()
	vm := warmVM("mymodel", wOff)
	e := newWarmEnv(t, warmConfig(), []inventory.VM{vm}, nil)
	e.vs.EXPECT().DestroyVirtualMachine(gomock.Any(), warmRefIs("mymodel")).Return(nil)
	require.NoError(t, e.h.deleteServer(context.Background(), vm, custody.StopRunning))
	require.Equal(t, lifecycle.Destroyed, e.h.life.Phase("mymodel"))
	assert.Equal(t, awolKeep("destroyed, the inventory lags"), e.h.awolVerdict(context.Background(), vm, apiWorkers{}))

	e.h.dropAbsentDeleteMarks([]inventory.VM{vm}) // stale: still listed
	assert.Equal(t, lifecycle.Destroyed, e.h.life.Phase("mymodel"))

	renamed := vm
	renamed.Ref = warmRef("mymodel-tmp") // another VM now bears the name
	e.h.dropAbsentDeleteMarks([]inventory.VM{renamed})
	assert.Equal(t, lifecycle.Gone, e.h.life.Phase("mymodel"))
}
