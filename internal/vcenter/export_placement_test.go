package vcenter

import "time"

// Hooks for the external (vcsim) placement tests, compiled into tests only.

// PlacementRetryMin exports placementRetryMin.
const PlacementRetryMin = placementRetryMin

// SetPlacementClock replaces the placement cache's clock. Call it before
// the first lookup.
func (c *Client) SetPlacementClock(now func() time.Time) { c.placement.now = now }
