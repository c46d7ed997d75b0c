package hatchery

// The record of the jobs a worker was spawned for, which the framework
// lists at shutdown (jobs spawned for stay booked for their workers).

import (
	"sort"
	"sync"
	"time"
)

// spawnedJobs are the jobs a worker was spawned for (V1 "v1:id", V2
// "v2:id") and when, with the worker's name.
type spawnedJobs struct {
	mu   sync.Mutex
	jobs map[string]spawnedJob
}

type spawnedJob struct {
	worker string
	at     time.Time
}

func (s *spawnedJobs) init() { s.jobs = map[string]spawnedJob{} }

func (s *spawnedJobs) add(key, worker string, at time.Time) {
	s.mu.Lock()
	s.jobs[key] = spawnedJob{worker: worker, at: at}
	s.mu.Unlock()
}

// seen forgets a job back in the queue (released) or given up on.
func (s *spawnedJobs) seen(key string) {
	s.mu.Lock()
	delete(s.jobs, key)
	s.mu.Unlock()
}

// prune forgets the spawns older than attemptsRetention.
func (s *spawnedJobs) prune(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, j := range s.jobs {
		if now.Sub(j.at) >= attemptsRetention {
			delete(s.jobs, k)
		}
	}
}

// list returns "key(worker)" for each job whose worker is live (a worker
// that ended took its job with it), sorted.
func (s *spawnedJobs) list(live func(worker string) bool) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.jobs))
	for k, j := range s.jobs {
		if live(j.worker) {
			out = append(out, k+"("+j.worker+")")
		}
	}
	sort.Strings(out)
	return out
}
