package daemon

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
)

// TestUnknownWorkerGrace: a worker of another instance may stay unknown
// for two inventory refresh intervals by default; an interval the caller
// sets is kept.
func TestUnknownWorkerGrace(t *testing.T) {
	cfg := config.Default()
	cfg.InventoryRefreshInterval = 7 // seconds
	assert.Equal(t, 14*time.Second, unknownWorkerGrace(hatchery.Intervals{}, &cfg).UnknownWorkerGrace)
	set := hatchery.Intervals{UnknownWorkerGrace: time.Minute}
	assert.Equal(t, time.Minute, unknownWorkerGrace(set, &cfg).UnknownWorkerGrace)
}
