package vsphere

import (
	"context"
	"testing"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// Status feeds heartbeats and /mon/status: it must answer without reaching
// vCenter (the fixture's mock is strict: any call fails the test), showing
// the last resource pool reading.
func TestStatusReachesNoVCenter(t *testing.T) {
	t.Parallel()
	f := newSpFixture(t, spConfig())
	f.inv.Set([]inventory.VM{{Name: "worker-1", Annotation: &inventory.Annotation{HatcheryName: spHatchery}}}...)

	pool := func(lines []sdk.MonitoringStatusLine) sdk.MonitoringStatusLine {
		for _, l := range lines {
			if l.Component == "vsphere/capacity/resource-pool" {
				return l
			}
		}
		t.Fatalf("no resource pool line in %v", lines)
		return sdk.MonitoringStatusLine{}
	}
	l := pool(f.h.Status(context.Background()))
	require.Equal(t, "not read yet", l.Value)
	require.Equal(t, sdk.MonitoringStatusOK, l.Status)

	// A capacity read takes a reading (once); Status shows it without
	// another round trip.
	f.vs.EXPECT().LoadResourcePool(gomock.Any()).Return(spPoolRef, nil)
	f.vs.EXPECT().ResourcePoolRuntime(gomock.Any(), spPoolRef).Return(&vctypes.PoolRuntime{
		MemoryUnreservedBytes: 2048 << 20, CPUUnreservedMHz: 1000,
	}, nil)
	_, err := f.h.CapacityUsage(context.Background())
	require.NoError(t, err)
	l = pool(f.h.Status(context.Background()))
	require.Contains(t, l.Value, "2048 MB memory")
}
