package spawntiming

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// Stage names one timed stage of a spawn: the stage tag of
// spawn_stage_seconds (docs/metrics.md), a small fixed set.
type Stage string

// Spawn stages, in the order a spawn goes through them.
const (
	// StageQueueToBook: the job waited in the CDS queue until this
	// hatchery booked (V1) or took (V2) it. Measured against the queue's
	// own "queued" time: a clock skew between the CDS API and the
	// hatchery shows here (a negative value is recorded as 0).
	StageQueueToBook Stage = "queue_to_book"
	// StageBookToClone: booked until the clone (or the claim of a
	// pre-provisioned VM) is submitted to vCenter: flavor, credentials,
	// template, IP and clone specification — the hatchery's own work.
	StageBookToClone Stage = "book_to_clone"
	// StageClone: the clone task, power-on included (the clone
	// specification powers the VM on).
	StageClone Stage = "clone"
	// StageClaim: rename and reconfigure of a claimed pre-provisioned VM.
	StageClaim Stage = "claim"
	// StagePowerOn: powering on a claimed VM (a clone powers on in its
	// clone task).
	StagePowerOn Stage = "power_on"
	// StageIP: powered on until the guest reports its IP (guest
	// operations ready first, for a guest-operations bootstrap).
	StageIP Stage = "ip"
	// StageGuestReady: IP known until a program runs in the guest
	// (guest-operations bootstrap only; cloud-init starts the worker
	// itself).
	StageGuestReady Stage = "guest_ready"
	// StageLaunch: starting the worker in the guest (guest operations),
	// or recording the start for a cloud-init worker.
	StageLaunch Stage = "launch"
)

// Stages lists every stage, in the order a spawn goes through them.
var Stages = []Stage{
	StageQueueToBook, StageBookToClone, StageClone, StageClaim,
	StagePowerOn, StageIP, StageGuestReady, StageLaunch,
}

// Timing is the measured duration of each stage one spawn went
// through, and its job start (queued to worker launched).
type Timing struct {
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
	// Stage is the stage.
	Stage Stage
	// D is how long the spawn spent in it.
	D time.Duration
}

// String is the compact form used in logs and spawn infos:
// "queue_to_book=1.2s book_to_clone=0.1s clone=52s …".
func (t Timing) String() string {
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

// MetricStages are t's stages for metrics.Metrics.SpawnTimed.
func (t Timing) MetricStages() []metrics.Stage {
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

// Clock records when a spawn crosses each stage boundary. The spawn
// path marks it through the context (Mark), so that the helpers the
// spawn shares with provisioning and registration need no extra argument;
// without a clock in the context a mark does nothing.
type Clock struct {
	now func() time.Time

	mu     sync.Mutex
	last   time.Time
	stages []StageDuration
}

type clockKey struct{}

// NewClock starts a clock at the job's booking (or now when the
// booking time is unknown) and records queue_to_book when the queue time
// is known.
func NewClock(now func() time.Time, queued, booked time.Time) *Clock {
	c := &Clock{now: now, last: booked}
	if booked.IsZero() {
		c.last = now()
	}
	if !queued.IsZero() && !booked.IsZero() {
		c.stages = append(c.stages, StageDuration{StageQueueToBook, max(booked.Sub(queued), 0)})
	}
	return c
}

// WithClock returns ctx carrying c.
func WithClock(ctx context.Context, c *Clock) context.Context {
	return context.WithValue(ctx, clockKey{}, c)
}

// Mark ends stage s of the spawn whose clock ctx carries: its
// duration runs from the previous mark. No clock: nothing.
func Mark(ctx context.Context, s Stage) {
	c, _ := ctx.Value(clockKey{}).(*Clock)
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.now()
	c.stages = append(c.stages, StageDuration{s, max(t.Sub(c.last), 0)})
	c.last = t
}

// Timing is the spawn's stages so far, with its job start and spawn
// durations measured to now.
func (c *Clock) Timing(queued, booked time.Time) Timing {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := Timing{Stages: append([]StageDuration(nil), c.stages...)}
	end := c.last
	if !booked.IsZero() {
		t.Spawn = max(end.Sub(booked), 0)
	}
	if !queued.IsZero() {
		t.JobStart = max(end.Sub(queued), 0)
	}
	return t
}

// JobInfo is what a Reporter needs of the CDS API: posting an info on a
// job. cdsclient.Interface implements it.
type JobInfo interface {
	// QueueJobSendSpawnInfo posts spawn infos on a V1 job.
	QueueJobSendSpawnInfo(ctx context.Context, id int64, infos []sdk.SpawnInfo) error
	// V2Region is the region of the V2 queue.
	V2Region() string
	// V2QueueJobSendInfo posts an info on a V2 job.
	V2QueueJobSendInfo(ctx context.Context, region, id string, info sdk.V2SendJobRunInfo) error
}

// Reporter reports the timing of successful spawns. A nil CDS or a zero
// SlowStartThreshold turns the spawn info off.
type Reporter struct {
	// Hatchery is the hatchery's name, written in the V2 job infos.
	Hatchery string
	// Metrics receives the histograms; nil: not recorded.
	Metrics *metrics.Metrics
	// Log receives one line per spawn and the spawn info's outcome.
	Log *slog.Logger
	// CDS posts the spawn info on the job.
	CDS JobInfo
	// SlowStartThreshold is slowStartThreshold: a slower start is
	// reported on the job.
	SlowStartThreshold time.Duration
	// Now is the time of the spawn info.
	Now func() time.Time
	// OnTimed, when set (benchmarks), receives every timing reported.
	OnTimed func(spawn.Arguments, Timing)
}

// Report is the end of a successful spawn: the stage and job start
// histograms, one log line with every stage, and, when the start was
// slower than SlowStartThreshold, a spawn info on the job saying where the
// time went.
func (r Reporter) Report(ctx context.Context, args spawn.Arguments, c *Clock) {
	t := c.Timing(args.Queued, args.Booked)
	model := args.Model.GetName()
	r.Metrics.SpawnTimed(model, t.MetricStages(), t.JobStart)
	if r.OnTimed != nil {
		r.OnTimed(args, t)
	}
	r.Log.Info("spawn timings", logkey.VM, args.WorkerName, logkey.Job, args.JobID, logkey.Model, model,
		"job_start", roundStage(t.JobStart), "spawn", roundStage(t.Spawn), "stages", t.String())
	threshold := r.SlowStartThreshold
	total := t.JobStart
	if total == 0 {
		total = t.Spawn
	}
	if threshold <= 0 || total < threshold || r.CDS == nil {
		return
	}
	since := "queued"
	if t.JobStart == 0 {
		since = "booked"
	}
	slow := fmt.Sprintf("launched %s after the job was %s, slower than slowStartThreshold (%s): %s",
		roundStage(total), since, threshold, t.String())
	if args.Model.IsV1() {
		id, err := strconv.ParseInt(args.JobID, 10, 64)
		if err != nil {
			return
		}
		err = r.CDS.QueueJobSendSpawnInfo(ctx, id, []sdk.SpawnInfo{SlowStartSpawnInfo(r.Now(), args.WorkerName, slow)})
		r.logSlowStart(args, err)
		return
	}
	err := r.CDS.V2QueueJobSendInfo(ctx, r.CDS.V2Region(), args.JobID, sdk.V2SendJobRunInfo{
		Level: sdk.JobRunInfoLevelWarning, Message: "hatchery " + r.Hatchery + ": worker " + args.WorkerName + " " + slow, Time: r.Now()})
	r.logSlowStart(args, err)
}

// MsgSpawnInfoWorkerForJob is the V1 spawn-info id of the slow-start
// notice. The API renders it "This worker %s was created to take this
// action" with its one argument: the worker's name followed by the
// notice in parentheses reads as one sentence in the CDS UI.
const MsgSpawnInfoWorkerForJob = "MsgSpawnInfoWorkerForJob"

// SlowStartSpawnInfo is the V1 spawn info of a slow start: worker is the
// worker's name, slow says how slow ("launched 3m after the job was queued,
// ..."). Its one argument matches the one %-verb of its message.
func SlowStartSpawnInfo(at time.Time, worker, slow string) sdk.SpawnInfo {
	return sdk.SpawnInfo{RemoteTime: at, Message: sdk.SpawnInfoMessage{
		ID: MsgSpawnInfoWorkerForJob, Args: []string{worker + " (" + slow + ")"}}}
}

// logSlowStart logs the outcome of posting a slow-start spawn info.
func (r Reporter) logSlowStart(args spawn.Arguments, err error) {
	if err != nil {
		r.Log.Warn("send slow start info failed", logkey.VM, args.WorkerName, logkey.Job, args.JobID, logkey.Err, err)
		return
	}
	r.Log.Info("slow start reported to the job", logkey.VM, args.WorkerName, logkey.Job, args.JobID, logkey.Model, args.Model.GetName())
}
