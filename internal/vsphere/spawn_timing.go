package vsphere

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// SpawnStage names one timed stage of a spawn: the stage tag of
// spawn_stage_seconds (docs/metrics.md), a small fixed set.
type SpawnStage string

// Spawn stages, in the order a spawn goes through them.
const (
	// StageQueueToBook: the job waited in the CDS queue until this
	// hatchery booked (V1) or took (V2) it. Measured against the queue's
	// own "queued" time: a clock skew between the CDS API and the
	// hatchery shows here (a negative value is recorded as 0).
	StageQueueToBook SpawnStage = "queue_to_book"
	// StageBookToClone: booked until the clone (or the claim of a
	// pre-provisioned VM) is submitted to vCenter: flavor, credentials,
	// template, IP and clone specification — the hatchery's own work.
	StageBookToClone SpawnStage = "book_to_clone"
	// StageClone: the clone task, power-on included (the clone
	// specification powers the VM on).
	StageClone SpawnStage = "clone"
	// StageClaim: rename and reconfigure of a claimed pre-provisioned VM.
	StageClaim SpawnStage = "claim"
	// StagePowerOn: powering on a claimed VM (a clone powers on in its
	// clone task).
	StagePowerOn SpawnStage = "power_on"
	// StageIP: powered on until the guest reports its IP (guest
	// operations ready first, for a guest-operations bootstrap).
	StageIP SpawnStage = "ip"
	// StageGuestReady: IP known until a program runs in the guest
	// (guest-operations bootstrap only; cloud-init starts the worker
	// itself).
	StageGuestReady SpawnStage = "guest_ready"
	// StageLaunch: starting the worker in the guest (guest operations),
	// or recording the start for a cloud-init worker.
	StageLaunch SpawnStage = "launch"
)

// SpawnStages lists every stage, in the order a spawn goes through them.
var SpawnStages = []SpawnStage{
	StageQueueToBook, StageBookToClone, StageClone, StageClaim,
	StagePowerOn, StageIP, StageGuestReady, StageLaunch,
}

// SpawnTiming is the measured duration of each stage one spawn went
// through, and its job start (queued to worker launched).
type SpawnTiming struct {
	// Stages holds the stages the spawn went through, in order.
	Stages []StageDuration
	// JobStart runs from the job queued to the worker launched; 0 when the
	// queue time is unknown.
	JobStart time.Duration
	// Spawn runs from the job booked to the worker launched.
	Spawn time.Duration
}

// StageDuration is one stage's duration.
type StageDuration struct {
	Stage SpawnStage
	D     time.Duration
}

// String is the compact form used in logs and spawn infos:
// "queue_to_book=1.2s book_to_clone=0.1s clone=52s …".
func (t SpawnTiming) String() string {
	var b strings.Builder
	for i, s := range t.Stages {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(string(s.Stage))
		b.WriteByte('=')
		b.WriteString(roundStage(s.D).String())
	}
	return b.String()
}

// metricStages are t's stages for metrics.Metrics.SpawnTimed.
func (t SpawnTiming) metricStages() []metrics.Stage {
	out := make([]metrics.Stage, len(t.Stages))
	for i, s := range t.Stages {
		out[i] = metrics.Stage{Name: string(s.Stage), D: s.D}
	}
	return out
}

// roundStage rounds a stage for reading: milliseconds below 10 s,
// tenths of seconds above.
func roundStage(d time.Duration) time.Duration {
	if d < 10*time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}

// spawnClock records when a spawn crosses each stage boundary. The spawn
// path marks it through the context (markStage), so that the helpers the
// spawn shares with provisioning and registration need no extra argument;
// without a clock in the context a mark does nothing.
type spawnClock struct {
	now func() time.Time

	mu     sync.Mutex
	last   time.Time
	stages []StageDuration
}

type spawnClockKey struct{}

// newSpawnClock starts a clock at the job's booking (or now when the
// booking time is unknown) and records queue_to_book when the queue time
// is known.
func newSpawnClock(now func() time.Time, queued, booked time.Time) *spawnClock {
	c := &spawnClock{now: now, last: booked}
	if booked.IsZero() {
		c.last = now()
	}
	if !queued.IsZero() && !booked.IsZero() {
		c.stages = append(c.stages, StageDuration{StageQueueToBook, max(booked.Sub(queued), 0)})
	}
	return c
}

// withSpawnClock returns ctx carrying c.
func withSpawnClock(ctx context.Context, c *spawnClock) context.Context {
	return context.WithValue(ctx, spawnClockKey{}, c)
}

// markStage ends stage s of the spawn whose clock ctx carries: its
// duration runs from the previous mark. No clock: nothing.
func markStage(ctx context.Context, s SpawnStage) {
	c, _ := ctx.Value(spawnClockKey{}).(*spawnClock)
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.now()
	c.stages = append(c.stages, StageDuration{s, max(t.Sub(c.last), 0)})
	c.last = t
}

// timing is the spawn's stages so far, with its job start and spawn
// durations measured to now.
func (c *spawnClock) timing(queued, booked time.Time) SpawnTiming {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := SpawnTiming{Stages: append([]StageDuration(nil), c.stages...)}
	end := c.last
	if !booked.IsZero() {
		t.Spawn = max(end.Sub(booked), 0)
	}
	if !queued.IsZero() {
		t.JobStart = max(end.Sub(queued), 0)
	}
	return t
}

// reportSpawnTiming is the end of a successful spawn: the stage and job
// start histograms, one log line with every stage, and, when the start was
// slower than slowStartThreshold, a spawn info on the job saying where the
// time went.
func (h *HatcheryVSphere) reportSpawnTiming(ctx context.Context, args hatchery.SpawnArguments, c *spawnClock) {
	t := c.timing(args.Queued, args.Booked)
	model := args.Model.GetName()
	h.metrics.SpawnTimed(model, t.metricStages(), t.JobStart)
	if h.onTimed != nil {
		h.onTimed(args, t)
	}
	h.log.Info("spawn timings", logkey.VM, args.WorkerName, logkey.Job, args.JobID, logkey.Model, model,
		"job_start", roundStage(t.JobStart), "spawn", roundStage(t.Spawn), "stages", t.String())
	threshold := h.cfg.SlowStartThresholdDuration()
	total := t.JobStart
	if total == 0 {
		total = t.Spawn
	}
	if threshold <= 0 || total < threshold || h.cds == nil {
		return
	}
	msg := fmt.Sprintf("worker %s launched %s after the job was queued, slower than slowStartThreshold (%s): %s",
		args.WorkerName, roundStage(total), threshold, t.String())
	if args.Model.IsV1() {
		id, err := strconv.ParseInt(args.JobID, 10, 64)
		if err != nil {
			return
		}
		// MsgSpawnInfoHatcheryStarts ("Hatchery %s starts %s") is one of
		// the message ids the CDS API defines.
		info := sdk.SpawnInfo{RemoteTime: h.now(), Message: sdk.SpawnInfoMessage{
			ID: "MsgSpawnInfoHatcheryStarts", Args: []string{h.Name(), msg}}}
		err = h.cds.QueueJobSendSpawnInfo(ctx, id, []sdk.SpawnInfo{info})
		h.logSlowStart(args, err)
		return
	}
	err := h.cds.V2QueueJobSendInfo(ctx, h.cds.V2Region(), args.JobID, sdk.V2SendJobRunInfo{
		Level: sdk.JobRunInfoLevelWarning, Message: "hatchery " + h.Name() + ": " + msg, Time: h.now()})
	h.logSlowStart(args, err)
}

// logSlowStart logs the outcome of posting a slow-start spawn info.
func (h *HatcheryVSphere) logSlowStart(args hatchery.SpawnArguments, err error) {
	if err != nil {
		h.log.Warn("send slow start info failed", logkey.VM, args.WorkerName, logkey.Job, args.JobID, logkey.Err, err)
		return
	}
	h.log.Info("slow start reported to the job", logkey.VM, args.WorkerName, logkey.Job, args.JobID, logkey.Model, args.Model.GetName())
}
