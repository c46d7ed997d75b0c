package vsphere

import (
	"fmt"
	"github.com/stretchr/testify/require"
	"testing"
	"time"

	"github.com/golang/mock/gomock"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory/inventorytest"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/mock_vsphere"
)

const spHatchery = "hatch-test"

// spConfig is a minimal configuration for the spawn-path tests.
func spConfig() *config.Config {
	cfg := &config.Config{
		NetworkString:   "VM Network",
		DatastoreString: "LocalDS_0",
		CardName:        "vmxnet3",
	}
	cfg.CommonConfiguration.Name = spHatchery
	return cfg
}

// spFixture is a hatchery over a strict gomock client.
type spFixture struct {
	h     *HatcheryVSphere
	vs    *mock_vsphere.MockPort
	inv   *inventorytest.Fixed
	clock *testutil.Clock
	// t is the test the fixture was made for (the clone expectations'
	// checks fail it).
	t *testing.T
}

func newSpFixture(t *testing.T, cfg *config.Config) *spFixture {
	t.Helper()
	ctrl := gomock.NewController(t)
	vs := mock_vsphere.NewMockPort(ctrl)
	expectIPLocks(vs, cfg)
	inv := inventorytest.New()
	clock := testutil.NewClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	h, err := New(Options{
		Config:    cfg,
		Client:    vs,
		Inventory: inv,
		Logger:    testutil.DiscardLogger(),
		Now:       clock.Now,
	})
	if err != nil {
		t.Fatalf("new hatchery: %v", err)
	}
	h.ips.SetClock(clock.Now)
	checkLifeBugs(t, h)
	return &spFixture{h: h, vs: vs, inv: inv, clock: clock, t: t}
}

// expectIPLocks lets a hatchery with static IPs take, list and delete its
// address locks (docs/high-availability.md, "Static IPs"): no other
// instance here, every lock is won. Without static IPs nothing is
// expected: the hatchery takes no lock.
func expectIPLocks(vs *mock_vsphere.MockPort, cfg *config.Config) {
	if cfg.IPRange == "" && len(cfg.Networks) == 0 {
		return
	}
	vs.EXPECT().CreateLock(gomock.Any(), gomock.Any()).Return(vctypes.Ref{Type: "Folder", Value: "group-lock"}, nil).AnyTimes()
	vs.EXPECT().ListLocks(gomock.Any(), gomock.Any()).Return(nil, nil).AnyTimes()
	vs.EXPECT().DeleteLock(gomock.Any(), gomock.Any()).Return(nil).AnyTimes()
}

func spRef(kind, id string) vctypes.Ref {
	return vctypes.Ref{Type: kind, Value: id}
}

// spDevices is a template's device list: a disk and nics vmxnet3 cards.
func spDevices(nics int) object.VirtualDeviceList { return testutil.TemplateDevices(nics) }

var (
	spPoolRef    = spRef("ResourcePool", "resgroup-1")
	spDSRef      = spRef("Datastore", "datastore-1")
	spFolderRef  = spRef("Folder", "group-v3")
	spWorkerBack = &types.VirtualEthernetCardNetworkBackingInfo{VirtualDeviceDeviceBackingInfo: types.VirtualDeviceDeviceBackingInfo{DeviceName: "VM Network"}}
)

// expectCloneSpecCalls sets the reads clonespec.Builder.Request makes for
// a template (its first card's network is the request's: spClone).
func (f *spFixture) expectCloneSpecCalls(tmpl vctypes.Ref, nics int) {
	f.vs.EXPECT().LoadTemplate(gomock.Any(), tmpl).Return(spTemplateMO(spDevices(nics), nil), nil)
	f.vs.EXPECT().LoadResourcePool(gomock.Any()).Return(spPoolRef, nil)
	f.vs.EXPECT().LoadDatastore(gomock.Any(), "LocalDS_0").Return(spDSRef, nil)
}

// spTemplateMO is what LoadTemplate reads of a template with devices and,
// when current is set, a snapshot of that reference named "base"
// (vim.TemplateOf, the adapter's reading).
func spTemplateMO(devices object.VirtualDeviceList, current *types.ManagedObjectReference) vctypes.Template {
	o := mo.VirtualMachine{Config: &types.VirtualMachineConfigInfo{Hardware: types.VirtualHardware{Device: devices}}}
	if current != nil {
		o.Snapshot = &types.VirtualMachineSnapshotInfo{
			CurrentSnapshot:  current,
			RootSnapshotList: []types.VirtualMachineSnapshotTree{{Name: "base", Snapshot: *current}},
		}
	}
	return vim.TemplateOf(types.ManagedObjectReference{}, o)
}

// spSpec is the adapter's clone specification of req for a template of
// nics cards (vim.CloneSpecOf, what CloneVirtualMachine sends): the
// tests read what the hatchery asked in the specification's fields.
func spSpec(t *testing.T, req vctypes.Clone, nics int) *types.VirtualMachineCloneSpec {
	t.Helper()
	spec, _, err := vim.CloneSpecOf(req, spDevices(nics))
	require.NoError(t, err)
	return spec
}

// spClone matches a clone request of template tmpl into folder (zero:
// any) under name ("": any), its first card moved to the configured
// network ("VM Network", a vmxnet3 card).
type spClone struct {
	tmpl, folder vctypes.Ref
	name         string
}

// Matches is gomock's test of a CloneVirtualMachine argument.
func (m spClone) Matches(x any) bool {
	req, ok := x.(vctypes.Clone)
	return ok && req.Template == m.tmpl && (m.folder.IsZero() || req.Folder == m.folder) && (m.name == "" || req.Name == m.name) &&
		req.Network != nil && *req.Network == vctypes.CloneNetwork{Name: "VM Network", CardType: "vmxnet3"}
}

// String says what spClone matches.
func (m spClone) String() string {
	return fmt.Sprintf("a clone of %s into %q named %q on VM Network", m.tmpl, m.folder.Value, m.name)
}
