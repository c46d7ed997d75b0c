package daemon

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
)

// TestUnknownWorkerGrace: a worker of another instance may stay unknown,
// by default, for longer than the oldest data the inventory may answer
// with plus one interval (at 7 s: 4 x 7 s + 2 x 30 s + 7 s), so that a
// lagging inventory never gets the other instance's running worker
// disabled; an interval the caller sets is kept.
func TestUnknownWorkerGrace(t *testing.T) {
	cfg := config.Default()
	cfg.InventoryRefreshInterval = 7 // seconds
	assert.Equal(t, 95*time.Second, unknownWorkerGrace(hatchery.Intervals{}, &cfg).UnknownWorkerGrace)
	assert.Greater(t, unknownWorkerGrace(hatchery.Intervals{}, &cfg).UnknownWorkerGrace, inventory.MaxSnapshotAge(7*time.Second))
	set := hatchery.Intervals{UnknownWorkerGrace: time.Minute}
	assert.Equal(t, time.Minute, unknownWorkerGrace(set, &cfg).UnknownWorkerGrace)
}
