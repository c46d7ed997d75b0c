package vsphere

import "time"

// SetIPClock replaces the clock of the hatchery's static IP pool, by
// which reservations expire and another instance's unused address locks
// are reconciled. Call it right after New.
func (h *HatcheryVSphere) SetIPClock(now func() time.Time) { h.ips.SetClock(now) }
