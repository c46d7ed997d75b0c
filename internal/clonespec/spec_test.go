package clonespec

import (
	"context"
	"errors"
	"testing"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/cloudinit"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/ippool"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/mock_vsphere"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
)

// The clone specification's tests: a Builder on a strict gomock port
// (mock_vsphere), the spec it builds read back. The rules are
// docs/flavors-and-capacity.md ("Clone mode"), docs/placements.md ("Where
// the clone goes", "Linked clones"), docs/cloud-init.md and
// docs/windows.md.

var (
	specTemplate = Template{Ref: types.ManagedObjectReference{Type: "VirtualMachine", Value: "vm-tmpl"}, Name: "debian12"}
	specPool     = types.ManagedObjectReference{Type: "ResourcePool", Value: "resgroup-1"}
	specPoolB    = types.ManagedObjectReference{Type: "ResourcePool", Value: "resgroup-b"}
	specDS       = types.ManagedObjectReference{Type: "Datastore", Value: "datastore-1"}
	specDSB      = types.ManagedObjectReference{Type: "Datastore", Value: "datastore-b"}
	specSnapshot = types.ManagedObjectReference{Type: "VirtualMachineSnapshot", Value: "snapshot-1"}
)

// specConfig is a hatchery on LocalDS_0 and "VM Network", with a static
// range 10.0.0.10/29 and a Windows model "win2022".
func specConfig() *config.Config {
	return &config.Config{
		CommonConfiguration: hatchery.CommonConfiguration{Name: testutil.Hatchery},
		DatastoreString:     "LocalDS_0",
		NetworkString:       "VM Network",
		CardName:            "vmxnet3",
		IPRange:             "10.0.0.10/29", Gateway: "10.0.0.1", SubnetMask: "255.255.255.0", DNS: "10.0.0.2",
		Models: []config.GuestCredential{{ModelVMWare: "win2022", OS: config.OSWindows}},
	}
}

// specEnv is a Builder on a strict mock port.
type specEnv struct {
	b  *Builder
	vs *mock_vsphere.MockPort
}

func newSpecEnv(t *testing.T, cfg *config.Config) *specEnv {
	t.Helper()
	ips, err := ippool.New(cfg)
	require.NoError(t, err)
	vs := mock_vsphere.NewMockPort(gomock.NewController(t))
	return &specEnv{vs: vs, b: New(Options{Port: vs, Config: cfg, IPs: ips, Now: testutil.FixedNow})}
}

// templateOn is the template read: its devices (a disk on datastore ds,
// nics network cards) and, with snap, a current snapshot.
func templateOn(ds types.ManagedObjectReference, nics int, snap bool) mo.VirtualMachine {
	devices := testutil.TemplateDevices(nics)
	for _, d := range devices.SelectByType((*types.VirtualDisk)(nil)) {
		d.(*types.VirtualDisk).Backing = &types.VirtualDiskFlatVer2BackingInfo{
			VirtualDeviceFileBackingInfo: types.VirtualDeviceFileBackingInfo{FileName: "[ds] debian12/debian12.vmdk", Datastore: &ds},
		}
	}
	o := mo.VirtualMachine{Config: &types.VirtualMachineConfigInfo{Hardware: types.VirtualHardware{Device: devices}}}
	if snap {
		o.Snapshot = &types.VirtualMachineSnapshotInfo{
			CurrentSnapshot:  &specSnapshot,
			RootSnapshotList: []types.VirtualMachineSnapshotTree{{Name: "base", Snapshot: specSnapshot}},
		}
	}
	return o
}

// expectReads expects the reads of one spec: the template, its first NIC
// pointed at network, the pool (the configured one when poolPath is "",
// else the one at poolPath) and the datastore dsName.
func (e *specEnv) expectReads(tpl mo.VirtualMachine, network, poolPath, dsName string, pool, ds types.ManagedObjectReference) {
	e.vs.EXPECT().LoadTemplate(gomock.Any(), specTemplate.Ref).Return(tpl, nil)
	e.vs.EXPECT().SetupEthernetCard(gomock.Any(), gomock.Any(), "vmxnet3", network).Return(nil)
	if poolPath == "" {
		e.vs.EXPECT().LoadResourcePool(gomock.Any()).Return(vcenter.RefOf(pool), nil)
	} else {
		e.vs.EXPECT().ResourcePoolAt(gomock.Any(), poolPath).Return(vcenter.RefOf(pool), nil)
	}
	e.vs.EXPECT().LoadDatastore(gomock.Any(), dsName).Return(vcenter.RefOf(ds), nil)
}

// TestSpecAtPlacement: a clone sent to a placement goes to its pool,
// datastore and network; it is linked only when the template's disks are
// on that datastore, else full (docs/placements.md, "Linked clones").
func TestSpecAtPlacement(t *testing.T) {
	t.Parallel()
	at := &Location{Placement: "b", ResourcePool: "/dc/host/cluster-b", Datastore: "ds-b", Network: "net-b"}
	cases := []struct {
		name     string
		disksOn  types.ManagedObjectReference
		wantMove types.VirtualMachineRelocateDiskMoveOptions
		wantSnap *types.ManagedObjectReference
	}{
		{"disks on the placement's datastore: linked", specDSB, types.VirtualMachineRelocateDiskMoveOptionsCreateNewChildDiskBacking, &specSnapshot},
		{"disks elsewhere: full", specDS, types.VirtualMachineRelocateDiskMoveOptionsMoveChildMostDiskBacking, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newSpecEnv(t, specConfig())
			e.expectReads(templateOn(tc.disksOn, 1, true), "net-b", "/dc/host/cluster-b", "ds-b", specPoolB, specDSB)
			annot := &inventory.Annotation{HatcheryName: testutil.Hatchery, WorkerName: "w-1", Placement: "b"}
			spec, err := e.b.SpecAt(context.Background(), testutil.DiscardLogger(), specTemplate, annot, nil, nil, at)
			require.NoError(t, err)
			assert.Equal(t, specPoolB, *spec.Location.Pool)
			assert.Equal(t, specDSB, *spec.Location.Datastore)
			assert.Equal(t, string(tc.wantMove), spec.Location.DiskMoveType)
			assert.Equal(t, tc.wantSnap, spec.Snapshot)
			got, err := inventory.AnnotationFromVM(spec.Config.Annotation, nil)
			require.NoError(t, err)
			assert.Equal(t, "b", got.Placement, "the record says where it went")
		})
	}
}

// TestSpecCloneMode: without a placement, a template with a snapshot is
// cloned linked, without one full, and a flavor growing the disk makes
// the clone full and sized (docs/flavors-and-capacity.md, "Clone mode").
func TestSpecCloneMode(t *testing.T) {
	t.Parallel()
	big := &config.Flavor{Name: "large", CPUs: 8, MemoryMB: 16384, DiskSizeGB: 80}
	cases := []struct {
		name     string
		snap     bool
		flavor   *config.Flavor
		wantMove types.VirtualMachineRelocateDiskMoveOptions
	}{
		{"snapshot: linked", true, nil, types.VirtualMachineRelocateDiskMoveOptionsCreateNewChildDiskBacking},
		{"no snapshot: full", false, nil, types.VirtualMachineRelocateDiskMoveOptionsMoveChildMostDiskBacking},
		{"flavor grows the disk: full", true, big, types.VirtualMachineRelocateDiskMoveOptionsMoveChildMostDiskBacking},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newSpecEnv(t, specConfig())
			e.expectReads(templateOn(specDS, 1, tc.snap), "VM Network", "", "LocalDS_0", specPool, specDS)
			spec, err := e.b.Spec(context.Background(), testutil.DiscardLogger(), specTemplate,
				&inventory.Annotation{HatcheryName: testutil.Hatchery, WorkerName: "w-1"}, tc.flavor, nil)
			require.NoError(t, err)
			assert.Equal(t, string(tc.wantMove), spec.Location.DiskMoveType)
			assert.Equal(t, tc.wantMove == types.VirtualMachineRelocateDiskMoveOptionsCreateNewChildDiskBacking, spec.Snapshot != nil,
				"a linked clone names the snapshot")
			if tc.flavor != nil {
				assert.Equal(t, tc.flavor.CPUs, spec.Config.NumCPUs)
				assert.Equal(t, tc.flavor.MemoryMB, spec.Config.MemoryMB)
				assert.Len(t, spec.Config.DeviceChange, 2, "the NIC edit and the disk grown")
			}
		})
	}
}

// TestSpecCloudInit: a clone booted by cloud-init carries no guest
// customization (it would race cloud-init) but the guestinfo: a new
// instance id, the hostname and the static address in the metadata, the
// userdata (docs/cloud-init.md).
func TestSpecCloudInit(t *testing.T) {
	t.Parallel()
	e := newSpecEnv(t, specConfig())
	e.expectReads(templateOn(specDS, 1, false), "VM Network", "", "LocalDS_0", specPool, specDS)
	annot := &inventory.Annotation{HatcheryName: testutil.Hatchery, WorkerName: "Worker_1", IPAddress: "10.0.0.11"}
	spec, err := e.b.Spec(context.Background(), testutil.DiscardLogger(), specTemplate, annot, nil, &cloudinit.Boot{Script: "echo hello"})
	require.NoError(t, err)
	assert.Nil(t, spec.Customization)

	gi := cloudinit.Guestinfo(vcenter.OptionsOf(spec.Config.ExtraConfig))
	raw, err := cloudinit.DecodeGuestinfo(gi[cloudinit.GuestinfoMetadata], gi[cloudinit.GuestinfoMetadataEncoding])
	require.NoError(t, err)
	md, err := cloudinit.ParseMetadata(raw)
	require.NoError(t, err)
	assert.Equal(t, "worker-1", md.LocalHostname)
	assert.Contains(t, md.InstanceID, "Worker_1-", "the VM's name and the time: new for every worker")
	require.NotNil(t, md.Network)
	var addrs []string
	for _, eth := range md.Network.Ethernets {
		addrs = append(addrs, eth.Addresses...)
		assert.False(t, eth.DHCP4)
	}
	assert.Equal(t, []string{"10.0.0.11/24"}, addrs)
	raw, err = cloudinit.DecodeGuestinfo(gi[cloudinit.GuestinfoUserdata], gi[cloudinit.GuestinfoUserdataEncoding])
	require.NoError(t, err)
	testutil.CheckCloudConfig(t, raw)
	assert.Contains(t, string(raw), "echo hello")
	_, err = inventory.AnnotationFromVM("", vcenter.OptionsOf(spec.Config.ExtraConfig))
	assert.NoError(t, err, "the record's mirror stays beside the guestinfo")
}

// TestSpecWindows: a Windows model's clone is customized by sysprep with
// its computer name and a new SID, and carries no password
// (docs/windows.md).
func TestSpecWindows(t *testing.T) {
	t.Parallel()
	e := newSpecEnv(t, specConfig())
	e.expectReads(templateOn(specDS, 1, false), "VM Network", "", "LocalDS_0", specPool, specDS)
	annot := &inventory.Annotation{HatcheryName: testutil.Hatchery, WorkerName: "worker-windows-with-a-long-name", VMwareModelPath: "win2022"}
	spec, err := e.b.Spec(context.Background(), testutil.DiscardLogger(), specTemplate, annot, nil, nil)
	require.NoError(t, err)
	sp, ok := spec.Customization.Identity.(*types.CustomizationSysprep)
	require.True(t, ok, "sysprep, not the Linux prep")
	name := sp.UserData.ComputerName.(*types.CustomizationFixedName).Name
	assert.Equal(t, WindowsComputerName(annot.WorkerName), name)
	assert.LessOrEqual(t, len(name), 15, "a NetBIOS name")
	assert.Nil(t, sp.GuiUnattended.Password, "no secret in the spec")
	require.NotNil(t, spec.Customization.Options)
	assert.True(t, spec.Customization.Options.(*types.CustomizationWinOptions).ChangeSID)
}

// TestSpecRefusals: a spec that cannot be right is an error naming what
// is wrong, and nothing is cloned: no record, no network card, an address
// in no range, a name that gives no hostname, a pool or datastore that
// cannot be found.
func TestSpecRefusals(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	cases := []struct {
		name   string
		annot  *inventory.Annotation
		expect func(e *specEnv)
		want   string
	}{
		{"no record", nil, func(*specEnv) {}, "no annotation"},
		{"no network card", &inventory.Annotation{WorkerName: "w"}, func(e *specEnv) {
			e.vs.EXPECT().LoadTemplate(gomock.Any(), specTemplate.Ref).Return(templateOn(specDS, 0, false), nil)
		}, `template "debian12" has no network card`},
		{"address in no range", &inventory.Annotation{WorkerName: "w", IPAddress: "192.168.1.1"}, func(e *specEnv) {
			e.expectReads(templateOn(specDS, 1, false), "VM Network", "", "LocalDS_0", specPool, specDS)
		}, `ip 192.168.1.1 of vm "w" is in no configured range`},
		{"no hostname", &inventory.Annotation{WorkerName: "___"}, func(e *specEnv) {
			e.expectReads(templateOn(specDS, 1, false), "VM Network", "", "LocalDS_0", specPool, specDS)
		}, `worker name "___" gives no valid hostname`},
		{"pool", &inventory.Annotation{WorkerName: "w"}, func(e *specEnv) {
			e.vs.EXPECT().LoadTemplate(gomock.Any(), specTemplate.Ref).Return(templateOn(specDS, 1, false), nil)
			e.vs.EXPECT().SetupEthernetCard(gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any()).Return(nil)
			e.vs.EXPECT().LoadResourcePool(gomock.Any()).Return(vctypes.Ref{}, boom)
		}, "load resource pool"},
		{"datastore", &inventory.Annotation{WorkerName: "w"}, func(e *specEnv) {
			e.vs.EXPECT().LoadTemplate(gomock.Any(), specTemplate.Ref).Return(templateOn(specDS, 1, false), nil)
			e.vs.EXPECT().SetupEthernetCard(gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any()).Return(nil)
			e.vs.EXPECT().LoadResourcePool(gomock.Any()).Return(vcenter.RefOf(specPool), nil)
			e.vs.EXPECT().LoadDatastore(gomock.Any(), "LocalDS_0").Return(vctypes.Ref{}, boom)
		}, `load datastore "LocalDS_0"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newSpecEnv(t, specConfig())
			tc.expect(e)
			spec, err := e.b.Spec(context.Background(), testutil.DiscardLogger(), specTemplate, tc.annot, nil, nil)
			require.Error(t, err)
			assert.Nil(t, spec)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestTemplateReadOnceUntilForgotten: a template's devices and snapshots
// are read once for many specs, and again once Forget drops them (a clone
// from it failed).
func TestTemplateReadOnceUntilForgotten(t *testing.T) {
	t.Parallel()
	e := newSpecEnv(t, specConfig())
	e.vs.EXPECT().LoadTemplate(gomock.Any(), specTemplate.Ref).Return(templateOn(specDS, 1, false), nil).Times(2)
	e.vs.EXPECT().SetupEthernetCard(gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any()).Return(nil).Times(3)
	e.vs.EXPECT().LoadResourcePool(gomock.Any()).Return(vcenter.RefOf(specPool), nil).Times(3)
	e.vs.EXPECT().LoadDatastore(gomock.Any(), gomock.Any()).Return(vcenter.RefOf(specDS), nil).Times(3)
	for i, forget := range []bool{false, true, false} {
		_, err := e.b.Spec(context.Background(), testutil.DiscardLogger(), specTemplate, &inventory.Annotation{WorkerName: "w"}, nil, nil)
		require.NoError(t, err, "spec %d", i)
		if forget {
			e.b.Forget(specTemplate.Ref)
		}
	}
}

// TestVMPortReconfigure: a Change becomes one reconfigure carrying its
// compare-and-swap version, the new name, the record and its mirror, the
// flavor (after reading the VM's devices) and the cloud-init guestinfo;
// a Change that cannot be built sends nothing (*PrepError).
func TestVMPortReconfigure(t *testing.T) {
	t.Parallel()
	vm := testutil.VMRef("w-1")
	ctx := context.Background()
	large := &config.Flavor{Name: "large", CPUs: 4, MemoryMB: 8192}

	e := newSpecEnv(t, specConfig())
	port := VMPort{Port: e.vs, Builder: e.b}
	var got types.VirtualMachineConfigSpec
	gomock.InOrder(
		e.vs.EXPECT().LoadVirtualMachineDevices(gomock.Any(), types.ManagedObjectReference{Type: "VirtualMachine", Value: "vm-w-1"}).
			Return(object.VirtualDeviceList(testutil.TemplateDevices(1)), nil),
		e.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), types.ManagedObjectReference{Type: "VirtualMachine", Value: "vm-w-1"}, gomock.Any()).
			DoAndReturn(func(_ context.Context, _ types.ManagedObjectReference, s types.VirtualMachineConfigSpec) error {
				got = s
				return nil
			}),
	)
	rec := &inventory.Annotation{HatcheryName: testutil.Hatchery, WorkerName: "worker-1", JobID: "42", IPAddress: "10.0.0.12"}
	require.NoError(t, port.ReconfigureVirtualMachine(ctx, vm, Change{ChangeVersion: "cv-7", Name: "worker-1", Record: rec, Resize: large, Boot: &cloudinit.Boot{Script: "run"}}))
	assert.Equal(t, "cv-7", got.ChangeVersion)
	assert.Equal(t, "worker-1", got.Name)
	assert.Equal(t, int32(4), got.NumCPUs)
	assert.Equal(t, int64(8192), got.MemoryMB)
	a, err := inventory.AnnotationFromVM(got.Annotation, nil)
	require.NoError(t, err)
	assert.Equal(t, *rec, *a)
	gi := cloudinit.Guestinfo(vcenter.OptionsOf(got.ExtraConfig))
	raw, err := cloudinit.DecodeGuestinfo(gi[cloudinit.GuestinfoMetadata], gi[cloudinit.GuestinfoMetadataEncoding])
	require.NoError(t, err)
	md, err := cloudinit.ParseMetadata(raw)
	require.NoError(t, err)
	assert.Equal(t, "worker-1", md.LocalHostname, "the new name's hostname")

	// Nothing sent when the change cannot be built.
	e = newSpecEnv(t, specConfig())
	port = VMPort{Port: e.vs}
	var prep *PrepError
	err = port.ReconfigureVirtualMachine(ctx, vm, Change{Boot: &cloudinit.Boot{}})
	require.True(t, errors.As(err, &prep), "%v", err)
	assert.Equal(t, "cloud-init guestinfo", prep.Step)
	e.vs.EXPECT().LoadVirtualMachineDevices(gomock.Any(), gomock.Any()).Return(nil, errors.New("boom"))
	err = port.ReconfigureVirtualMachine(ctx, vm, Change{Resize: large})
	require.True(t, errors.As(err, &prep), "%v", err)
	assert.Equal(t, "load devices", prep.Step)
	assert.Contains(t, err.Error(), "boom")
	port = VMPort{Port: e.vs, Builder: e.b}
	err = port.ReconfigureVirtualMachine(ctx, vm, Change{Name: "w", Record: &inventory.Annotation{IPAddress: "192.168.9.9"}, Boot: &cloudinit.Boot{}})
	require.True(t, errors.As(err, &prep), "%v", err)
	assert.Contains(t, err.Error(), "is in no configured range")
}

// TestVMPortRecordAndScrub: the record is written in the Notes and their
// mirror in one reconfigure; the scrub empties every guestinfo key of the
// userdata.
func TestVMPortRecordAndScrub(t *testing.T) {
	t.Parallel()
	e := newSpecEnv(t, specConfig())
	port := VMPort{Port: e.vs}
	var specs []types.VirtualMachineConfigSpec
	e.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), types.ManagedObjectReference{Type: "VirtualMachine", Value: "vm-w-1"}, gomock.Any()).
		DoAndReturn(func(_ context.Context, _ types.ManagedObjectReference, s types.VirtualMachineConfigSpec) error {
			specs = append(specs, s)
			return nil
		}).Times(2)
	rec := &inventory.Annotation{HatcheryName: testutil.Hatchery, WorkerName: "w-1", IdleState: config.IdleStateSuspended}
	require.NoError(t, port.WriteRecord(context.Background(), testutil.VMRef("w-1"), rec))
	require.NoError(t, port.ScrubUserdata(context.Background(), testutil.VMRef("w-1")))
	require.Len(t, specs, 2)
	notes, err := inventory.AnnotationFromVM(specs[0].Annotation, nil)
	require.NoError(t, err)
	mirror, err := inventory.AnnotationFromVM("", vcenter.OptionsOf(specs[0].ExtraConfig))
	require.NoError(t, err)
	assert.Equal(t, *rec, *notes)
	assert.Equal(t, *rec, *mirror)
	assert.Equal(t, types.VirtualMachineConfigSpec{ExtraConfig: vcenter.OptionValues(cloudinit.ScrubOptions())}, specs[1])
	assert.NotEmpty(t, specs[1].ExtraConfig)
}
