package clonespec

import (
	"context"
	"errors"
	"testing"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/cloudinit"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/ippool"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
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
	specTemplate = Template{Ref: vctypes.Ref{Type: "VirtualMachine", Value: "vm-tmpl"}, Name: "debian12"}
	specPool     = vctypes.Ref{Type: "ResourcePool", Value: "resgroup-1"}
	specPoolB    = vctypes.Ref{Type: "ResourcePool", Value: "resgroup-b"}
	specDS       = vctypes.Ref{Type: "Datastore", Value: "datastore-1"}
	specDSB      = vctypes.Ref{Type: "Datastore", Value: "datastore-b"}
	specSnapshot = vctypes.Ref{Type: "VirtualMachineSnapshot", Value: "snapshot-1"}
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

// templateOn is the template read: a 10 GB disk on datastore ds, nics
// network cards and, with snap, a current snapshot.
func templateOn(ds vctypes.Ref, nics int, snap bool) vctypes.Template {
	t := vctypes.Template{Ref: specTemplate.Ref, NICs: nics, Disks: []vctypes.Disk{{CapacityBytes: 10 << 30, Datastore: ds}}}
	if snap {
		t.CurrentSnapshot = specSnapshot
		t.Snapshots = []vctypes.Snapshot{{Name: "base", Ref: specSnapshot}}
	}
	return t
}

// expectReads expects the reads of one request: the template, the pool
// (the configured one when poolPath is "", else the one at poolPath) and
// the datastore dsName.
func (e *specEnv) expectReads(tpl vctypes.Template, poolPath, dsName string, pool, ds vctypes.Ref) {
	e.vs.EXPECT().LoadTemplate(gomock.Any(), specTemplate.Ref).Return(tpl, nil)
	if poolPath == "" {
		e.vs.EXPECT().LoadResourcePool(gomock.Any()).Return(pool, nil)
	} else {
		e.vs.EXPECT().ResourcePoolAt(gomock.Any(), poolPath).Return(pool, nil)
	}
	e.vs.EXPECT().LoadDatastore(gomock.Any(), dsName).Return(ds, nil)
}

// TestSpecAtPlacement: a clone sent to a placement goes to its pool,
// datastore and network; it is linked only when the template's disks are
// on that datastore, else full (docs/placements.md, "Linked clones").
func TestSpecAtPlacement(t *testing.T) {
	t.Parallel()
	at := &Location{Placement: "b", ResourcePool: "/dc/host/cluster-b", Datastore: "ds-b", Network: "net-b"}
	cases := []struct {
		name     string
		disksOn  vctypes.Ref
		wantSnap vctypes.Ref
	}{
		{"disks on the placement's datastore: linked", specDSB, specSnapshot},
		{"disks elsewhere: full", specDS, vctypes.Ref{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newSpecEnv(t, specConfig())
			e.expectReads(templateOn(tc.disksOn, 1, true), "/dc/host/cluster-b", "ds-b", specPoolB, specDSB)
			annot := &inventory.Annotation{HatcheryName: testutil.Hatchery, WorkerName: "w-1", Placement: "b"}
			req, err := e.b.RequestAt(context.Background(), testutil.DiscardLogger(), specTemplate, annot, nil, nil, at)
			require.NoError(t, err)
			assert.Equal(t, specTemplate.Ref, req.Template)
			assert.Equal(t, specPoolB, req.Pool)
			assert.Equal(t, specDSB, req.Datastore)
			assert.Equal(t, &vctypes.CloneNetwork{Name: "net-b", CardType: "vmxnet3"}, req.Network, "the first card on the placement's network")
			assert.Equal(t, tc.wantSnap, req.Snapshot, "linked on the snapshot, or full")
			got, err := inventory.AnnotationFromVM(req.Record.Notes, nil)
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
		name       string
		snap       bool
		flavor     *config.Flavor
		wantLinked bool
	}{
		{"snapshot: linked", true, nil, true},
		{"no snapshot: full", false, nil, false},
		{"flavor grows the disk: full", true, big, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newSpecEnv(t, specConfig())
			e.expectReads(templateOn(specDS, 1, tc.snap), "", "LocalDS_0", specPool, specDS)
			req, err := e.b.Request(context.Background(), testutil.DiscardLogger(), specTemplate,
				&inventory.Annotation{HatcheryName: testutil.Hatchery, WorkerName: "w-1"}, tc.flavor, nil)
			require.NoError(t, err)
			assert.Equal(t, tc.wantLinked, !req.Snapshot.IsZero(), "a linked clone names the snapshot")
			if tc.wantLinked {
				assert.Equal(t, specSnapshot, req.Snapshot)
			}
			assert.Equal(t, specPool, req.Pool)
			assert.Equal(t, specDS, req.Datastore)
			assert.Equal(t, &vctypes.CloneNetwork{Name: "VM Network", CardType: "vmxnet3"}, req.Network)
			assert.True(t, req.PowerOn)
			if tc.flavor != nil {
				assert.Equal(t, &vctypes.Growth{Flavor: "large", CPUs: 8, MemoryMB: 16384, DiskSizeGB: 80}, req.Growth,
					"the flavor's size, the disk grown by the adapter")
			} else {
				assert.Nil(t, req.Growth, "the template's size")
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
	e.expectReads(templateOn(specDS, 1, false), "", "LocalDS_0", specPool, specDS)
	annot := &inventory.Annotation{HatcheryName: testutil.Hatchery, WorkerName: "Worker_1", IPAddress: "10.0.0.11"}
	req, err := e.b.Request(context.Background(), testutil.DiscardLogger(), specTemplate, annot, nil, &cloudinit.Boot{Script: "echo hello"})
	require.NoError(t, err)
	assert.Nil(t, req.Customization)

	gi := cloudinit.Guestinfo(req.Options)
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
	_, err = inventory.AnnotationFromVM("", req.Record.Options)
	assert.NoError(t, err, "the record's mirror goes beside the guestinfo (the adapter writes both, vim.CloneSpecOf)")
}

// TestSpecWindows: a Windows model's clone is customized by sysprep with
// its computer name; the request has no place for a password
// (docs/windows.md; the adapter's sysprep: vim.CustomizationSpecOf).
func TestSpecWindows(t *testing.T) {
	t.Parallel()
	e := newSpecEnv(t, specConfig())
	e.expectReads(templateOn(specDS, 1, false), "", "LocalDS_0", specPool, specDS)
	annot := &inventory.Annotation{HatcheryName: testutil.Hatchery, WorkerName: "worker-windows-with-a-long-name", VMwareModelPath: "win2022"}
	req, err := e.b.Request(context.Background(), testutil.DiscardLogger(), specTemplate, annot, nil, nil)
	require.NoError(t, err)
	require.NotNil(t, req.Customization)
	assert.True(t, req.Customization.Windows, "sysprep, not the Linux prep")
	assert.Equal(t, WindowsComputerName(annot.WorkerName), req.Customization.Name)
	assert.LessOrEqual(t, len(req.Customization.Name), 15, "a NetBIOS name")
	assert.Len(t, req.Customization.NICs, 1, "one address per card")
}

// TestSpecRefusals: a request that cannot be right is an error naming
// what is wrong, and nothing is cloned: no record, no network card, an
// address in no range, a name that gives no hostname, a pool or datastore
// that cannot be found.
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
			e.expectReads(templateOn(specDS, 1, false), "", "LocalDS_0", specPool, specDS)
		}, `ip 192.168.1.1 of vm "w" is in no configured range`},
		{"no hostname", &inventory.Annotation{WorkerName: "___"}, func(e *specEnv) {
			e.expectReads(templateOn(specDS, 1, false), "", "LocalDS_0", specPool, specDS)
		}, `worker name "___" gives no valid hostname`},
		{"pool", &inventory.Annotation{WorkerName: "w"}, func(e *specEnv) {
			e.vs.EXPECT().LoadTemplate(gomock.Any(), specTemplate.Ref).Return(templateOn(specDS, 1, false), nil)
			e.vs.EXPECT().LoadResourcePool(gomock.Any()).Return(vctypes.Ref{}, boom)
		}, "load resource pool"},
		{"datastore", &inventory.Annotation{WorkerName: "w"}, func(e *specEnv) {
			e.vs.EXPECT().LoadTemplate(gomock.Any(), specTemplate.Ref).Return(templateOn(specDS, 1, false), nil)
			e.vs.EXPECT().LoadResourcePool(gomock.Any()).Return(specPool, nil)
			e.vs.EXPECT().LoadDatastore(gomock.Any(), "LocalDS_0").Return(vctypes.Ref{}, boom)
		}, `load datastore "LocalDS_0"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newSpecEnv(t, specConfig())
			tc.expect(e)
			req, err := e.b.Request(context.Background(), testutil.DiscardLogger(), specTemplate, tc.annot, nil, nil)
			require.Error(t, err)
			assert.Zero(t, req)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
