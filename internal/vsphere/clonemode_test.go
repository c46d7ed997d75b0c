package vsphere

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/clonespec"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
)

// TestPrepareCloneSpecCloneModes: through the mock client, a template with
// a current snapshot gives a linked clone spec; one without keeps today's
// mode (moveChildMostDiskBacking, no snapshot) and says so once for two
// clones; a disk-growing flavor gives a full clone with the reason logged
// at each clone.
func TestPrepareCloneSpecCloneModes(t *testing.T) {
	t.Parallel()
	f := newSpFixture(t, spConfig())
	var logs testutil.SyncBuffer
	f.h.log = slog.New(slog.NewTextHandler(&logs, nil))
	f.h.pool.Log = f.h.log
	snap := vim.MORef(spRef("VirtualMachineSnapshot", "snapshot-7"))
	linked := spRef("VirtualMachine", "vm-linked")
	plain := spRef("VirtualMachine", "vm-plain")
	// Each request reads its template (the adapter keeps the read:
	// vcenter's TestCloneRequestOnVcsim).
	f.vs.EXPECT().LoadTemplate(gomock.Any(), linked).Return(spTemplateMO(spDevices(1), &snap), nil).Times(2)
	f.vs.EXPECT().LoadTemplate(gomock.Any(), plain).Return(spTemplateMO(spDevices(1), nil), nil).Times(2)
	f.vs.EXPECT().LoadResourcePool(gomock.Any()).Return(spPoolRef, nil).AnyTimes()
	f.vs.EXPECT().LoadDatastore(gomock.Any(), "LocalDS_0").Return(spDSRef, nil).AnyTimes()
	ctx := context.Background()
	annot := func(n string) *inventory.Annotation {
		return &inventory.Annotation{HatcheryName: spHatchery, WorkerName: n}
	}

	req, err := f.h.clones.Request(ctx, f.h.log, clonespec.Template{Ref: linked, Name: linked.Value}, annot("w1"), nil, nil)
	require.NoError(t, err)
	spec := spSpec(t, req, 1)
	assert.Equal(t, string(types.VirtualMachineRelocateDiskMoveOptionsCreateNewChildDiskBacking), spec.Location.DiskMoveType)
	require.NotNil(t, spec.Snapshot)
	assert.Equal(t, snap, *spec.Snapshot)

	big := &config.Flavor{Name: "large", CPUs: 4, MemoryMB: 8192, DiskSizeGB: 50}
	req, err = f.h.clones.Request(ctx, f.h.log, clonespec.Template{Ref: linked, Name: linked.Value}, annot("w2"), big, nil)
	require.NoError(t, err)
	spec = spSpec(t, req, 1)
	assert.Equal(t, string(types.VirtualMachineRelocateDiskMoveOptionsMoveChildMostDiskBacking), spec.Location.DiskMoveType)
	assert.Nil(t, spec.Snapshot)
	grown := false
	for _, c := range spec.Config.DeviceChange {
		if d, ok := c.GetVirtualDeviceConfigSpec().Device.(*types.VirtualDisk); ok && d.CapacityInBytes == 50<<30 {
			grown = true
		}
	}
	assert.True(t, grown, "the full clone grows the disk")

	for _, n := range []string{"w3", "w4"} {
		req, err = f.h.clones.Request(ctx, f.h.log, clonespec.Template{Ref: plain, Name: plain.Value}, annot(n), nil, nil)
		require.NoError(t, err)
		spec = spSpec(t, req, 1)
		assert.Equal(t, string(types.VirtualMachineRelocateDiskMoveOptionsMoveChildMostDiskBacking), spec.Location.DiskMoveType)
		assert.Nil(t, spec.Snapshot)
	}

	out := logs.String()
	assert.Equal(t, 1, strings.Count(out, `detail="template has no snapshot`), "no-snapshot mode logged once per template:\n%s", out)
	assert.Equal(t, 1, strings.Count(out, `detail="flavor \"large\" grows the disk`), out)
	assert.Contains(t, out, "vm=w2")
	assert.NotContains(t, out, "level=WARN")
}
