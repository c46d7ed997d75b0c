package hatchery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
	"github.com/cds-contrib/hatchery-vsphere/sdk/workerpool"
)

// Spawn info message ids the CDS API defines (V1), with their arguments.
// The API stores an info with an id it does not know without a message,
// so users see nothing: only these are sent. It renders each with its
// text's %-verbs, so the argument count must match exactly
// (docs/architecture.md, "Meeting the CDS API").
const (
	// msgSpawnInfoHatcheryStarts: hatchery name, worker name, model.
	msgSpawnInfoHatcheryStarts = "MsgSpawnInfoHatcheryStarts"
	// msgSpawnInfoHatcheryErrorSpawn: hatchery name, model, duration, error.
	msgSpawnInfoHatcheryErrorSpawn = "MsgSpawnInfoHatcheryErrorSpawn"
	// msgSpawnErrorHatcheryRetryAttempt: hatchery name, reason; sent when
	// the hatchery fails a job after maxAttemptsNumberBeforeFailure attempts.
	msgSpawnErrorHatcheryRetryAttempt = "MsgSpawnErrorHatcheryRetryAttempt"
)

// V1 job status the hatchery serves.
const statusJobWaiting = "Waiting"

// candidate is a job to consider: a V1 job (from the poll, or only its id
// from an event) or a V2 run job id.
type candidate struct {
	v1   *sdk.WorkflowNodeJobRun
	v1ID int64
	v2ID string
	// batch is the queue poll that found the job (nil for an event).
	batch *pollBatch
}

func (c candidate) key() string {
	if c.v2ID != "" {
		return "v2:" + c.v2ID
	}
	return "v1:" + strconv.FormatInt(c.v1ID, 10)
}

// enqueue hands a job to the starters unless it is already queued or being
// processed, or a drain is on. It blocks while every starter is busy;
// false when the job was not queued.
func (f *Framework) enqueue(ctx context.Context, c candidate) bool {
	k := c.key()
	f.inflightMu.Lock()
	if _, ok := f.inflight[k]; ok || f.drain.on.Load() {
		f.inflightMu.Unlock()
		return false
	}
	f.inflight[k] = struct{}{}
	f.inflightMu.Unlock()
	select {
	case f.candidates <- c:
		return true
	case <-ctx.Done():
		f.done(k)
		return false
	}
}

func (f *Framework) isInflight(k string) bool {
	f.inflightMu.Lock()
	defer f.inflightMu.Unlock()
	_, ok := f.inflight[k]
	return ok
}

// inflightKeys returns the keys of the jobs queued or being processed now.
func (f *Framework) inflightKeys() map[string]bool {
	f.inflightMu.Lock()
	defer f.inflightMu.Unlock()
	m := make(map[string]bool, len(f.inflight))
	for k := range f.inflight {
		m[k] = true
	}
	return m
}

func (f *Framework) done(k string) {
	f.inflightMu.Lock()
	delete(f.inflight, k)
	f.inflightMu.Unlock()
	f.checkDrained()
}

// starter processes candidates one at a time until ctx ends. Run starts
// maxConcurrentProvisioning of them.
func (f *Framework) starter(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case c := <-f.candidates:
			f.progress.take(f.now())
			var o outcome
			switch {
			case f.drain.on.Load():
				// Queued before the drain: left in the queue for another
				// instance, untouched.
				o = outcomeNone
			case c.v2ID != "":
				o = f.processV2(ctx, c.v2ID)
			default:
				o = f.processV1(ctx, c)
			}
			f.done(c.key())
			f.progress.end(f.now())
			c.batch.record(o)
		}
	}
}

// skip logs why a job is not spawned for and tells the outcome: a
// refusal that waits for room (Reason.Waits) keeps the job waiting for
// capacity. A job refused again for the same reason logs at Debug: with a
// long queue the same refusal comes back every poll (the poll summary
// counts them).
func (f *Framework) skip(key, job, model string, r *refusal.Refusal) outcome {
	f.jobSkipped(r.Reason)
	lvl := slog.LevelInfo
	if !f.skips.First(key, r.Error()) {
		lvl = slog.LevelDebug
	}
	f.log.Log(context.Background(), lvl, "job skipped", logkey.Job, job, logkey.Model, model, logkey.Reason, r.Reason, logkey.Detail, r.Detail)
	if r.Reason.Waits() {
		return outcomeCapacity
	}
	return outcomeSkipped
}

// toldPrefix marks, in the skips' record of a job, a refusal already told
// to the job (queuedJob.refused), apart from its log line's record.
const toldPrefix = "told: "

// regionOK applies provision.region and ignoreJobWithNoRegion to a V1 job;
// when false, the string says why (a region refusal's detail).
func (f *Framework) regionOK(reqs sdk.RequirementList) (bool, string) {
	r := reqs.First(sdk.RegionRequirement)
	switch {
	case r == "" && f.cfg.Provision.IgnoreJobWithNoRegion:
		return false, "job has no region requirement and ignoreJobWithNoRegion is set"
	case r != "" && r != f.cfg.Provision.Region:
		return false, fmt.Sprintf("job requires %q, hatchery is in %q", r, f.cfg.Provision.Region)
	}
	return true, ""
}

// resolveModelV1 finds the model of a V1 job: its model requirement among
// the enabled V1 models, else the hatchery's default V2 model. When none
// fits, the string says why (a model refusal's detail).
func (f *Framework) resolveModelV1(ctx context.Context, job *sdk.WorkflowNodeJobRun) (sdk.WorkerStarterWorkerModel, string) {
	reqs := job.Job.Action.Requirements
	want := strings.Fields(reqs.First(sdk.ModelRequirement))
	if len(want) == 0 {
		d, ok := f.h.(InterfaceWithDefaultModelV2)
		if !ok {
			return sdk.WorkerStarterWorkerModel{}, "job has no model requirement"
		}
		m, err := d.DefaultModelV2(ctx, job)
		if err != nil {
			return sdk.WorkerStarterWorkerModel{}, "default v2 model: " + err.Error()
		}
		if m == nil {
			return sdk.WorkerStarterWorkerModel{}, "no model requirement and no default v2 model matches"
		}
		wm, reason := f.starterModelV2(*m, sdk.V2JobRunsOn{})
		return wm, reason
	}
	models, err := f.modelsV1(ctx, false)
	if err != nil {
		return sdk.WorkerStarterWorkerModel{}, err.Error()
	}
	for i := range models {
		m := models[i]
		if m.Path() != want[0] && !(!strings.Contains(want[0], "/") && m.Name == want[0]) {
			continue
		}
		switch {
		case m.Type != f.h.ModelType():
			return sdk.WorkerStarterWorkerModel{}, fmt.Sprintf("type %q is not %q", m.Type, f.h.ModelType())
		case m.Disabled:
			return sdk.WorkerStarterWorkerModel{}, "disabled"
		case m.NeedRegistration:
			return sdk.WorkerStarterWorkerModel{}, "needs registration first"
		}
		return sdk.WorkerStarterWorkerModel{ModelV1: &m}, ""
	}
	return sdk.WorkerStarterWorkerModel{}, fmt.Sprintf("%q not found among enabled models", want[0])
}

// starterModelV2 fills the starter model of a V2 model; the string says
// why it cannot (a model refusal's detail).
func (f *Framework) starterModelV2(m sdk.V2WorkerModel, runsOn sdk.V2JobRunsOn) (sdk.WorkerStarterWorkerModel, string) {
	if m.Type != f.h.ModelType() {
		return sdk.WorkerStarterWorkerModel{}, fmt.Sprintf("type %q is not %q", m.Type, f.h.ModelType())
	}
	spec, err := m.VSphereSpec()
	if err != nil {
		return sdk.WorkerStarterWorkerModel{}, "decode spec: " + err.Error()
	}
	wm := sdk.WorkerStarterWorkerModel{
		ModelV2:     &m,
		VSphereSpec: spec,
		JobFlavor:   runsOn.Flavor,
		JobMemory:   runsOn.Memory,
	}
	cmds := f.v2cmd(wm)
	wm.PreCmd, wm.Cmd, wm.PostCmd = cmds.PreCmd, cmds.Cmd, cmds.PostCmd
	return wm, ""
}

// admitted is what admit reserved for one job: the framework's slot and
// the hatchery's reservation (nil when the hatchery reserved nothing). The
// job's processing ends it on every path: handOff then the slot's
// spawned/release when SpawnWorker is called, release otherwise; a
// deferred release is the safety net (a panic). It is used by one
// goroutine.
type admitted struct {
	f       *Framework
	slot    *workerpool.Slot
	res     spawn.Reservation
	job     string
	model   string
	resDone bool // res released or handed to SpawnWorker
}

// handOff passes the hatchery's reservation to SpawnWorker, which ends it.
func (a *admitted) handOff() { a.resDone = true }

// release gives back what was reserved, unless it was handed to the
// spawn, and logs the decision once. Later calls do nothing.
func (a *admitted) release(why refusal.Reason) {
	a.slot.Release()
	if a.resDone {
		return
	}
	a.resDone = true
	if a.res == nil {
		return
	}
	a.res.Release(why)
	// Debug: the decision that led here logs its own line (job skipped,
	// spawn failed, giving up...).
	a.f.log.Debug("reservation released", logkey.Job, a.job, logkey.Model, a.model, logkey.Reason, why)
}

// admit runs CanSpawn, checkCapacities and CanAllocateResources (or
// AllocateResources) for a job; on success the caller owns the returned
// admitted and must end it (handOff or release).
func (f *Framework) admit(ctx context.Context, jobID string, model sdk.WorkerStarterWorkerModel, reqs []sdk.Requirement, workerName string) (*admitted, *refusal.Refusal) {
	if g, ok := f.h.(SpawnGate); ok {
		if r := g.GateSpawn(ctx, model, jobID); r != nil {
			return nil, r
		}
	}
	if r := f.h.CanSpawn(ctx, model, jobID, reqs); r != nil {
		return nil, r
	}
	s, refused := f.reserve(workerName, false)
	if s == nil {
		return nil, refused
	}
	a := &admitted{f: f, slot: s, job: jobID, model: model.GetName()}
	if ra, ok := f.h.(ResourceAllocator); ok {
		res, err := ra.AllocateResources(ctx, model, jobID, reqs)
		if err != nil {
			if res != nil {
				res.Release(refusal.ReasonCapacity) // a refusal reserves nothing; be safe
			}
			s.Release()
			return nil, refusal.AsRefusal(err)
		}
		a.res = res
		return a, nil
	}
	ok, err := f.h.CanAllocateResources(ctx, model, jobID, reqs)
	if err != nil || !ok {
		s.Release()
		if err != nil {
			return nil, refusal.AsRefusal(err)
		}
		return nil, refusal.Refuse(refusal.ReasonCapacity, "not enough room now")
	}
	return a, nil
}

// workerToken signs the worker's JWT.
func (f *Framework) workerToken(name string, model sdk.WorkerStarterWorkerModel, jobID int64, runJobID string, register bool) (string, error) {
	w := WorkerJWTWorker{WorkerName: name, JobID: jobID, RunJobID: runJobID, RegisterOnly: register}
	if model.ModelV1 != nil {
		w.Model = WorkerJWTModel{ID: model.ModelV1.ID, Name: model.ModelV1.Path()}
	} else {
		w.Model = WorkerJWTModel{Name: model.GetName()}
	}
	return SignWorkerJWT(f.key, newWorkerJWTClaims(f.cfg.Name, f.now(), w))
}

// processV1 handles one V1 job (processJob).
func (f *Framework) processV1(ctx context.Context, c candidate) outcome {
	return f.processJob(ctx, f.v1Job(c))
}

// processV2 handles one V2 run job (processJob).
func (f *Framework) processV2(ctx context.Context, id string) outcome {
	return f.processJob(ctx, f.v2Job(id))
}

// processJob handles one job, V1 or V2 (queuedJob holds what differs):
// the attempt cap, the job's read and filters, its model, the admission,
// the booking, the spawn, the job's infos, and the release or the
// failure of the job when the spawn fails.
func (f *Framework) processJob(ctx context.Context, j *queuedJob) outcome {
	key, id := j.key, j.id
	maxAttempts := f.cfg.Provision.MaxAttemptsNumberBeforeFailure
	if j.giveUp == nil {
		if n := j.count(); maxAttempts > 0 && n >= maxAttempts {
			return f.skip(key, id, "", refusal.Refuse(refusal.ReasonAttempts, "gave up after %d attempts", n))
		}
	}
	if !j.read(ctx) {
		return outcomeNone
	}
	if j.status != "" && j.status != statusJobWaiting {
		f.log.Debug("job skipped", logkey.Job, id, logkey.Detail, "status "+j.status)
		return outcomeNone
	}
	if j.holder != "" && j.holder != f.cfg.Name {
		return f.skip(key, id, j.holderModel, refusal.Refuse(refusal.ReasonBooked, j.holderDetail, j.holder))
	}
	if j.checkRegion {
		if ok, detail := f.regionOK(j.reqs); !ok {
			return f.skip(key, id, "", refusal.Refuse(refusal.ReasonRegion, "%s", detail))
		}
	}
	model, detail := j.model(ctx)
	if detail != "" {
		return f.skip(key, id, j.modelHint, refusal.Refuse(refusal.ReasonModel, "%s", detail))
	}
	name := WorkerName("", model.GetName())
	a, refused := f.admit(ctx, id, model, j.reqs, name)
	if a == nil {
		if refused.Reason.TellsJob() && j.refused != nil && f.skips.First(key, toldPrefix+refused.Error()) {
			j.refused(ctx, refused)
		}
		return f.skip(key, id, model.GetName(), refused)
	}
	s := a.slot
	defer a.release(refusal.ReasonAbandoned) // safety net: every path below ends a first

	if f.drain.on.Load() {
		// A drain started while the job was admitted: it is not booked,
		// and stays in the queue for another instance.
		a.release(refusal.ReasonShutdown)
		return outcomeNone
	}
	if err := j.book(ctx); err != nil {
		if ctx.Err() != nil {
			a.release(refusal.ReasonShutdown)
			f.releaseCutBooking(ctx, j)
			return outcomeNone
		}
		if reason, why, lost := j.lost(err); lost {
			a.release(reason)
			f.log.Debug("job skipped", logkey.Job, id, logkey.Model, model.GetName(), logkey.Reason, reason, logkey.Detail, why)
			f.jobSkipped(reason)
			return outcomeSkipped
		}
		a.release(refusal.ReasonBookFailed)
		return f.skip(key, id, model.GetName(), &refusal.Refusal{Reason: refusal.ReasonBookFailed, Detail: j.bookDetail + err.Error(), Err: err})
	}
	f.skips.Forget(key)
	booked := f.now()
	if j.giveUp != nil {
		if n := j.count(); maxAttempts > 0 && n >= maxAttempts {
			a.release(refusal.ReasonAttempts)
			j.giveUp(ctx, model, n)
			return outcomeFailed
		}
	}
	n := j.add(booked)
	token, err := f.workerToken(name, model, j.jobID, j.runJobID, false)
	if err != nil {
		a.release(refusal.ReasonWorkerToken)
		j.failed(ctx, model, name, booked, n, err)
		return outcomeFailed
	}
	args := spawn.Arguments{
		WorkerName:   name,
		Model:        model,
		JobID:        id,
		Requirements: j.reqs,
		HatcheryName: f.cfg.Name,
		WorkerConfig: buildWorkerConfig(f.cfg, f.workerCDN(), f.workerLg, workerConfigInput{
			Name: name, Model: model.GetName(), JobID: j.jobID, RunJobID: j.runJobID, Token: token,
		}),
		Queued:      j.queued,
		Booked:      booked,
		Reservation: a.res,
	}
	ev := SpawnEvent{Model: model.GetName(), JobID: id, V2: j.v2}
	j.starting(ctx, name, model)
	f.log.Info("spawning worker", logkey.Job, id, logkey.Model, model.GetName(), logkey.VM, name, "attempt", n)
	f.obs.SpawnStarted(ev)
	a.handOff()
	err = f.h.SpawnWorker(ctx, args)
	d := f.now().Sub(booked)
	if err != nil {
		s.Release()
		ev.Err = err
		f.obs.SpawnFailed(ev, d)
		if r := (*refusal.Refusal)(nil); errors.As(err, &r) {
			// A refusal at spawn time (the hatchery found no room left
			// since its admission): a refusal of the job like any other.
			f.jobSkipped(r.Reason)
		}
		if uncountedSpawnError(err) {
			n = j.undo()
		}
		j.failed(ctx, model, name, booked, n, err)
		return outcomeFailed
	}
	s.Spawned()
	f.obs.SpawnSucceeded(ev, d)
	f.spawned.add(key, name, booked)
	f.log.Info("worker spawned", logkey.Job, id, logkey.Model, model.GetName(), logkey.VM, name, "duration", d)
	if j.started != nil {
		j.started(ctx, name, d)
	}
	return outcomeStarted
}

// errNotBookedHere: the job is not booked by this hatchery.
var errNotBookedHere = errors.New("not booked by this hatchery")

// releaseCutBooking releases job j after the shutdown cut its booking's
// request: the API may have booked the job before the cancel reached it,
// and would keep it booked by this hatchery after its exit (a V1 booking
// lasts two minutes). One release, bounded by the detached context, of a
// job this hatchery holds only (V1: read first; V2: the API checks): a
// job the API did not book for it is a debug line; any other failure is
// logged at INFO (the process is stopping, and a booking expires).
func (f *Framework) releaseCutBooking(ctx context.Context, j *queuedJob) {
	rctx, cancel := f.detached(ctx)
	defer cancel()
	switch err := j.unbook(rctx); {
	case err == nil:
		f.log.Info("job released: the shutdown cut its booking's answer", logkey.Job, j.id)
	case errors.Is(err, cdsclient.ErrAlreadyReleased), errors.Is(err, errNotBookedHere):
		f.log.Debug("job not booked here: the shutdown cut its booking before the api booked it", logkey.Job, j.id, logkey.Err, err)
	default:
		f.log.Info("release after a booking cut by the shutdown failed", logkey.Job, j.id, logkey.Err, err)
	}
}

// afterV1Failure reports a failed spawn (attempt n), then releases the job
// or, at maxAttemptsNumberBeforeFailure attempts, fails it. It uses a
// context that survives shutdown so no booking is left behind.
func (f *Framework) afterV1Failure(ctx context.Context, id int64, model sdk.WorkerStarterWorkerModel, name string, booked time.Time, n int, spawnErr error) {
	jobKey := strconv.FormatInt(id, 10)
	dctx, cancel := f.detached(ctx)
	defer cancel()
	d := f.now().Sub(booked)
	f.sendSpawnInfo(dctx, id, msgSpawnInfoHatcheryErrorSpawn, f.cfg.Name, model.GetName(), d.Round(time.Second).String(), spawnErr.Error())
	uncounted := uncountedSpawnError(spawnErr)
	if maxAttempts := f.cfg.Provision.MaxAttemptsNumberBeforeFailure; maxAttempts > 0 && n >= maxAttempts && !uncounted {
		f.failV1Job(ctx, id, model, n, fmt.Sprintf("could not start a worker after %d attempts: %v", n, spawnErr))
		return
	}
	f.warnSpawnFailure(ctx, "spawn failed, releasing job", logkey.Job, jobKey, logkey.Model, model.GetName(), logkey.VM, name, logkey.Err, spawnErr, "attempts", n, "attempt_counted", !uncounted)
	if err := f.releaseRetried(ctx, jobKey, func(rctx context.Context) error { return f.client.QueueJobRelease(rctx, id) }); err != nil {
		f.log.Warn("release job failed", logkey.Job, jobKey, logkey.Err, err)
	}
}

// failV1Job gives up on a booked V1 job after n attempts: a spawn info
// saying why, then a failed result without a reason. The CDS API posts a
// failed result's reason to the job as one more info, so a reason
// repeating the spawn info showed the same words twice on the job (the
// second time as "hatchery NAME: why"); the spawn info alone names the
// hatchery and the reason. It uses a context that survives shutdown.
func (f *Framework) failV1Job(ctx context.Context, id int64, model sdk.WorkerStarterWorkerModel, n int, why string) {
	jobKey := strconv.FormatInt(id, 10)
	dctx, cancel := f.detached(ctx)
	defer cancel()
	f.log.Warn("giving up on job, failing it", logkey.Job, jobKey, logkey.Model, model.GetName(), logkey.Reason, refusal.ReasonAttempts, logkey.Detail, why, "attempts", n)
	f.sendSpawnInfo(dctx, id, msgSpawnErrorHatcheryRetryAttempt, f.cfg.Name, why)
	if err := f.client.QueueJobFail(dctx, id, ""); err != nil {
		f.log.Warn("fail job failed", logkey.Job, jobKey, logkey.Err, err)
		return
	}
	f.attempts.forget(id)
	f.spawned.seen(candidate{v1ID: id}.key())
}

// sendSpawnInfo posts one spawn info; failures are logged only.
func (f *Framework) sendSpawnInfo(ctx context.Context, id int64, msgID string, args ...string) {
	info := sdk.SpawnInfo{RemoteTime: f.now(), Message: sdk.SpawnInfoMessage{ID: msgID, Args: args}}
	if err := f.client.QueueJobSendSpawnInfo(ctx, id, []sdk.SpawnInfo{info}); err != nil && ctx.Err() == nil {
		f.log.Warn("send spawn info failed", logkey.Job, strconv.FormatInt(id, 10), logkey.Err, err)
	}
}

// sendV2Info posts one V2 job run info; failures are logged only.
func (f *Framework) sendV2Info(ctx context.Context, region, id, level, msg string) {
	err := f.client.V2QueueJobSendInfo(ctx, region, id, sdk.V2SendJobRunInfo{Level: level, Message: msg, Time: f.now()})
	if err != nil && ctx.Err() == nil {
		f.log.Warn("send v2 job info failed", logkey.Job, id, logkey.Err, err)
	}
}

// warnSpawnFailure logs msg at WARN, or at INFO once ctx has ended
// or when an error among args is a *refusal.Refusal: a spawn cut by the
// shutdown, or refused when it tried, is released, not failed (a healthy
// run logs no WARN).
func (f *Framework) warnSpawnFailure(ctx context.Context, msg string, args ...any) {
	var r *refusal.Refusal
	for _, a := range args {
		if err, ok := a.(error); ok && errors.As(err, &r) {
			// A refusal at spawn time (a template quarantined, no address
			// left since the admission) waits, uncounted: not a fault.
			f.log.Info(msg+" (refused: "+string(r.Reason)+")", append(args, logkey.Reason, r.Reason)...)
			return
		}
	}
	if ctx.Err() != nil {
		f.log.Info(msg+" (shutting down)", args...)
		return
	}
	f.log.Warn(msg, args...)
}
