package vsphere

import (
	"context"
	"github.com/cds-contrib/hatchery-vsphere/internal/capacity"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// Status feeds heartbeats and /mon/status: it must answer without reaching
// vCenter (the fixture's mock is strict: any call fails the test), showing
// the last resource pool reading.
func TestStatusReachesNoVCenter(t *testing.T) {
	t.Parallel()
	f := newSpFixture(t, spConfig())
	f.inv.vms = []inventory.VM{{Name: "worker-1", Annotation: &inventory.Annotation{HatcheryName: spHatchery}}}

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

	f.h.capacity.mu.Lock()
	f.h.capacity.lastPool = capacity.Pool{Read: true, Readable: true, UnreservedMemoryBytes: 2048 << 20, UnreservedCPUMHz: 1000}
	f.h.capacity.mu.Unlock()
	l = pool(f.h.Status(context.Background()))
	require.Contains(t, l.Value, "2048 MB memory")
}
