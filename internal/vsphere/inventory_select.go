package vsphere

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
)

// NewInventory builds the VM inventory that cfg.InventoryMode names
// (docs/inventory-watch.md):
//   - "watch" (the default): one SharedInventory refreshed incrementally
//     (NewWatchInventory) every inventoryRefreshInterval and soon after the
//     hatchery's own writes. The returned run function is its owner loop:
//     the caller starts it in one goroutine next to HatcheryVSphere.Run and
//     joins it at shutdown (it returns when ctx ends).
//   - "shared": the same, each refresh a full leaf listing.
//   - "listing": the spec's plain design, a ListingInventory listing the
//     datacenter on every read; run returns at once.
//
// All satisfy Inventory, so every loop and decision reads through the same
// interface and the modes can be measured side by side.
func NewInventory(cfg *config.Config, client vcenter.Port, log *slog.Logger) (Inventory, func(ctx context.Context), error) {
	if cfg == nil || client == nil {
		return nil, nil, fmt.Errorf("new inventory: config and client are required")
	}
	switch cfg.InventoryMode {
	case config.InventoryListing:
		return ListingInventory{Client: client}, func(context.Context) {}, nil
	case config.InventoryShared:
		inv := NewSharedInventory(client, cfg.InventoryRefreshIntervalDuration(), 0, log)
		return inv, inv.Run, nil
	case config.InventoryWatch, "":
		inv := NewWatchInventory(client, cfg.InventoryRefreshIntervalDuration(), 0, log)
		return inv, inv.Run, nil
	default:
		return nil, nil, fmt.Errorf("new inventory: inventoryMode %q is not one of %q, %q, %q", cfg.InventoryMode, config.InventoryWatch, config.InventoryShared, config.InventoryListing)
	}
}

// SOAPCounts converts the adapter's per-method SOAP counters to what the
// metrics collector reads (metrics.Metrics.SOAP): requests, and request plus
// response body bytes.
func SOAPCounts(s vcenter.SOAPStats) map[string]metrics.SOAPCount {
	out := make(map[string]metrics.SOAPCount, len(s))
	for method, m := range s {
		out[method] = metrics.SOAPCount{Requests: m.Requests, Bytes: m.RequestBytes + m.ResponseBytes}
	}
	return out
}

// SOAPHook returns the metrics.Metrics.SOAP hook of a client: a snapshot of its
// cumulative SOAP counters by method, for cds/hatchery/vsphere/soap_requests
// and soap_bytes. Wire it once, before RunMetrics starts:
//
//	m.SOAP = vsphere.SOAPHook(client)
func SOAPHook(c *vcenter.Client) func() map[string]metrics.SOAPCount {
	return func() map[string]metrics.SOAPCount { return SOAPCounts(c.Stats()) }
}
