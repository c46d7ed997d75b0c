package vcenter

import (
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
)

// Hooks for the external (vcsim) watch tests, compiled into tests only.

// WatchRetireDelay exports vim.WatchRetireDelay.
const WatchRetireDelay = vim.WatchRetireDelay

// SetWatchClock replaces the watch's clock. Call it before the client's
// watch is used.
func (c *Client) SetWatchClock(now func() time.Time) { c.col.SetClock(now) }
