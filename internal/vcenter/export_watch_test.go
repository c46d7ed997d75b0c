package vcenter

import (
	"time"
)

// Hooks for the external (vcsim) watch tests, compiled into tests only.

// WatchRetireDelay exports watchRetireDelay.
const WatchRetireDelay = watchRetireDelay

// SetWatchClock replaces the watch's clock. Call it before the client's
// watch is used.
func (c *Client) SetWatchClock(now func() time.Time) { c.watchNow = now }
