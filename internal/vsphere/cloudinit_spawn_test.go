package vsphere

import (
	"context"
	"errors"
	"testing"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/cloudinit"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// spCloudInitArgs is spV2Args on a model without any guest account.
func spCloudInitArgs() spawn.Arguments {
	args := spV2Args()
	args.Model.VSphereSpec = sdk.V2WorkerModelVSphereSpec{Image: "debian12"}
	return args
}

// newCloudInitFixture is a hatchery whose models boot through cloud-init,
// with a static IP range and the template debian12, and a spawn on it.
func newCloudInitFixture(t *testing.T) (*spFixture, spawn.Arguments) {
	t.Helper()
	cfg := spIPConfig()
	cfg.DefaultBootstrap = config.BootstrapCloudInit
	f := newSpFixture(t, cfg)
	f.inv.Add(inventory.VM{Name: "debian12", Template: true})
	return f, spCloudInitArgs()
}

func optionValues(opts []types.BaseOptionValue) map[string]string {
	out := map[string]string{}
	for _, o := range opts {
		if ov := o.GetOptionValue(); ov != nil {
			out[ov.Key], _ = ov.Value.(string)
		}
	}
	return out
}

// TestSpawnCloudInitSuccess: a cloud-init spawn clones without a guest
// customization, with the guestinfo keys; readiness is the guest's IP; no
// guest operation, no guest credentials; the start is recorded.
func TestSpawnCloudInitSuccess(t *testing.T) {
	t.Parallel()
	f, args := newCloudInitFixture(t)

	tmpl := spRef("VirtualMachine", "vm-debian12")
	f.vs.EXPECT().LoadVirtualMachine(gomock.Any(), "debian12").Return(tmpl, nil)
	f.expectCloneSpecCalls(tmpl, 1)
	f.vs.EXPECT().LoadFolder(gomock.Any()).Return(spFolderRef, nil)
	var spec *types.VirtualMachineCloneSpec
	ref := spNewRef
	f.vs.EXPECT().CloneVirtualMachine(gomock.Any(), spClone{tmpl: tmpl, name: args.WorkerName}).
		DoAndReturn(func(_ context.Context, req vctypes.Clone) (vctypes.Ref, error) {
			spec = spSpec(t, req, 1)
			return ref, nil
		})
	vm := spNewRef
	var written vctypes.ConfigChange
	gomock.InOrder(
		f.vs.EXPECT().WaitForVirtualMachineIP(gomock.Any(), vm, "10.0.0.10").Return("10.0.0.10", nil),
		f.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), vm, gomock.Any()).
			DoAndReturn(func(_ context.Context, _ vctypes.Ref, s vctypes.ConfigChange) error {
				written = s
				return nil
			}),
	)

	require.NoError(t, f.h.SpawnWorker(context.Background(), args))
	require.NotNil(t, spec)
	assert.Nil(t, spec.Customization, "cloud-init configures the guest, no customization")
	opts := optionValues(spec.Config.ExtraConfig)
	for _, k := range []string{cloudinit.GuestinfoMetadata, cloudinit.GuestinfoUserdata} {
		assert.NotEmpty(t, opts[k], k)
		assert.Equal(t, cloudinit.GuestinfoEncodingGzipBase64, opts[k+".encoding"])
	}
	a, err := inventory.ParseAnnotation(writtenNotes(written))
	require.NoError(t, err)
	assert.NotNil(t, a.WorkerStarted)
	assert.NotContains(t, writtenNotes(written), "jwt-token")
	assert.Contains(t, f.h.custody.Userdata(), args.WorkerName, "token to remove once registered")
}

// TestSpawnCloudInitFailureRemovesUserdata: when the guest never reports
// its IP, the userdata (with the token) is removed before the VM is
// powered off and marked for deletion.
func TestSpawnCloudInitFailureRemovesUserdata(t *testing.T) {
	t.Parallel()
	f, args := newCloudInitFixture(t)
	vm := f.expectClone("debian12", args.WorkerName, nil)

	var scrub vctypes.ConfigChange
	gomock.InOrder(
		f.vs.EXPECT().WaitForVirtualMachineIP(gomock.Any(), vm, "10.0.0.10").Return("", context.DeadlineExceeded),
		f.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), vm, gomock.Any()).
			DoAndReturn(func(_ context.Context, _ vctypes.Ref, s vctypes.ConfigChange) error {
				scrub = s
				return nil
			}),
		f.vs.EXPECT().ShutdownVirtualMachine(gomock.Any(), vm).Return(nil),
	)

	err := f.h.SpawnWorker(context.Background(), args)
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.DeadlineExceeded))
	assert.Contains(t, err.Error(), "wait for ip")
	assert.NotContains(t, err.Error(), "jwt-token")
	opts := optionMap(writtenOptions(scrub))
	require.Contains(t, opts, cloudinit.GuestinfoUserdata)
	assert.Empty(t, opts[cloudinit.GuestinfoUserdata])
	assert.Empty(t, opts[cloudinit.GuestinfoUserdataEncoding])
	assert.True(t, isMarked(f.h, args.WorkerName))
	assert.Empty(t, f.h.custody.Userdata())
}

// TestPrepareClaimedVMCloudInitPowerOnFails: a claimed VM whose power on
// fails after the reconfigure wrote its userdata has the userdata removed
// before it is powered off and marked for deletion.
func TestPrepareClaimedVMCloudInitPowerOnFails(t *testing.T) {
	t.Parallel()
	vm := warmProvVM("warmpool-v2-c", "debian12", "")
	e := newWarmEnv(t, warmConfig(), []inventory.VM{vm}, nil)
	var written, scrub vctypes.ConfigChange
	gomock.InOrder(
		e.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), warmRefIs("warmpool-v2-c"), gomock.Any()).
			DoAndReturn(func(_ context.Context, _ vctypes.Ref, s vctypes.ConfigChange) error {
				written = s
				return nil
			}),
		e.vs.EXPECT().StartVirtualMachine(gomock.Any(), warmRefIs("warmpool-v2-c")).Return(errors.New("host busy")),
		e.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), warmRefIs("warmpool-v2-c"), gomock.Any()).
			DoAndReturn(func(_ context.Context, _ vctypes.Ref, s vctypes.ConfigChange) error {
				scrub = s
				return nil
			}),
		e.vs.EXPECT().ShutdownVirtualMachine(gomock.Any(), warmRefIs("warmpool-v2-c")).Return(nil),
	)
	boot := &cloudinit.Boot{Script: "./worker", CDSConfig: "Q0RTX0NPTkZJRw=="}
	putPhase(e.h, vm.Name, lifecycle.Claimed, lifecycle.WithRef(vm.Ref.Value)) // as the claim did
	_, err := e.h.pool.PrepareClaimed(context.Background(), &vm, inventory.Annotation{WorkerName: "worker-c", Created: warmNow}, nil, boot)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "power on")
	assert.Equal(t, "worker-c", written.Name, "the same reconfigure renames the vm")
	w := optionMap(writtenOptions(written))
	assert.NotEmpty(t, w[cloudinit.GuestinfoUserdata], "the claim wrote the userdata before power on")
	md, err := cloudinit.DecodeGuestinfo(w[cloudinit.GuestinfoMetadata], w[cloudinit.GuestinfoMetadataEncoding])
	require.NoError(t, err)
	meta, err := cloudinit.ParseMetadata(md)
	require.NoError(t, err)
	assert.Equal(t, "worker-c", meta.LocalHostname)
	s := optionMap(writtenOptions(scrub))
	require.Contains(t, s, cloudinit.GuestinfoUserdata)
	assert.Empty(t, s[cloudinit.GuestinfoUserdata])
	assert.True(t, isMarked(e.h, "worker-c"))
}

// TestSpawnCloudInitHeldVMHasNoUserdata: with the debug hold on, a
// cloud-init VM whose guest never reports its IP is held powered on, but
// its userdata (with the worker token) is removed from its guestinfo
// first, as on any failure; the hold's record carries no token.
func TestSpawnCloudInitHeldVMHasNoUserdata(t *testing.T) {
	t.Parallel()
	f, args := newCloudInitFixture(t)
	f.h.conf().KeepFailedWorkers, f.h.conf().KeepFailedWorkersFor = 1, 600
	vm := f.expectClone("debian12", args.WorkerName, nil)

	var scrub, hold vctypes.ConfigChange
	gomock.InOrder(
		f.vs.EXPECT().WaitForVirtualMachineIP(gomock.Any(), vm, "10.0.0.10").Return("", context.DeadlineExceeded),
		f.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), vm, gomock.Any()).
			DoAndReturn(func(_ context.Context, _ vctypes.Ref, s vctypes.ConfigChange) error {
				scrub = s
				return nil
			}),
		f.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), vm, gomock.Any()).
			DoAndReturn(func(_ context.Context, _ vctypes.Ref, s vctypes.ConfigChange) error {
				hold = s
				return nil
			}),
	)

	require.Error(t, f.h.SpawnWorker(context.Background(), args))
	opts := optionMap(writtenOptions(scrub))
	require.Contains(t, opts, cloudinit.GuestinfoUserdata)
	assert.Empty(t, opts[cloudinit.GuestinfoUserdata])
	a, err := inventory.ParseAnnotation(writtenNotes(hold))
	require.NoError(t, err)
	require.True(t, a.Held())
	assert.Equal(t, "wait for ip", a.HeldReason)
	assert.NotContains(t, writtenNotes(hold), "jwt-token")
	for _, o := range writtenOptions(hold) {
		assert.NotEqual(t, cloudinit.GuestinfoUserdata, o.Key, "the hold writes no userdata back")
	}
	assert.False(t, isMarked(f.h, args.WorkerName))
	assert.Empty(t, f.h.custody.Userdata())
}
