package vcenter

import (
	"context"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"
)

// taskOutcomeGrace bounds how long a task whose caller gave up (its
// context ended: the shutdown, a deadline) is still waited for: vCenter
// runs a started task to its end whatever the client does, and a clone
// that ends unseen leaves a VM nobody cleans up before its registration
// TTL. A few seconds cover the simulator's and most of vCenter's
// remaining clone time, well inside the daemon's 30 s shutdown bound.
const taskOutcomeGrace = 5 * time.Second

// runTask starts a task with start, under a task slot (MaxConcurrentTasks)
// and a deadline of timeout, and waits for its result (vim.Collector.WaitTask): no
// collector is created per task, and no request outlives the request
// timeout. When ctx ends while the started task runs, its outcome is still
// waited for, at most taskOutcomeGrace: a task that then succeeds returns
// its result (a clone's VM, which the caller's next step, cut by the same
// ctx, cleans up as any VM of a failed spawn), one that fails returns its
// fault; an outcome still unknown returns ctx's error.
func (c *Client) runTask(ctx context.Context, timeout time.Duration, start func(context.Context) (*object.Task, error)) (types.AnyType, error) {
	res, _, err := c.runTaskNotified(ctx, timeout, start)
	return res, err
}

// runTaskNotified is runTask, also telling whether the task's outcome
// came from the notification of its end (waitTask).
func (c *Client) runTaskNotified(ctx context.Context, timeout time.Duration, start func(context.Context) (*object.Task, error)) (types.AnyType, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, c.scaled(timeout))
	defer cancel()
	release, err := c.acquire(ctx)
	if err != nil {
		return nil, false, err
	}
	defer release()
	t, err := start(ctx)
	if err != nil {
		return nil, false, err
	}
	res, notified, err := c.col.WaitTask(ctx, t.Reference())
	if err == nil || ctx.Err() == nil {
		return res, notified, err
	}
	octx, ocancel := context.WithTimeout(context.WithoutCancel(ctx), c.scaled(taskOutcomeGrace))
	defer ocancel()
	if ores, onotified, oerr := c.col.WaitTask(octx, t.Reference()); octx.Err() == nil {
		return ores, onotified, oerr
	}
	return nil, false, err
}

// runTaskOn is runTask for a task that changes vm. The wait collector
// learns of it (touch, then settle: a wait on vm takes the values
// reported after the end of a task whose end was notified as they are).
// With keep (a claim's reconfigure, a power-on: the guest's waits
// follow), vm joins the collector's view with the task, in the same
// ModifyListView and long poll, so that those waits find it watched.
func (c *Client) runTaskOn(ctx context.Context, timeout time.Duration, vm types.ManagedObjectReference, keep bool, start func(context.Context) (*object.Task, error)) (types.AnyType, error) {
	c.col.Touch(vm)
	res, notified, err := c.runTaskNotified(ctx, timeout, func(ctx context.Context) (*object.Task, error) {
		t, err := start(ctx)
		if err == nil && keep {
			c.col.Keep(vm)
		}
		return t, err
	})
	c.col.Settle(vm, notified)
	return res, err
}
