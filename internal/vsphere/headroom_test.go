package vsphere

import (
	"context"
	"fmt"
	"testing"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/stretchr/testify/require"
)

// TestFlavorHeadroomMatchesCanAllocateResources: the headroom of a flavor
// is exactly how many consecutive CanAllocateResources calls succeed.
func TestFlavorHeadroomMatchesCanAllocateResources(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		cfg     config.Config
		used    []inventory.VM
		poolMB  int64
		inFlite []string // flavors reserved before measuring
	}{
		{name: "static cpu with one large in flight", cfg: config.Config{MaxCPUs: 16}, inFlite: []string{"large"}},
		{name: "static both with starvation reserve", cfg: config.Config{MaxCPUs: 40, MaxMemoryMB: 70000, CountSmallerFlavorToKeep: 2}, used: capUsedVMs(2, 4, 8192)},
		{name: "pool memory binds", cfg: config.Config{MaxCPUs: 64}, poolMB: 50000, inFlite: []string{"small", "medium"}},
	}
	ctx := context.Background()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, f := range capFlavors() {
				cfg := tc.cfg
				cfg.Flavors = capFlavors()
				env := newCapEnv(t, cfg)
				env.inv.Set(tc.used...)
				if tc.poolMB > 0 {
					env.pool.set(tc.poolMB, 1000)
				}
				for i, name := range tc.inFlite {
					ok, err := env.h.CanAllocateResources(ctx, capV2(name), fmt.Sprintf("pre-%d", i), nil)
					require.NoError(t, err)
					require.True(t, ok)
				}
				hr, err := env.h.FlavorHeadroom(ctx)
				require.NoError(t, err)
				n := 0
				for {
					ok, err := env.h.CanAllocateResources(ctx, capV2(f.Name), fmt.Sprintf("job-%d", n), nil)
					require.NoError(t, err)
					if !ok {
						break
					}
					n++
					require.Less(t, n, 1000)
				}
				require.Equal(t, n, hr[f.Name], "flavor %s", f.Name)
			}
		})
	}
}

func TestStatusLines(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		u    CapacityUsage
		want map[string][2]string // component → status, value
	}{
		{name: "limits and readable pool",
			u: CapacityUsage{CPUs: 12, MemoryMB: 24576, MaxCPUs: 16, MaxMemoryMB: 65536, InFlight: 1, InFlightCPUs: 8, InFlightMemoryMB: 16384,
				PoolReadable: true, PoolUnreservedMemoryBytes: 40960 << 20, PoolUnreservedCPUMHz: 4121},
			want: map[string][2]string{
				"vsphere/capacity/vcpus":         {sdk.MonitoringStatusOK, "12/16"},
				"vsphere/capacity/memory":        {sdk.MonitoringStatusOK, "24576 MB/65536 MB"},
				"vsphere/capacity/resource-pool": {sdk.MonitoringStatusOK, "readable: 40960 MB memory and 4121 MHz cpu unreserved for VMs"},
				"vsphere/capacity/in-flight":     {sdk.MonitoringStatusOK, "1 spawns reserving 8 vCPUs, 16384 MB"},
			}},
		{name: "unlimited, over nothing, pool unreadable",
			u: CapacityUsage{CPUs: 4, MemoryMB: 4096, PoolError: "read resource pool: boom"},
			want: map[string][2]string{
				"vsphere/capacity/vcpus":         {sdk.MonitoringStatusOK, "4/unlimited"},
				"vsphere/capacity/memory":        {sdk.MonitoringStatusOK, "4096 MB/unlimited"},
				"vsphere/capacity/resource-pool": {sdk.MonitoringStatusWarn, "unreadable: static limits only: read resource pool: boom"},
				"vsphere/capacity/in-flight":     {sdk.MonitoringStatusOK, "0 spawns reserving 0 vCPUs, 0 MB"},
			}},
		{name: "over the static limit warns",
			u: CapacityUsage{CPUs: 20, MaxCPUs: 16, PoolReadable: true, PoolUnreservedCPUMHz: 1},
			want: map[string][2]string{
				"vsphere/capacity/vcpus": {sdk.MonitoringStatusWarn, "20/16"},
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lines := capacityStatusLines(tc.u)
			for comp, w := range tc.want {
				l := capLine(t, lines, comp)
				require.Equal(t, w[0], l.Status, comp)
				require.Equal(t, w[1], l.Value, comp)
			}
		})
	}
}

func TestStatusThroughHatchery(t *testing.T) {
	t.Parallel()
	env := newCapEnv(t, config.Config{MaxCPUs: 16, MaxMemoryMB: 32768, Flavors: capFlavors()})
	env.inv.Set(capVM("w1", "j0", 2, 4096))
	env.pool.set(10240, 500)
	ok, err := env.h.CanAllocateResources(context.Background(), capV2("medium"), "j1", nil)
	require.NoError(t, err)
	require.True(t, ok)
	lines := env.h.Status(context.Background())
	require.Equal(t, "6/16", capLine(t, lines, "vsphere/capacity/vcpus").Value)
	require.Equal(t, "12288 MB/32768 MB", capLine(t, lines, "vsphere/capacity/memory").Value)
	require.Equal(t, "1 spawns reserving 4 vCPUs, 8192 MB", capLine(t, lines, "vsphere/capacity/in-flight").Value)
	require.Equal(t, sdk.MonitoringStatusOK, capLine(t, lines, "vsphere/capacity/resource-pool").Status)

	env.inv.SetErr(capError("down"))
	lines = env.h.Status(context.Background())
	require.Len(t, lines, 1)
	require.Equal(t, sdk.MonitoringStatusWarn, lines[0].Status)
}
