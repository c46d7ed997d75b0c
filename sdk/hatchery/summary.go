package hatchery

import (
	"log/slog"
	"strings"
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

// skipLog remembers the skip reasons already logged at Info per job, so a
// job refused again and again for the same reason logs at Info once.
type skipLog struct {
	mu     sync.Mutex
	logged map[string]map[string]bool // candidate key -> reasons without their counts
}

func (l *skipLog) init() { l.logged = map[string]map[string]bool{} }

// stableReason drops the varying counts of a reason ("max workers reached
// (10/10)" becomes "max workers reached").
func stableReason(reason string) string {
	if i := strings.Index(reason, " ("); i >= 0 {
		return reason[:i]
	}
	return reason
}

// first records reason for key and tells whether it is the first time.
func (l *skipLog) first(key, reason string) bool {
	r := stableReason(reason)
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.logged[key]
	if m == nil {
		m = map[string]bool{}
		l.logged[key] = m
	}
	if m[r] {
		return false
	}
	m[r] = true
	return true
}

// forget drops a job (it was booked or taken): if it comes back, its next
// skip logs at Info again.
func (l *skipLog) forget(key string) {
	l.mu.Lock()
	delete(l.logged, key)
	l.mu.Unlock()
}

// prune forgets the jobs of a queue (keys with prefix) that keep rejects.
func (l *skipLog) prune(prefix string, keep func(key string) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k := range l.logged {
		if strings.HasPrefix(k, prefix) && !keep(k) {
			delete(l.logged, k)
		}
	}
}
