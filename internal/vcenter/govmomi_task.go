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
// takes its outcome from the reported values when the state (as the task
// enters the collector's view, then as it changes) says it ended and they
// carry it (taskOutcome), reading the task's info otherwise; until it is in the
// view (or without the collector) it polls, from taskPollMin doubling to
// PollInterval. A failed task's error is
// task.Error carrying its fault.
func (c *Client) waitTask(ctx context.Context, ref types.ManagedObjectReference) (types.AnyType, error) {
	var (
		result types.AnyType
		terr   error
	)
	// notified: the reported values that said the task ended, which
	// carry its outcome when vCenter reported it with the state.
	var notified map[string]any
	read := func(ctx context.Context) (bool, error) {
		if v := notified; v != nil {
			notified = nil
			if taskOutcome(v, &result, &terr) {
				return true, nil
			}
		}
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
			notified = vals
			return true
		}
		return false
	}
	// A task just started has rarely ended: the first read waits for its
	// reported state (or the first poll).
	if err := c.awaitObject(ctx, ref, true, c.waits.taskPollFirst, read, ended); err != nil {
		if ctx.Err() != nil && err == ctx.Err() {
			return nil, fmt.Errorf("wait for task %s: %w", ref.Value, err)
		}
		return nil, err
	}
	return result, terr
}

// taskOutcome takes an ended task's outcome from the values the wait
// collector reported (waitProps), when they carry it: the state success
// with the result (nil for a task that has none), or the state error with
// its fault. vCenter sets the three together as the task ends, in one
// update; a result or fault not reported (vCenter leaves out a property
// that stayed unset) means a read. The fault's description is not
// reported: task.Error's text does not use it.
func taskOutcome(vals map[string]any, result *types.AnyType, terr *error) bool {
	switch fmt.Sprint(vals["info.state"]) {
	case string(types.TaskInfoStateSuccess):
		r, ok := vals["info.result"]
		if ok {
			*result = r
		}
		return ok
	case string(types.TaskInfoStateError):
		switch f := vals["info.error"].(type) {
		case types.LocalizedMethodFault:
			*terr = task.Error{LocalizedMethodFault: &f}
			return true
		case *types.LocalizedMethodFault:
			*terr = task.Error{LocalizedMethodFault: f}
			return f != nil
		}
	}
	return false
}
