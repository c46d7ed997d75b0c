package vsphere

import (
	"context"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A worker created since the shared inventory's last listing is reported
// by WorkersStarted, once, until the inventory shows it or the grace ends.
func TestWorkersStartedIncludesWorkersTheInventoryDoesNotShowYet(t *testing.T) {
	t.Parallel()
	cfg := spConfig()
	cfg.InventoryMode = config.InventoryShared
	cfg.InventoryRefreshInterval = 30 // grace = 4 × 30 s
	f := newSpFixture(t, cfg)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.h.now = func() time.Time { return now }
	ours := &inventory.Annotation{HatcheryName: spHatchery}
	worker1 := inventory.VM{Name: "worker-1", Annotation: ours}
	f.inv.Set(worker1)

	f.h.recordCreated("worker-2", "")
	f.h.recordCreated("register-mymodel-x1", "")
	got, err := f.h.WorkersStarted(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"worker-1", "register-mymodel-x1", "worker-2"}, got)

	// The inventory catches up: each name is reported once.
	f.inv.Add(
		inventory.VM{Name: "worker-2", Annotation: ours},
		inventory.VM{Name: "mymodel-tmp", Annotation: &inventory.Annotation{HatcheryName: spHatchery, RegisterOnly: true, WorkerName: "register-mymodel-x1"}})
	got, err = f.h.WorkersStarted(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"worker-1", "worker-2", "register-mymodel-x1"}, got)

	// A worker whose VM never shows (destroyed before any listing) is
	// forgotten after the grace.
	f.inv.Set(worker1)
	f.h.recordCreated("worker-3", "")
	now = now.Add(2 * time.Minute)
	got, _ = f.h.WorkersStarted(context.Background())
	assert.Contains(t, got, "worker-3", "still within the grace")
	now = now.Add(3 * time.Minute)
	got, _ = f.h.WorkersStarted(context.Background())
	assert.Equal(t, []string{"worker-1"}, got, "forgotten after the grace")
}
