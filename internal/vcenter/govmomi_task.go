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
	res, notified, err := c.waitTask(ctx, t.Reference())
	if err == nil || ctx.Err() == nil {
		return res, notified, err
	}
	octx, ocancel := context.WithTimeout(context.WithoutCancel(ctx), c.scaled(taskOutcomeGrace))
	defer ocancel()
	if ores, onotified, oerr := c.waitTask(octx, t.Reference()); octx.Err() == nil {
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
	c.waits.touch(vm)
	res, notified, err := c.runTaskNotified(ctx, timeout, func(ctx context.Context) (*object.Task, error) {
		t, err := start(ctx)
		if err == nil && keep {
			c.waits.keep(vm)
		}
		return t, err
	})
	c.waits.settle(vm, notified)
	return res, err
}

// waitTask waits until a task succeeds or fails, or ctx ends. It learns
// of the task's info.state from the wait collector (govmomi_waits.go) and
// takes its outcome from the reported values when the state (as the task
// enters the collector's view, then as it changes) says it ended and they
// carry it (taskOutcome), reading the task's info otherwise; until it is in the
// view (or without the collector) it polls, from taskPollMin doubling to
// PollInterval. A failed task's error is
// task.Error carrying its fault. notified: the outcome came from the
// notification of the task's end, not from a read.
func (c *Client) waitTask(ctx context.Context, ref types.ManagedObjectReference) (_ types.AnyType, notified bool, _ error) {
	var (
		result types.AnyType
		terr   error
	)
	// notified: the reported values that said the task ended, which
	// carry its outcome when vCenter reported it with the state.
	var ended map[string]any
	read := func(ctx context.Context) (bool, error) {
		if v := ended; v != nil {
			ended = nil
			if taskOutcome(v, &result, &terr) {
				notified = true
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
	worth := func(vals map[string]any, _ bool) bool {
		switch fmt.Sprint(vals["info.state"]) {
		case string(types.TaskInfoStateSuccess), string(types.TaskInfoStateError):
			ended = vals
			return true
		}
		return false
	}
	// A task just started has rarely ended: the first read waits for its
	// reported state (or the first poll).
	if err := c.awaitObject(ctx, ref, skipFirst, c.waits.taskPollFirst, read, worth); err != nil {
		if ctx.Err() != nil && err == ctx.Err() {
			return nil, false, fmt.Errorf("wait for task %s: %w", ref.Value, err)
		}
		return nil, false, err
	}
	return result, notified, terr
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
