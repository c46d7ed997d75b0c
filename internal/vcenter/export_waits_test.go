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
	// Collectors and Views made, ModifyListView calls so far; Objects
	// waited on now, InView the objects in the view now (those of ended
	// waits stay until the next addition); Live: the collector of this
	// session answers; Retries: the back-off before each retry of a
	// failed rebuild; Frozen: no poll in flight nor to come until a wait
	// opens.
	Collectors, Views, ViewChanges, Objects, InView int
	Live, Frozen                                    bool
	Retries                                         []time.Duration
}

// WaitCollector returns the wait collector's counters.
func (c *Client) WaitCollector() WaitCollectorCounts {
	h := c.waits
	h.mu.Lock()
	defer h.mu.Unlock()
	n := WaitCollectorCounts{Collectors: h.collectors, Views: h.views, ViewChanges: h.viewChanges, Live: h.live, Frozen: h.frozen, Retries: append([]time.Duration(nil), h.retries...)}
	for _, o := range h.objs {
		if len(o.subs) > 0 {
			n.Objects++
		}
		if o.inView {
			n.InView++
		}
	}
	return n
}

// SetWaitRebuildBackoff sets the wait collector's rebuild back-off
// (waitRebuildMin doubling to waitRebuildMax); call it before the first
// wait.
func (c *Client) SetWaitRebuildBackoff(lo, hi time.Duration) {
	c.waits.rebuildMin, c.waits.rebuildMax = lo, hi
}

// SetTaskPollFirst sets a task wait's first poll while its task is not in
// the wait collector's view (taskPollMin); call it before the first wait.
func (c *Client) SetTaskPollFirst(d time.Duration) { c.waits.taskPollFirst = d }

// SetWaitViewStaleMax sets how many objects no wait needs the wait
// collector's view keeps (waitViewStaleMax); call it before the first wait.
func (c *Client) SetWaitViewStaleMax(n int) { c.waits.staleMax = n }

// RetiredCollectors is how many abandoned collectors wait to be destroyed
// (govmomi_watch.go).
func (c *Client) RetiredCollectors() int {
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	return len(c.retired)
}

// RunTask exports runTask.
func (c *Client) RunTask(ctx context.Context, timeout time.Duration, start func(context.Context) (*object.Task, error)) (types.AnyType, error) {
	return c.runTask(ctx, timeout, start)
}

// WaitFallbackFactor exports waitFallbackFactor.
const WaitFallbackFactor = waitFallbackFactor
