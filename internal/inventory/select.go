package inventory

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// Source is what the inventory reads of vCenter: the listing, probe, read
// by reference and change watch of vctypes.InventorySource, and the lookup
// of the resource pool whose runtime the watch mode's probe reads with the
// VMs. vctypes.Port satisfies it.
type Source interface {
	vctypes.InventorySource
	// LoadResourcePool returns the pool new VMs go to (vctypes.Placement).
	LoadResourcePool(ctx context.Context) (vctypes.Ref, error)
}

// New builds the VM inventory that cfg.InventoryMode names
// (docs/inventory-watch.md):
//   - "watch" (the default): one Shared inventory refreshed incrementally
//     (NewWatch) every inventoryRefreshInterval and soon after the
//     hatchery's own writes. The returned run function is its owner loop:
//     the caller starts it in one goroutine next to HatcheryVSphere.Run and
//     joins it at shutdown (it returns when ctx ends).
//   - "shared": the same, each refresh a full leaf listing.
//   - "listing": the plainest design, a Listing inventory listing the
//     datacenter on every read; run returns at once.
//
// All satisfy Inventory, so every loop and decision reads through the same
// interface and the modes can be measured side by side.
func New(cfg *config.Config, client Source, log *slog.Logger) (Inventory, func(ctx context.Context), error) {
	if cfg == nil || client == nil {
		return nil, nil, fmt.Errorf("new inventory: config and client are required")
	}
	switch cfg.InventoryMode {
	case config.InventoryListing:
		return Listing{Client: client}, func(context.Context) {}, nil
	case config.InventoryShared:
		inv := NewShared(client, cfg.InventoryRefreshIntervalDuration(), 0, log)
		return inv, inv.Run, nil
	case config.InventoryWatch, "":
		inv := NewWatch(client, cfg.InventoryRefreshIntervalDuration(), 0, log)
		return inv, inv.Run, nil
	default:
		return nil, nil, fmt.Errorf("new inventory: inventoryMode %q is not one of %q, %q, %q", cfg.InventoryMode, config.InventoryWatch, config.InventoryShared, config.InventoryListing)
	}
}
