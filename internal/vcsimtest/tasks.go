package vcsimtest

import (
	"context"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

// DefaultTaskRetention is how long a task stays readable after it ended
// when Options.TaskRetention asks for vCenter's behaviour: vCenter's
// recent tasks are those of about the last ten minutes, after which the
// task object is no longer in its inventory (its record stays in the
// task history, which the hatchery does not read).
const DefaultTaskRetention = 10 * time.Minute

// startReaper runs reapTasks until Close when retention is set.
func (e *Env) startReaper(retention time.Duration) {
	if retention > 0 {
		e.run(func(ctx context.Context) { e.reapTasks(ctx, retention) })
	}
}

// reapTasks removes, every tenth of retention, the task objects that ended
// more than retention ago, until ctx ends. It extends govmomi's simulator,
// which keeps every task it ever ran: a process that runs the simulator
// for hours (the demo's soak) grows by every task of every job, which a
// soak measuring the process would take for the hatchery's growth. A task
// still queued or running is never removed.
func (e *Env) reapTasks(ctx context.Context, retention time.Duration) {
	t := time.NewTicker(retention / 10)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		e.ReapTasks(time.Now().Add(-retention))
	}
}

// ReapTasks removes the task objects that ended before cutoff and reports
// how many it removed.
func (e *Env) ReapTasks(cutoff time.Time) int {
	sctx := e.SimContext()
	n := 0
	for _, o := range e.Model.Map().AllReference("Task") {
		task, ok := o.(*simulator.Task)
		if !ok {
			continue
		}
		ended := false
		sctx.WithLock(task, func() {
			st := task.Info.State
			c := task.Info.CompleteTime
			ended = (st == types.TaskInfoStateSuccess || st == types.TaskInfoStateError) && c != nil && c.Before(cutoff)
		})
		if ended {
			e.Model.Map().Remove(sctx, task.Self)
			n++
		}
	}
	return n
}
