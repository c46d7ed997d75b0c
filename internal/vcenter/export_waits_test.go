package vcenter

import (
	"context"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"
)

// Hooks for the external (vcsim) wait collector tests, compiled into tests
// only.

// WaitCollectorCounts are the wait collector's counters (vim.WaitCounts).
type WaitCollectorCounts = vim.WaitCounts

// WaitCollector returns the wait collector's counters.
func (c *Client) WaitCollector() WaitCollectorCounts { return c.col.WaitCounts() }

// SetWaitRebuildBackoff sets the wait collector's rebuild back-off; call
// it before the first wait.
func (c *Client) SetWaitRebuildBackoff(lo, hi time.Duration) { c.col.SetWaitTuning(lo, hi, 0, 0) }

// SetTaskPollFirst sets a task wait's first poll while its task is not in
// the wait collector's view; call it before the first wait.
func (c *Client) SetTaskPollFirst(d time.Duration) { c.col.SetWaitTuning(0, 0, d, 0) }

// SetWaitViewStaleMax sets how many objects no wait needs the wait
// collector's view keeps; call it before the first wait.
func (c *Client) SetWaitViewStaleMax(n int) { c.col.SetWaitTuning(0, 0, 0, n) }

// RetiredCollectors is how many abandoned collectors wait to be destroyed.
func (c *Client) RetiredCollectors() int { return c.col.RetiredCollectors() }

// RunTask exports runTask.
func (c *Client) RunTask(ctx context.Context, timeout time.Duration, start func(context.Context) (*object.Task, error)) (types.AnyType, error) {
	return c.runTask(ctx, timeout, start)
}

// WaitFallbackFactor exports vim.WaitFallbackFactor.
const WaitFallbackFactor = vim.WaitFallbackFactor
