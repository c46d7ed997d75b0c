package hatchery

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
)

// queuedJob is one job as the one processing path (processJob) sees it:
// what differs between a V1 job and a V2 run job is data and functions
// here, filled by v1Job and v2Job: how the job is read, booked, counted,
// reported and given up on.
type queuedJob struct {
	// key is the candidate's key ("v1:ID", "v2:ID").
	key string
	// id is the job's id as the logs, the admission and spawn.Arguments
	// name it (V1 decimal, V2 run job id).
	id string
	// v2 is true for a V2 run job.
	v2 bool
	// jobID and runJobID are the ids the worker's token and configuration
	// carry (V1 jobID, V2 runJobID; the other is zero).
	jobID    int64
	runJobID string

	// read reads the job and fills the fields below; false when it cannot
	// be read (logged when it matters): nothing to do.
	read func(ctx context.Context) bool
	// status is the job's status ("" unknown); only a waiting job is served.
	status string
	// holder is who booked (V1) or took (V2) the job, "" no one;
	// holderDetail formats a refusal's detail from it.
	holder, holderDetail string
	// holderModel is the model named by a refusal for the holder.
	holderModel string
	// checkRegion applies provision.region to reqs (V1).
	checkRegion bool
	// reqs are the job's requirements (V1; a V2 job's flavor is its model's).
	reqs sdk.RequirementList
	// queued is when CDS queued the job.
	queued time.Time
	// model resolves the job's worker model; a non-empty string says why
	// not, and modelHint is the model a model refusal names.
	model     func(ctx context.Context) (sdk.WorkerStarterWorkerModel, string)
	modelHint string

	// book books (V1) or takes (V2) the job; lost classifies an error of
	// book that means another hatchery has it or it left the queue (false:
	// a failure); bookDetail prefixes a failure's detail.
	book       func(ctx context.Context) error
	lost       func(err error) (refusal.Reason, string, bool)
	bookDetail string
	// unbook releases a booking (V1) or take (V2) made by book, and no
	// other hatchery's (errNotBookedHere).
	unbook func(ctx context.Context) error

	// attempts counts the job's spawn attempts.
	count func() int
	add   func(now time.Time) int
	undo  func() int
	// giveUp fails a booked job past maxAttemptsNumberBeforeFailure
	// attempts (V1). Nil when the API has no fail route (V2): the cap is
	// then checked before the job is read, and the job skipped.
	giveUp func(ctx context.Context, model sdk.WorkerStarterWorkerModel, n int)

	// starting tells the job a worker starts; started, when set, that it
	// started in d.
	starting func(ctx context.Context, name string, model sdk.WorkerStarterWorkerModel)
	started  func(ctx context.Context, name string, d time.Duration)
	// failed reports a failed spawn (attempt n, booked at booked), then
	// releases the job or, past the cap, gives up on it.
	failed func(ctx context.Context, model sdk.WorkerStarterWorkerModel, name string, booked time.Time, n int, spawnErr error)
	// refused tells the job's users why the admission refused it (a
	// refusal whose code TellsJob); nil when the job has no free-text
	// info (V1: its spawn infos are the API's fixed messages).
	refused func(ctx context.Context, r *refusal.Refusal)
}

// v1Job describes the V1 job of candidate c (its id, and the job when the
// poll read it).
func (f *Framework) v1Job(c candidate) *queuedJob {
	id := c.v1ID
	j := &queuedJob{key: c.key(), id: strconv.FormatInt(id, 10), jobID: id, checkRegion: true, holderDetail: "by %s"}
	job := c.v1
	j.read = func(ctx context.Context) bool {
		if job == nil {
			got, err := f.client.QueueJobInfo(ctx, id)
			if err != nil {
				if ctx.Err() == nil && !errors.Is(err, cdsclient.ErrForbidden) && !errors.Is(err, cdsclient.ErrNotFound) {
					f.log.Warn("get job info failed", logkey.Job, j.id, logkey.Err, err)
				}
				return false
			}
			job = got
		}
		j.status, j.holder, j.queued = job.Status, job.BookedBy.Name, job.Queued
		j.reqs = job.Job.Action.Requirements
		j.modelHint = j.reqs.First(sdk.ModelRequirement)
		return true
	}
	j.model = func(ctx context.Context) (sdk.WorkerStarterWorkerModel, string) { return f.resolveModelV1(ctx, job) }
	j.book = func(ctx context.Context) error {
		_, err := f.client.QueueJobBook(ctx, id)
		return err
	}
	j.unbook = func(ctx context.Context) error {
		// The V1 API releases a booking whoever made it: only a job
		// this hatchery holds is released.
		got, err := f.client.QueueJobInfo(ctx, id)
		if err != nil {
			return err
		}
		if got.BookedBy.Name != f.cfg.Name {
			return fmt.Errorf("job %d: %w (booked by %q)", id, errNotBookedHere, got.BookedBy.Name)
		}
		return f.client.QueueJobRelease(ctx, id)
	}
	j.lost = func(err error) (refusal.Reason, string, bool) {
		switch {
		case errors.Is(err, cdsclient.ErrAlreadyBooked):
			return refusal.ReasonBooked, "booked by another hatchery", true
		case errors.Is(err, cdsclient.ErrNotFound):
			return refusal.ReasonJobGone, "job left the queue", true
		}
		return "", "", false
	}
	j.count = func() int { return f.attempts.count(id) }
	j.add = func(now time.Time) int { return f.attempts.add(id, now) }
	j.undo = func() int { return f.attempts.undo(id) }
	j.giveUp = func(ctx context.Context, model sdk.WorkerStarterWorkerModel, n int) {
		// Every earlier attempt spawned a worker or failed to, and the job
		// is still waiting: no worker took it. Give up on it.
		f.failV1Job(ctx, id, model, n, fmt.Sprintf("no worker took the job after %d spawn attempts", n))
	}
	j.starting = func(ctx context.Context, name string, model sdk.WorkerStarterWorkerModel) {
		f.sendSpawnInfo(ctx, id, msgSpawnInfoHatcheryStarts, f.cfg.Name, name, model.GetName())
	}
	j.failed = func(ctx context.Context, model sdk.WorkerStarterWorkerModel, name string, booked time.Time, n int, spawnErr error) {
		f.afterV1Failure(ctx, id, model, name, booked, n, spawnErr)
	}
	return j
}

// v2Job describes the V2 run job id.
func (f *Framework) v2Job(id string) *queuedJob {
	// The V2 queue routes take the region the V2 sign-in answered.
	region := f.client.V2Region()
	j := &queuedJob{key: candidate{v2ID: id}.key(), id: id, v2: true, runJobID: id, holderDetail: "taken by %s", bookDetail: "take: "}
	var info *sdk.V2QueueJobInfo
	j.read = func(ctx context.Context) bool {
		got, err := f.client.V2QueueJobInfo(ctx, region, id)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, cdsclient.ErrNotFound) {
				f.log.Warn("get v2 job info failed", logkey.Job, id, logkey.Err, err)
			}
			return false
		}
		info = got
		rj := info.RunJob
		j.status, j.holder, j.queued = rj.Status, rj.HatcheryName, rj.Queued
		j.holderModel, j.modelHint = info.Model.Name, info.Model.Name
		return true
	}
	j.model = func(context.Context) (sdk.WorkerStarterWorkerModel, string) {
		return f.starterModelV2(info.Model, info.RunJob.Job.RunsOn)
	}
	j.book = func(ctx context.Context) error { return f.client.V2QueueJobTake(ctx, region, id) }
	// The V2 API releases only a job this hatchery took.
	j.unbook = func(ctx context.Context) error { return f.client.V2QueueJobRelease(ctx, region, id) }
	j.lost = func(err error) (refusal.Reason, string, bool) {
		// The V2 API answers 404 for a job another hatchery took.
		if errors.Is(err, cdsclient.ErrAlreadyBooked) || errors.Is(err, cdsclient.ErrNotFound) {
			return refusal.ReasonBooked, "taken by another hatchery", true
		}
		return "", "", false
	}
	j.count = func() int { return f.attemptsV2.count(id) }
	j.add = func(now time.Time) int { return f.attemptsV2.add(id, now) }
	j.undo = func() int { return f.attemptsV2.undo(id) }
	// giveUp nil: V2 has no fail route; the job stays in the queue for
	// other hatcheries and this one stops taking it until its count is
	// forgotten (out of the queue for attemptsRetention).
	j.starting = func(ctx context.Context, name string, model sdk.WorkerStarterWorkerModel) {
		f.sendV2Info(ctx, region, id, sdk.JobRunInfoLevelInfo, fmt.Sprintf("hatchery %s starts worker %s with model %s", f.cfg.Name, name, model.GetName()))
	}
	j.started = func(ctx context.Context, name string, d time.Duration) {
		f.sendV2Info(ctx, region, id, sdk.JobRunInfoLevelInfo, fmt.Sprintf("hatchery %s started worker %s in %s", f.cfg.Name, name, d.Round(time.Second)))
	}
	j.failed = func(ctx context.Context, model sdk.WorkerStarterWorkerModel, name string, _ time.Time, n int, spawnErr error) {
		f.afterV2Failure(ctx, region, id, model, name, n, spawnErr)
	}
	j.refused = func(ctx context.Context, r *refusal.Refusal) {
		f.sendV2Info(ctx, region, id, sdk.JobRunInfoLevelWarning, fmt.Sprintf("hatchery %s does not start workers for this job: %s", f.cfg.Name, r.Detail))
	}
	return j
}

// afterV2Failure reports a failed spawn of a V2 run job (attempt n) in
// its job run infos and releases the job; at maxAttemptsNumberBeforeFailure
// attempts the info says this hatchery gives up on it. It uses a context
// that survives shutdown so no job is left taken.
func (f *Framework) afterV2Failure(ctx context.Context, region, id string, model sdk.WorkerStarterWorkerModel, name string, n int, spawnErr error) {
	dctx, cancel := f.detached(ctx)
	defer cancel()
	msg := fmt.Sprintf("hatchery %s could not start worker %s: %v", f.cfg.Name, name, spawnErr)
	if maxAttempts := f.cfg.Provision.MaxAttemptsNumberBeforeFailure; maxAttempts > 0 && n >= maxAttempts && !uncountedSpawnError(spawnErr) {
		f.log.Warn("spawn failed, releasing job and giving up on it", logkey.Job, id, logkey.Model, model.GetName(), logkey.VM, name, logkey.Err, spawnErr, "attempts", n)
		msg = fmt.Sprintf("hatchery %s gives up after %d attempts to start a worker, last error: %v", f.cfg.Name, n, spawnErr)
	} else {
		f.warnSpawnFailure(ctx, "spawn failed, releasing job", logkey.Job, id, logkey.Model, model.GetName(), logkey.VM, name, logkey.Err, spawnErr, "attempts", n, "attempt_counted", !uncountedSpawnError(spawnErr))
	}
	f.sendV2Info(dctx, region, id, sdk.JobRunInfoLevelError, msg)
	if err := f.releaseRetried(ctx, id, func(rctx context.Context) error { return f.client.V2QueueJobRelease(rctx, region, id) }); err != nil {
		f.log.Warn("release v2 job failed", logkey.Job, id, logkey.Err, err)
	}
}
