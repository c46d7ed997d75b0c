package hatchery

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
)

// BenchmarkDayOfJobRecords measures the heap the framework's per-job
// records hold in a steady state (docs/operations.md, "Soak"): the
// spawned-job record (spawnedJobs: the job's key and its worker's name)
// and the attempt counter (attemptCounter: the count and the last
// attempt's time), each kept attemptsRetention (24 h) after a job's last
// attempt. It feeds jobs at a steady rate for 48 simulated hours on a
// fake clock, one spawn each as processJob records it (attempt counted at
// the booking, spawn recorded with a name from WorkerName), pruning every
// ten simulated minutes as the poll loops do after each listing (every
// job has left the queue; pruning at each listing, every few seconds,
// would hold the same records, and cost the benchmark ten times more
// passes over the maps), so that the maps have reached their steady size,
// with a day of jobs in them and the deletions of the day before behind
// them. The heap they hold is the difference of runtime.MemStats.HeapAlloc
// after a forced collection, before and after; B/job divides it by the
// jobs held. V1 jobs are keyed by an int64 id, V2 run jobs by a UUID.
func BenchmarkDayOfJobRecords(b *testing.B) {
	for _, kind := range []string{"v1", "v2"} {
		for _, perHour := range []int{300, 1000} {
			b.Run(fmt.Sprintf("%s/%d-jobs-per-hour", kind, perHour), func(b *testing.B) {
				var held uint64
				var jobs int
				for range b.N {
					held, jobs = dayOfJobRecords(kind == "v2", perHour)
				}
				b.ReportMetric(float64(held)/(1<<20), "heap-MB")
				b.ReportMetric(float64(held)/float64(jobs), "B/job")
				b.ReportMetric(float64(jobs), "jobs-held")
			})
		}
	}
}

// jobRecords are the framework's per-job records (Framework.attempts,
// attemptsV2 and spawned).
type jobRecords struct {
	attempts   attemptCounter[int64]
	attemptsV2 attemptCounter[string]
	spawned    spawnedJobs
}

// pruneEvery is how often dayOfJobRecords prunes the records.
const pruneEvery = 10 * time.Minute

// dayOfJobRecords runs the 48 simulated hours and returns the heap the
// records hold at the end and the number of jobs they hold.
func dayOfJobRecords(v2 bool, perHour int) (held uint64, jobs int) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)

	r := &jobRecords{}
	r.attempts.init()
	r.attemptsV2.init()
	r.spawned.init()
	clock := testutil.NewClock(testutil.Epoch)
	every := time.Hour / time.Duration(perHour)
	nextPrune := clock.Now().Add(pruneEvery)
	none := func(int64) bool { return false }
	noneV2 := func(string) bool { return false }
	for i := range 48 * perHour {
		now := clock.Now()
		var c candidate
		if v2 {
			c.v2ID = fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", i, i>>16, i&0xfff, i>>4&0xfff, i*7919)
			r.attemptsV2.add(c.v2ID, now)
		} else {
			c.v1ID = 1_000_000 + int64(i)
			r.attempts.add(c.v1ID, now)
		}
		r.spawned.add(c.key(), WorkerName("", "shared.infra/debian12"), now)
		clock.Advance(every)
		if now := clock.Now(); !now.Before(nextPrune) {
			r.spawned.prune(now)
			r.attempts.prune(now, none)
			r.attemptsV2.prune(now, noneV2)
			nextPrune = now.Add(pruneEvery)
		}
	}

	runtime.GC()
	runtime.ReadMemStats(&after)
	jobs = len(r.spawned.jobs)
	if n := len(r.attempts.n) + len(r.attemptsV2.n); n != jobs {
		panic(fmt.Sprintf("%d attempt counts for %d spawned records", n, jobs))
	}
	runtime.KeepAlive(r)
	if after.HeapAlloc < before.HeapAlloc {
		return 0, jobs
	}
	return after.HeapAlloc - before.HeapAlloc, jobs
}
