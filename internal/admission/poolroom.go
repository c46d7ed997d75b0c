package admission

import (
	"context"

	"github.com/cds-contrib/hatchery-vsphere/internal/capacity"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/placement"
)

// PlacementRoom is how many more VMs of flavor (nil: a neutral clone,
// whose size is unknown here: only the placements' VM counts, tasks and
// datastores limit it) the placements have room for, summed over them
// (placement.Headroom; the figures as last read, FiguresTTL). -1 when no
// placements are configured or one of them limits nothing: a
// demand-driven warm pool then has no placement cap
// (docs/warm-pools.md). It reserves nothing.
func (a Admission) PlacementRoom(ctx context.Context, vms []inventory.VM, flavor *config.Flavor) int {
	if !a.placed() {
		return -1
	}
	fp := placement.Footprint{}
	if flavor != nil {
		fp.CPUs, fp.MemoryMB = int64(flavor.CPUs), flavor.MemoryMB
		if flavor.DiskSizeGB > 0 {
			fp.DiskBytes = flavor.DiskSizeGB << 30
		}
	}
	var total int64
	for _, f := range a.placementFigures(ctx, vms) {
		room, _, _ := placement.Headroom(fp, f)
		if room >= placement.Unlimited {
			return -1
		}
		total += room
	}
	return int(total)
}

// FlavorRoom is FlavorHeadroom on the resource pool's last reading (taken
// by the capacity decisions and the metrics pass): it reaches no vCenter,
// for the warm pool's pass, which asks it for every demand-driven pool.
func (a Admission) FlavorRoom(ctx context.Context) (map[string]int, error) {
	v, err := a.readCapacityViewPool(ctx, func(context.Context) capacity.Pool { return a.lastPool() })
	if err != nil {
		return nil, err
	}
	return capacity.Headroom(v.in, CapacityFlavors(a.Config.Flavors), a.Config.CountSmallerFlavorToKeep), nil
}
