package hatchery

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// allocHatchery is the fake hatchery with a reserving admission: every
// AllocateResources hands out a recorded reservation, unless refuse is set.
type allocHatchery struct {
	*fakeHatchery

	mu      sync.Mutex
	res     []*fakeReservation
	refuse  error
	onAlloc func() // runs inside AllocateResources (interleaves events)
	atSpawn []bool // per SpawnWorker: was the job's reservation released already
	byJob   map[string]*fakeReservation
}

func newAllocHatchery() *allocHatchery {
	return &allocHatchery{fakeHatchery: newFakeHatchery(), byJob: map[string]*fakeReservation{}}
}

var _ ResourceAllocator = (*allocHatchery)(nil)

// fakeReservation records its releases.
type fakeReservation struct {
	mu   sync.Mutex
	job  string
	whys []refusal.Reason
}

func (r *fakeReservation) Release(why refusal.Reason) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.whys = append(r.whys, why)
}

func (r *fakeReservation) releases() []refusal.Reason {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]refusal.Reason(nil), r.whys...)
}

func (h *allocHatchery) AllocateResources(ctx context.Context, m sdk.WorkerStarterWorkerModel, jobID string, reqs []sdk.Requirement) (spawn.Reservation, error) {
	h.mu.Lock()
	hook, refuse := h.onAlloc, h.refuse
	h.mu.Unlock()
	if hook != nil {
		hook()
	}
	if refuse != nil {
		return nil, refuse
	}
	r := &fakeReservation{job: jobID}
	h.mu.Lock()
	h.res = append(h.res, r)
	h.byJob[jobID] = r
	h.mu.Unlock()
	return r, nil
}

func (h *allocHatchery) SpawnWorker(ctx context.Context, args spawn.Arguments) error {
	h.mu.Lock()
	r := h.byJob[args.JobID]
	h.mu.Unlock()
	h.mu.Lock()
	h.atSpawn = append(h.atSpawn, r != nil && len(r.releases()) > 0)
	h.mu.Unlock()
	return h.fakeHatchery.SpawnWorker(ctx, args)
}

// only returns the single reservation made.
func (h *allocHatchery) only(t *testing.T) *fakeReservation {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Len(t, h.res, 1, "one admission")
	return h.res[0]
}

// hookClient is the fake client with a hook run before a booking (V1) or
// take (V2) is answered, and answering a cancelled context's error as the
// real client does.
type hookClient struct {
	*fakeClient
	beforeBook func()
	// afterBook runs once the fake has booked (or taken) the job, before
	// the answer: a context it cancels loses the answer, as a request the
	// API served is cut by a shutdown.
	afterBook func()
	// bookErr, when set, is the V1 booking's answer.
	bookErr error
}

// answered is err, or the context's error when afterBook cancelled it.
func (c *hookClient) answered(ctx context.Context, err error) error {
	if c.afterBook != nil {
		c.afterBook()
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return err
}

// QueueJobInfo names the hatchery holding the job's booking, as the real
// API does (the plain fake leaves it empty).
func (c *hookClient) QueueJobInfo(ctx context.Context, id int64) (*sdk.WorkflowNodeJobRun, error) {
	j, err := c.fakeClient.QueueJobInfo(ctx, id)
	if err != nil {
		return nil, err
	}
	c.snapshot(func(c *fakeClient) { j.BookedBy.Name = c.jobs[id].bookedBy })
	return j, nil
}

// WorkerModelsEnabled answers a cancelled context's error, as the real
// client does.
func (c *hookClient) WorkerModelsEnabled(ctx context.Context) ([]sdk.Model, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return c.fakeClient.WorkerModelsEnabled(ctx)
}

func (c *hookClient) QueueJobBook(ctx context.Context, id int64) (sdk.BookedJob, error) {
	if c.beforeBook != nil {
		c.beforeBook()
	}
	if err := ctx.Err(); err != nil {
		return sdk.BookedJob{}, err
	}
	if c.bookErr != nil {
		return sdk.BookedJob{}, c.bookErr
	}
	b, err := c.fakeClient.QueueJobBook(ctx, id)
	return b, c.answered(ctx, err)
}

func (c *hookClient) V2QueueJobTake(ctx context.Context, region, id string) error {
	if c.beforeBook != nil {
		c.beforeBook()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return c.answered(ctx, c.fakeClient.V2QueueJobTake(ctx, region, id))
}

// skipObserver records JobSkipped codes.
type skipObserver struct {
	NopObserver
	mu    sync.Mutex
	codes []string
}

func (o *skipObserver) JobSkipped(reason refusal.Reason) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.codes = append(o.codes, string(reason))
}

func (o *skipObserver) got() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.codes...)
}

// resRig is a framework over the allocating fake, not running: tests call
// processV1/processV2 themselves, after one worker pool refresh.
type resRig struct {
	*harness
	ah  *allocHatchery
	hc  *hookClient
	obs *skipObserver
}

func newResRig(t *testing.T, mod func(cfg *CommonConfiguration)) *resRig {
	t.Helper()
	cfg := testConfig(t)
	cfg.API.TokenV2 = "v2-secret-token-abcdef"
	if mod != nil {
		mod(&cfg)
	}
	ah := newAllocHatchery()
	obs := &skipObserver{}
	var hc *hookClient
	hs := newHarness(t, cfg, func(o *Options) {
		hc = &hookClient{fakeClient: o.Client.(*fakeClient)}
		o.Client = hc
		o.Hatchery = ah
		o.Observer = obs
	})
	hs.c.liveWorkers = ah.registered
	hs.c.models = []sdk.Model{testModel("shared.infra", "debian12")}
	require.NoError(t, hs.f.refreshPool(context.Background()))
	return &resRig{harness: hs, ah: ah, hc: hc, obs: obs}
}

// v1 is the candidate of V1 job id as a poll saw it (waiting, not booked).
func (r *resRig) v1(id int64) candidate {
	return candidate{v1ID: id, v1: &sdk.WorkflowNodeJobRun{ID: id, Status: "Waiting", Job: sdk.ExecutedJob{Action: sdk.Action{
		Requirements: resReqs()}}}}
}

// resModel is the V1 model the rig's jobs require.
const resModel = "shared.infra/debian12"

func resReqs() []sdk.Requirement { return []sdk.Requirement{regionReq("eu"), modelReq(resModel)} }

func (r *resRig) addV2(id string) {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	r.c.v2jobs[id] = &fakeV2Job{info: sdk.V2QueueJobInfo{
		RunJob: sdk.V2WorkflowRunJob{ID: id, Status: "Waiting"},
		Model:  v2Model(),
	}}
}

// assertFreed checks that the framework's own slot was given back too.
func (r *resRig) assertFreed(t *testing.T) {
	t.Helper()
	assert.Zero(t, r.f.pool.SpawnsInFlight(), "the framework's slot is free")
}

// TestReservationReleasedWhenNotSpawned walks every path after admission
// that does not spawn: each releases the hatchery's reservation once, at
// once, with its code, and frees the framework's slot.
func TestReservationReleasedWhenNotSpawned(t *testing.T) {
	t.Parallel()
	t.Run("v1 booking lost", func(t *testing.T) {
		t.Parallel()
		r := newResRig(t, nil)
		r.c.addJob(1, resReqs()...)
		// Another hatchery books between our poll and our booking.
		r.hc.beforeBook = func() { r.c.snapshot(func(c *fakeClient) { c.jobs[1].bookedBy = "other-hatchery" }) }
		assert.Equal(t, outcomeSkipped, r.f.processV1(context.Background(), r.v1(1)))
		assert.Equal(t, []refusal.Reason{refusal.ReasonBooked}, r.ah.only(t).releases())
		assert.Equal(t, []string{string(refusal.ReasonBooked)}, r.obs.got())
		r.assertFreed(t)
		r.ah.get(func(h *fakeHatchery) { assert.Empty(t, h.spawns) })
	})
	t.Run("v1 book fails", func(t *testing.T) {
		t.Parallel()
		r := newResRig(t, nil)
		// Job 2 is not in the API any more: its booking answers 403.
		assert.Equal(t, outcomeSkipped, r.f.processV1(context.Background(), r.v1(2)))
		assert.Equal(t, []refusal.Reason{refusal.ReasonBookFailed}, r.ah.only(t).releases())
		assert.Contains(t, r.logs.String(), `"level":"DEBUG","msg":"reservation released","job":"2","model":"`+resModel+`","reason":"book-failed"`)
		r.assertFreed(t)
	})
	t.Run("v1 shutdown during booking", func(t *testing.T) {
		t.Parallel()
		r := newResRig(t, nil)
		r.c.addJob(3, resReqs()...)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r.hc.beforeBook = cancel
		assert.Equal(t, outcomeNone, r.f.processV1(ctx, r.v1(3)))
		assert.Equal(t, []refusal.Reason{refusal.ReasonShutdown}, r.ah.only(t).releases())
		r.assertFreed(t)
		r.c.snapshot(func(c *fakeClient) { assert.Empty(t, c.jobs[3].bookedBy) })
	})
	t.Run("v1 shutdown cuts the booking's answer", func(t *testing.T) {
		t.Parallel()
		r := newResRig(t, nil)
		r.c.addJob(6, resReqs()...)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// The API booked the job; the shutdown cut its answer.
		r.hc.afterBook = cancel
		assert.Equal(t, outcomeNone, r.f.processV1(ctx, r.v1(6)))
		assert.Equal(t, []refusal.Reason{refusal.ReasonShutdown}, r.ah.only(t).releases())
		r.assertFreed(t)
		r.c.snapshot(func(c *fakeClient) { assert.Empty(t, c.jobs[6].bookedBy, "the booking the API made is released") })
		assert.Contains(t, r.logs.String(), `"msg":"job released: the shutdown cut its booking's answer","job":"6"`)
		r.ah.get(func(h *fakeHatchery) { assert.Empty(t, h.spawns) })
	})
	t.Run("v1 shutdown cuts the booking, another hatchery books", func(t *testing.T) {
		t.Parallel()
		r := newResRig(t, nil)
		r.c.addJob(7, resReqs()...)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// The request never reached the API; another hatchery booked
		// the job: its booking is not released (the V1 API would
		// release it, whoever made it).
		r.hc.beforeBook = func() {
			cancel()
			r.c.snapshot(func(c *fakeClient) { c.jobs[7].bookedBy = "other-hatchery" })
		}
		assert.Equal(t, outcomeNone, r.f.processV1(ctx, r.v1(7)))
		r.c.snapshot(func(c *fakeClient) {
			assert.Equal(t, "other-hatchery", c.jobs[7].bookedBy)
			assert.Zero(t, c.releases, "no release asked")
		})
	})
	t.Run("v1 attempts exhausted", func(t *testing.T) {
		t.Parallel()
		r := newResRig(t, func(cfg *CommonConfiguration) { cfg.Provision.MaxAttemptsNumberBeforeFailure = 1 })
		r.c.addJob(4, resReqs()...)
		r.f.attempts.add(4, r.f.now())
		assert.Equal(t, outcomeFailed, r.f.processV1(context.Background(), r.v1(4)))
		assert.Equal(t, []refusal.Reason{refusal.ReasonAttempts}, r.ah.only(t).releases())
		r.assertFreed(t)
		r.ah.get(func(h *fakeHatchery) { assert.Empty(t, h.spawns) })
	})
	t.Run("v1 panic before the spawn", func(t *testing.T) {
		t.Parallel()
		r := newResRig(t, nil)
		r.c.addJob(5, resReqs()...)
		r.hc.beforeBook = func() { panic("boom") }
		assert.Panics(t, func() { r.f.processV1(context.Background(), r.v1(5)) })
		assert.Equal(t, []refusal.Reason{refusal.ReasonAbandoned}, r.ah.only(t).releases(), "the deferred safety net")
		r.assertFreed(t)
	})
	t.Run("v2 taken by another hatchery", func(t *testing.T) {
		t.Parallel()
		r := newResRig(t, nil)
		r.addV2("run-1")
		r.hc.beforeBook = func() { r.c.snapshot(func(c *fakeClient) { c.v2jobs["run-1"].takenBy = "other-hatchery" }) }
		assert.Equal(t, outcomeSkipped, r.f.processV2(context.Background(), "run-1"))
		assert.Equal(t, []refusal.Reason{refusal.ReasonBooked}, r.ah.only(t).releases())
		r.assertFreed(t)
	})
	t.Run("v2 job gone", func(t *testing.T) {
		t.Parallel()
		r := newResRig(t, nil)
		r.addV2("run-2")
		r.hc.beforeBook = func() { r.c.snapshot(func(c *fakeClient) { delete(c.v2jobs, "run-2") }) }
		assert.Equal(t, outcomeSkipped, r.f.processV2(context.Background(), "run-2"))
		assert.Equal(t, []refusal.Reason{refusal.ReasonBooked}, r.ah.only(t).releases(), "the v2 API answers 404 for a job taken elsewhere")
		r.assertFreed(t)
	})
	t.Run("v2 shutdown during take", func(t *testing.T) {
		t.Parallel()
		r := newResRig(t, nil)
		r.addV2("run-3")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r.hc.beforeBook = cancel
		assert.Equal(t, outcomeNone, r.f.processV2(ctx, "run-3"))
		assert.Equal(t, []refusal.Reason{refusal.ReasonShutdown}, r.ah.only(t).releases())
		r.assertFreed(t)
	})
	t.Run("v2 shutdown cuts the take's answer", func(t *testing.T) {
		t.Parallel()
		r := newResRig(t, nil)
		r.addV2("run-4")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r.hc.afterBook = cancel
		assert.Equal(t, outcomeNone, r.f.processV2(ctx, "run-4"))
		assert.Equal(t, []refusal.Reason{refusal.ReasonShutdown}, r.ah.only(t).releases())
		r.assertFreed(t)
		r.c.snapshot(func(c *fakeClient) { assert.Empty(t, c.v2jobs["run-4"].takenBy, "the take the API made is released") })
	})
}

// TestModelsListCutByShutdownWarnsNot: a models fetch cut by the shutdown
// (its context cancelled) returns the cached list without a WARN; a fetch
// the API fails still warns.
func TestModelsListCutByShutdownWarnsNot(t *testing.T) {
	t.Parallel()
	r := newResRig(t, nil)
	ms, err := r.f.modelsV1(context.Background(), true)
	require.NoError(t, err)
	require.Len(t, ms, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ms, err = r.f.modelsV1(ctx, true)
	require.NoError(t, err)
	assert.Len(t, ms, 1, "the cached list")
	assert.NotContains(t, r.logs.String(), `"level":"WARN"`)
	assert.Contains(t, r.logs.String(), `"msg":"list worker models cut (shutting down), using cached list"`)
	r.c.setOutage(true)
	ms, err = r.f.modelsV1(context.Background(), true)
	require.NoError(t, err)
	assert.Len(t, ms, 1, "the cached list")
	assert.Contains(t, r.logs.String(), `"level":"WARN","msg":"list worker models failed, using cached list"`)
}

// TestReservationHandedToSpawn: once SpawnWorker is called the spawn owns
// the reservation: the framework releases nothing, whether the spawn
// succeeds or fails.
func TestReservationHandedToSpawn(t *testing.T) {
	t.Parallel()
	for _, fail := range []bool{false, true} {
		name := "spawned"
		if fail {
			name = "spawn failed"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := newResRig(t, nil)
			if fail {
				r.ah.spawnErr = errors.New("clone failed")
			}
			r.c.addJob(1, resReqs()...)
			want := outcomeStarted
			if fail {
				want = outcomeFailed
			}
			assert.Equal(t, want, r.f.processV1(context.Background(), r.v1(1)))
			assert.Empty(t, r.ah.only(t).releases(), "the spawn ends it, not the framework")
			r.ah.mu.Lock()
			assert.Equal(t, []bool{false}, r.ah.atSpawn, "handed over unreleased")
			r.ah.mu.Unlock()
			r.assertFreed(t)
		})
	}
}

// TestTypedRefusalOutcomes: the outcome of a refusal is decided by its
// code, not its text; the reason log key and the observer carry the code.
func TestTypedRefusalOutcomes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		refuse   error
		wantCode refusal.Reason
		want     outcome
	}{
		{"cpu", refusal.Refuse(refusal.ReasonCapacityCPU, "maxCpus reached"), refusal.ReasonCapacityCPU, outcomeCapacity},
		{"memory", refusal.Refuse(refusal.ReasonCapacityMemory, "maxMemoryMB reached"), refusal.ReasonCapacityMemory, outcomeCapacity},
		{"wrapped refusal", errors.Join(errors.New("ctx"), refusal.Refuse(refusal.ReasonIP, "no free address")), refusal.ReasonIP, outcomeCapacity},
		// A detail that reads like a capacity problem does not make one.
		{"model", refusal.Refuse(refusal.ReasonModel, "capacity: unknown flavor"), refusal.ReasonModel, outcomeSkipped},
		{"undecided", errors.New("list vms: vcenter down"), refusal.ReasonResources, outcomeCapacity},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newResRig(t, nil)
			r.ah.refuse = tc.refuse
			r.c.addJob(1, resReqs()...)
			assert.Equal(t, tc.want, r.f.processV1(context.Background(), r.v1(1)))
			assert.Equal(t, []string{string(tc.wantCode)}, r.obs.got())
			assert.Contains(t, r.logs.String(), `"msg":"job skipped","job":"1","model":"`)
			assert.Contains(t, r.logs.String(), `"reason":"`+string(tc.wantCode)+`"`)
			r.assertFreed(t)
			r.c.snapshot(func(c *fakeClient) { assert.Empty(t, c.jobs[1].bookedBy, "not booked") })
		})
	}
}

// TestCanSpawnRefusalTravels: the refusal CanSpawn returns is the
// decision: its code (never a generic one) is the reason of the one
// "job skipped" line and of the observer, its detail is logged, the
// outcome follows the code, and nothing is reserved or booked. It fails
// if admit replaced the hatchery's code (as ReasonCannotSpawn did).
func TestCanSpawnRefusalTravels(t *testing.T) {
	t.Parallel()
	cases := []struct {
		refusal *refusal.Refusal
		want    outcome
	}{
		{refusal.Refuse(refusal.ReasonSpawning, "job is already being spawned"), outcomeSkipped},
		{refusal.Refuse(refusal.ReasonIP, "no static ip available"), outcomeCapacity},
	}
	for _, tc := range cases {
		t.Run(string(tc.refusal.Reason), func(t *testing.T) {
			t.Parallel()
			r := newResRig(t, nil)
			r.ah.fakeHatchery.mu.Lock()
			r.ah.cannotSpawn = tc.refusal
			r.ah.fakeHatchery.mu.Unlock()
			r.c.addJob(1, resReqs()...)
			assert.Equal(t, tc.want, r.f.processV1(context.Background(), r.v1(1)))
			assert.Equal(t, []string{string(tc.refusal.Reason)}, r.obs.got())
			logs := r.logs.String()
			assert.Equal(t, 1, strings.Count(logs, `"msg":"job skipped"`), "one line per decision")
			assert.Contains(t, logs, `"reason":"`+string(tc.refusal.Reason)+`","detail":"`+tc.refusal.Detail+`"`)
			r.ah.mu.Lock()
			assert.Empty(t, r.ah.res, "CanSpawn refused: no reservation asked")
			r.ah.mu.Unlock()
			r.assertFreed(t)
			r.c.snapshot(func(c *fakeClient) { assert.Empty(t, c.jobs[1].bookedBy, "not booked") })
		})
	}
}

// TestFrameworkCountRefusalsAreTyped: the framework's own count checks
// answer typed refusals too.
func TestFrameworkCountRefusalsAreTyped(t *testing.T) {
	t.Parallel()
	r := newResRig(t, func(cfg *CommonConfiguration) { cfg.Provision.MaxWorker = 1 })
	r.c.addJob(1, resReqs()...)
	r.c.addJob(2, resReqs()...)
	assert.Equal(t, outcomeStarted, r.f.processV1(context.Background(), r.v1(1)))
	assert.Equal(t, outcomeCapacity, r.f.processV1(context.Background(), r.v1(2)))
	assert.Equal(t, []string{string(refusal.ReasonMaxWorkers)}, r.obs.got())
}
