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

// runTask starts a task with start, under a task slot (MaxConcurrentTasks)
// and a deadline of timeout, and waits for its result by polling
// info.state through the shared property collector (no collector is
// created per task, and no request outlives the request timeout).
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
	return c.waitTask(ctx, t.Reference())
}

// waitTask polls a task until it succeeds or fails, or ctx ends. The delay
// starts at taskPollMin and doubles up to PollInterval.
func (c *Client) waitTask(ctx context.Context, ref types.ManagedObjectReference) (types.AnyType, error) {
	delay := taskPollMin
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for task %s: %w", ref.Value, ctx.Err())
		case <-timer.C:
		}
		var t mo.Task
		if err := c.pc.RetrieveOne(ctx, ref, []string{"info"}, &t); err != nil {
			return nil, fmt.Errorf("read task %s: %w", ref.Value, err)
		}
		switch t.Info.State {
		case types.TaskInfoStateSuccess:
			return t.Info.Result, nil
		case types.TaskInfoStateError:
			if t.Info.Error == nil {
				return nil, fmt.Errorf("task %s failed without a fault", ref.Value)
			}
			return nil, task.Error{LocalizedMethodFault: t.Info.Error, Description: t.Info.Description}
		}
		timer.Reset(delay)
		if delay *= 2; delay > c.PollInterval {
			delay = c.PollInterval
		}
	}
}
