package hatchery

import (
	"log/slog"
	"sync"
)

// outcome is what processing one job came to.
type outcome int

const (
	// outcomeNone: the job was gone, no longer waiting, or unreadable.
	outcomeNone outcome = iota
	// outcomeStarted: a worker was spawned for it.
	outcomeStarted
	// outcomeFailed: the spawn failed (the job was released or failed).
	outcomeFailed
	// outcomeCapacity: refused for capacity or resources; it waits.
	outcomeCapacity
	// outcomeSkipped: refused for another reason (region, model, booked
	// elsewhere...).
	outcomeSkipped
	// outcomeBusy: already queued or being processed from an earlier
	// poll or an event.
	outcomeBusy
	nbOutcomes
)

// pollBatch gathers the outcomes of the jobs one queue poll found, and logs
// one Info summary when the last of them has been processed.
type pollBatch struct {
	log   *slog.Logger
	queue string
	jobs  int

	mu     sync.Mutex
	left   int
	counts [nbOutcomes]int
}

// newPollBatch starts the summary of a poll that found jobs jobs. A poll
// with no job logs its summary at Debug at once and returns nil.
func newPollBatch(log *slog.Logger, queue string, jobs int) *pollBatch {
	if jobs == 0 {
		log.Debug("queue poll", "queue", queue, "jobs", 0)
		return nil
	}
	return &pollBatch{log: log, queue: queue, jobs: jobs, left: jobs}
}

// record counts one job's outcome; the last one logs the summary. A nil
// batch (a job from an event) does nothing.
func (b *pollBatch) record(o outcome) {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.counts[o]++
	b.left--
	done := b.left == 0
	c := b.counts
	b.mu.Unlock()
	if !done {
		return
	}
	b.log.Info("queue poll", "queue", b.queue, "jobs", b.jobs,
		"started", c[outcomeStarted],
		"waiting_capacity", c[outcomeCapacity],
		"skipped", c[outcomeSkipped],
		"spawn_failed", c[outcomeFailed],
		"in_progress", c[outcomeBusy],
		"gone", c[outcomeNone])
}
