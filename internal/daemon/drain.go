package daemon

import (
	"log/slog"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// drainer is what a stop drains: the framework (hatchery.Framework).
type drainer interface {
	Drain(who string) <-chan struct{}
	InFlight() int
}

var _ drainer = (*hatchery.Framework)(nil)

// drainAtStop is the drain of a stop (SIGTERM, docs/operations.md#drain):
// the framework takes no new job and Run waits, at most bound, for the
// spawns in flight to end before the staged shutdown. It returns the
// framework's own error when the framework stopped meanwhile (returned is
// then true). A bound of 0 drains nothing.
func drainAtStop(fw drainer, bound time.Duration, fwErr <-chan error, log *slog.Logger) (err error, returned bool) {
	if bound <= 0 {
		return nil, false
	}
	drained := fw.Drain("stop")
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-drained:
		return nil, false
	case err := <-fwErr:
		return err, true
	case <-t.C:
		// The operator's bound won: what is still in flight is cut by the
		// shutdown below (its jobs released), as without a drain.
		log.Warn("drain timed out, stopping with spawns in flight", "drain_timeout", bound, "in_flight", fw.InFlight(), logkey.Detail, "raise drainTimeout (and the unit's TimeoutStopSec) to let them finish")
		return nil, false
	}
}
