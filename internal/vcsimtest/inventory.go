package vcsimtest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// InventoryModeEnv names the environment variable choosing the inventory
// mode of the hatcheries tests build on a simulator: "watch" (the
// production default, used when the variable is unset or empty), "shared"
// or "listing". CI runs the simulator tests in each mode, so that
// every decision is checked against a fresh listing per read, a lagging
// listed snapshot and an incrementally kept one.
const InventoryModeEnv = "HATCHERY_VSPHERE_TEST_INVENTORY"

// TestInventoryMinGap is the least time between two refreshes of a shared
// inventory built by Env.Inventory: short, so WaitInventory returns fast,
// while refreshes still coalesce.
const TestInventoryMinGap = 50 * time.Millisecond

// InventoryMode returns the mode named by InventoryModeEnv, else
// config.InventoryWatch. An unknown value panics: a CI typo must not
// silently test another mode.
func InventoryMode() string {
	switch m := os.Getenv(InventoryModeEnv); m {
	case "":
		return config.InventoryWatch
	case config.InventoryWatch, config.InventoryShared, config.InventoryListing:
		return m
	default:
		panic(fmt.Sprintf("%s=%q: want one of %q", InventoryModeEnv, m, config.InventoryModes))
	}
}

// Inventory builds the inventory a hatchery on this simulator reads, in the
// mode of InventoryMode() (written to cfg.InventoryMode, which the capacity
// check reads too, unless the test already set one), over e.Client. A
// shared inventory refreshes every cfg.InventoryRefreshInterval (30 s when
// unset) and TestInventoryMinGap after an Invalidate; its owner loop runs
// until the test ends and is joined at cleanup.
func (e *Env) Inventory(cfg *config.Config) inventory.Inventory {
	e.t.Helper()
	return e.InventoryOver(cfg, e.Client)
}

// InventoryOver is Inventory over another client (a counting decorator,
// a second session).
func (e *Env) InventoryOver(cfg *config.Config, client vctypes.Port) inventory.Inventory {
	e.t.Helper()
	if cfg.InventoryMode == "" {
		cfg.InventoryMode = InventoryMode()
	}
	if cfg.InventoryRefreshInterval <= 0 {
		cfg.InventoryRefreshInterval = config.DefaultInventoryRefreshInterval
	}
	log := e.opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.InventoryMode == config.InventoryListing {
		inv, _, err := inventory.New(cfg, client, log)
		if err != nil {
			e.t.Fatalf("inventory: %v", err)
		}
		return inv
	}
	inv := inventory.NewShared(client, cfg.InventoryRefreshIntervalDuration(), TestInventoryMinGap, log)
	if cfg.InventoryMode == config.InventoryWatch {
		if client == vctypes.Port(e.Client) {
			// A client has one change watch (vctypes.Port): a watch
			// inventory gets a session of its own, as the inventory of a
			// hatchery process does, so that two hatcheries of one test
			// (a restart) do not reset each other's watch.
			client = e.NewClient(nil)
		}
		inv = inventory.NewWatch(client, cfg.InventoryRefreshIntervalDuration(), TestInventoryMinGap, log)
	}
	e.run(inv.Run)
	return inv
}

// run starts fn in a goroutine that ends with the test's context and is
// joined at cleanup.
func (e *Env) run(fn func(context.Context)) {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		fn(e.ctx)
	}()
}

// WaitInventory returns once inv shows every write made before the call: a
// shared inventory is refreshed (WaitRefresh); a listing one is always
// current. Tests call it before asserting on what the hatchery reads, never
// sleep.
func (e *Env) WaitInventory(inv inventory.Inventory) {
	e.t.Helper()
	s, ok := inv.(*inventory.Shared)
	if !ok {
		return
	}
	// A liveness bound (testutil.PatienceDeadline), not a fixed 30 s: a
	// refresh on a loaded machine comes late, it does come.
	ctx, cancel := context.WithDeadline(e.ctx, testutil.PatienceDeadline(e.t))
	defer cancel()
	if err := s.WaitRefresh(ctx); err != nil {
		e.t.Fatalf("wait for inventory refresh: %v", err)
	}
}
