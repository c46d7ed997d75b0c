package vcenter

import (
	"context"
	"fmt"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/task"
	"github.com/vmware/govmomi/vim25/mo"
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
// and a deadline of timeout, and waits for its result (waitTask): no
// collector is created per task, and no request outlives the request
// timeout. When ctx ends while the started task runs, its outcome is still
// waited for, at most taskOutcomeGrace: a task that then succeeds returns
// its result (a clone's VM, which the caller's next step, cut by the same
// ctx, cleans up as any VM of a failed spawn), one that fails returns its
// fault; an outcome still unknown returns ctx's error.
func (c *Client) runTask(ctx context.Context, timeout time.Duration, start func(context.Context) (*object.Task, error)) (types.AnyType, error) {
	ctx, cancel := context.WithTimeout(ctx, c.scaled(timeout))
	defer cancel()
	release, err := c.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	t, err := start(ctx)
	if err != nil {
		return nil, err
	}
	res, err := c.waitTask(ctx, t.Reference())
	if err == nil || ctx.Err() == nil {
		return res, err
	}
	octx, ocancel := context.WithTimeout(context.WithoutCancel(ctx), c.scaled(taskOutcomeGrace))
	defer ocancel()
	if ores, oerr := c.waitTask(octx, t.Reference()); octx.Err() == nil {
		return ores, oerr
	}
	return nil, err
}

// waitTask waits until a task succeeds or fails, or ctx ends. It learns
// of the task's info.state from the wait collector (govmomi_waits.go) and
// reads the task's info when the reported state (as the task enters the
// collector's view, then as it changes) says it ended; until it is in the
// view (or without the collector) it polls, from taskPollMin doubling to
// PollInterval. A failed task's error is
// task.Error carrying its fault.
func (c *Client) waitTask(ctx context.Context, ref types.ManagedObjectReference) (types.AnyType, error) {
	var (
		result types.AnyType
		terr   error
	)
	read := func(ctx context.Context) (bool, error) {
		var t mo.Task
		if err := c.pc.RetrieveOne(ctx, ref, []string{"info"}, &t); err != nil {
			return false, fmt.Errorf("read task %s: %w", ref.Value, err)
		}
		switch t.Info.State {
		case types.TaskInfoStateSuccess:
			result = t.Info.Result
			return true, nil
		case types.TaskInfoStateError:
			if t.Info.Error == nil {
				terr = fmt.Errorf("task %s failed without a fault", ref.Value)
			} else {
				terr = task.Error{LocalizedMethodFault: t.Info.Error, Description: t.Info.Description}
			}
			return true, nil
		}
		return false, nil
	}
	ended := func(vals map[string]any) bool {
		switch fmt.Sprint(vals["info.state"]) {
		case string(types.TaskInfoStateSuccess), string(types.TaskInfoStateError):
			return true
		}
		return false
	}
	// A task just started has rarely ended: the first read waits for its
	// reported state (or the first poll).
	if err := c.awaitObject(ctx, ref, true, taskPollMin, read, ended); err != nil {
		if ctx.Err() != nil && err == ctx.Err() {
			return nil, fmt.Errorf("wait for task %s: %w", ref.Value, err)
		}
		return nil, err
	}
	return result, terr
}
