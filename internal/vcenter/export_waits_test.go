package vcenter

import (
	"context"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"
)

// Hooks for the external (vcsim) wait collector tests, compiled into tests
// only.

// WaitCollectorCounts are the wait collector's counters (govmomi_waits.go).
type WaitCollectorCounts struct {
	// Collectors made, filters made and destroyed so far; Filters and
	// Objects in place now; Live: the collector of this session answers.
	Collectors, FiltersMade, FiltersDestroyed, Filters, Objects int
	Live                                                        bool
}

// WaitCollector returns the wait collector's counters.
func (c *Client) WaitCollector() WaitCollectorCounts {
	h := c.waits
	h.mu.Lock()
	defer h.mu.Unlock()
	n := WaitCollectorCounts{Collectors: h.collectors, FiltersMade: h.filtersMade, FiltersDestroyed: h.filtersDestroyed, Objects: len(h.objs), Live: h.live}
	for _, o := range h.objs {
		if o.filter.Value != "" {
			n.Filters++
		}
	}
	return n
}

// RunTask exports runTask.
func (c *Client) RunTask(ctx context.Context, timeout time.Duration, start func(context.Context) (*object.Task, error)) (types.AnyType, error) {
	return c.runTask(ctx, timeout, start)
}

// WaitFallbackFactor exports waitFallbackFactor.
const WaitFallbackFactor = waitFallbackFactor
