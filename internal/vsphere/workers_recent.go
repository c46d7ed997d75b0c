package vsphere

import (
	"sync"
	"time"
)

// recentWorkers remembers the workers this hatchery created whose VM the
// inventory may not show yet (a shared inventory lags behind our own
// clones and renames). WorkersStarted adds them, so that the framework
// neither undercounts against maxWorker nor takes a worker that registers
// with the CDS API at once for an inconsistent one. An entry goes when the
// inventory shows the VM or after a grace period (releaseGrace): it is an
// accelerator, safe to lose on restart, when the inventory is fresh.
type recentWorkers struct {
	mu sync.Mutex
	at map[string]time.Time
}

func newRecentWorkers() *recentWorkers { return &recentWorkers{at: map[string]time.Time{}} }

// add records that the worker's VM exists now.
func (r *recentWorkers) add(name string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.at[name] = now
}

// missing returns the recorded names the inventory does not show, and
// drops those it shows and those older than grace.
func (r *recentWorkers) missing(shown map[string]bool, now time.Time, grace time.Duration) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for name, at := range r.at {
		switch {
		case shown[name], now.Sub(at) > grace:
			delete(r.at, name)
		default:
			out = append(out, name)
		}
	}
	return out
}
