package hatchery

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
)

// codeSet gathers refusal codes from concurrent subtests.
type codeSet struct {
	mu   sync.Mutex
	seen map[refusal.Reason]bool
}

func (s *codeSet) add(r refusal.Reason) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[refusal.Reason]bool{}
	}
	s.seen[r] = true
}

// collect adds every code the rig's framework gave: the observer's skips,
// the reasons its reservations were released for, and the `reason` of
// its decision lines (job skipped, registration skipped, reservation
// released).
func (s *codeSet) collect(t *testing.T, r *resRig) {
	t.Helper()
	for _, c := range r.obs.got() {
		s.add(refusal.Reason(c))
	}
	r.ah.mu.Lock()
	for _, res := range r.ah.res {
		for _, why := range res.releases() {
			s.add(why)
		}
	}
	r.ah.mu.Unlock()
	sc := bufio.NewScanner(strings.NewReader(r.logs.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			Msg    string `json:"msg"`
			Reason string `json:"reason"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil || line.Reason == "" {
			continue
		}
		switch line.Msg {
		case "job skipped", "registration skipped", "reservation released":
			s.add(refusal.Reason(line.Reason))
		}
	}
}

// TestEveryRefusalCodeIsProduced drives each of the framework's decisions
// not to spawn and collects the codes they give: with the codes a
// hatchery's decisions give (refusal.HatcheryReasons, produced by
// internal/vsphere: TestHatcheryRefusalCodesAreProduced), they must be
// exactly refusal.Reasons. It fails when a code is added that nothing
// produces (as cannot-spawn and flavor were), when a decision gives a
// code outside the set, or when the framework stops giving one of its
// codes.
func TestEveryRefusalCodeIsProduced(t *testing.T) {
	t.Parallel()
	var seen codeSet
	scenarios := map[string]struct {
		cfg func(*CommonConfiguration)
		run func(t *testing.T, r *resRig)
	}{
		"region": {run: func(t *testing.T, r *resRig) {
			r.c.addJob(1, regionReq("us"), modelReq(resModel))
			c := r.v1(1)
			c.v1.Job.Action.Requirements = []sdk.Requirement{regionReq("us"), modelReq(resModel)}
			r.f.processV1(context.Background(), c)
		}},
		"model": {run: func(t *testing.T, r *resRig) {
			c := r.v1(1)
			c.v1.Job.Action.Requirements = []sdk.Requirement{regionReq("eu"), modelReq("shared.infra/unknown")}
			r.f.processV1(context.Background(), c)
		}},
		"booked": {run: func(t *testing.T, r *resRig) {
			c := r.v1(1)
			c.v1.BookedBy.Name = "other-hatchery"
			r.f.processV1(context.Background(), c)
		}},
		"job gone": {run: func(t *testing.T, r *resRig) {
			r.c.addJob(1, resReqs()...)
			r.hc.bookErr = &cdsclient.APIError{Status: 404}
			r.f.processV1(context.Background(), r.v1(1))
		}},
		"book failed": {run: func(t *testing.T, r *resRig) {
			r.f.processV1(context.Background(), r.v1(2)) // not in the API: 403
		}},
		"attempts": {
			cfg: func(cfg *CommonConfiguration) { cfg.Provision.MaxAttemptsNumberBeforeFailure = 1 },
			run: func(t *testing.T, r *resRig) {
				r.c.addJob(1, resReqs()...)
				r.f.attempts.add(1, r.f.now())
				r.f.processV1(context.Background(), r.v1(1))
			},
		},
		"worker token": {run: func(t *testing.T, r *resRig) {
			r.c.addJob(1, resReqs()...)
			r.f.key = nil // signing fails
			r.f.processV1(context.Background(), r.v1(1))
		}},
		"shutdown": {run: func(t *testing.T, r *resRig) {
			r.c.addJob(1, resReqs()...)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			r.hc.beforeBook = cancel
			r.f.processV1(ctx, r.v1(1))
		}},
		"abandoned": {run: func(t *testing.T, r *resRig) {
			r.c.addJob(1, resReqs()...)
			r.hc.beforeBook = func() { panic("boom") }
			assert.Panics(t, func() { r.f.processV1(context.Background(), r.v1(1)) })
		}},
		"resources": {run: func(t *testing.T, r *resRig) {
			r.ah.mu.Lock()
			r.ah.refuse = errors.New("list vms: vcenter down")
			r.ah.mu.Unlock()
			r.c.addJob(1, resReqs()...)
			r.f.processV1(context.Background(), r.v1(1))
		}},
		"max workers": {
			cfg: func(cfg *CommonConfiguration) { cfg.Provision.MaxWorker = 1 },
			run: func(t *testing.T, r *resRig) {
				r.c.addJob(1, resReqs()...)
				r.c.addJob(2, resReqs()...)
				r.f.processV1(context.Background(), r.v1(1))
				r.f.processV1(context.Background(), r.v1(2))
			},
		},
		"max provisioning": {
			cfg: func(cfg *CommonConfiguration) { cfg.Provision.MaxConcurrentProvisioning = 1 },
			run: func(t *testing.T, r *resRig) {
				s, refused := r.f.reserve("held", false)
				if assert.Nil(t, refused) {
					defer s.Release()
				}
				r.c.addJob(1, resReqs()...)
				r.f.processV1(context.Background(), r.v1(1))
			},
		},
		"max registering": {
			cfg: func(cfg *CommonConfiguration) { cfg.Provision.MaxConcurrentRegistering = -1 },
			run: func(t *testing.T, r *resRig) {
				r.ah.get(func(h *fakeHatchery) { h.needReg[resModel] = true })
				r.f.registerPass(context.Background(), r.ah)
			},
		},
	}
	t.Run("framework", func(t *testing.T) {
		for name, sc := range scenarios {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				r := newResRig(t, sc.cfg)
				sc.run(t, r)
				seen.collect(t, r)
			})
		}
		t.Run("pool unknown", func(t *testing.T) {
			t.Parallel()
			// No worker pool listed yet: the rig's refresh never ran.
			h := newHarness(t, testConfig(t), nil)
			h.c.models = []sdk.Model{testModel("shared.infra", "debian12")}
			h.c.addJob(1, resReqs()...)
			obs := &skipObserver{}
			h.f.obs = obs
			h.f.processV1(context.Background(), candidate{v1ID: 1, v1: &sdk.WorkflowNodeJobRun{ID: 1, Status: "Waiting", Job: sdk.ExecutedJob{Action: sdk.Action{Requirements: resReqs()}}}})
			for _, c := range obs.got() {
				seen.add(refusal.Reason(c))
			}
		})
		t.Run("capacity", func(t *testing.T) {
			t.Parallel()
			// A hatchery that does not reserve answers "no room now".
			h := newHarness(t, testConfig(t), nil)
			h.c.models = []sdk.Model{testModel("shared.infra", "debian12")}
			h.c.liveWorkers = h.h.registered
			h.h.mu.Lock()
			h.h.full = true
			h.h.mu.Unlock()
			if !assert.NoError(t, h.f.refreshPool(context.Background())) {
				return
			}
			obs := &skipObserver{}
			h.f.obs = obs
			h.c.addJob(1, resReqs()...)
			h.f.processV1(context.Background(), candidate{v1ID: 1, v1: &sdk.WorkflowNodeJobRun{ID: 1, Status: "Waiting", Job: sdk.ExecutedJob{Action: sdk.Action{Requirements: resReqs()}}}})
			for _, c := range obs.got() {
				seen.add(refusal.Reason(c))
			}
		})
	})

	var got []string
	for c := range seen.seen {
		got = append(got, string(c))
	}
	for _, c := range refusal.HatcheryReasons {
		if !seen.seen[c] {
			got = append(got, string(c))
		}
	}
	var want []string
	for _, c := range refusal.Reasons {
		want = append(want, string(c))
	}
	slices.Sort(got)
	slices.Sort(want)
	assert.Equal(t, want, got, "codes the framework gave, plus refusal.HatcheryReasons, are refusal.Reasons")
	for c := range seen.seen {
		if !slices.Contains(refusal.HatcheryReasons, c) {
			continue
		}
		switch c {
		case refusal.ReasonModel, refusal.ReasonResources:
			// Both the framework and the hatchery give them.
		default:
			t.Errorf("the framework gave %q, listed as a hatchery's code", c)
		}
	}
}

// TestRefusalCodeTravels: a refusal's code goes from the decision to the
// log line's reason, the spawn info sent to the job, the observer and the
// "Job refusals" line of /mon/status. A refusal before booking (region)
// sends no spawn info (the job is not this hatchery's); one at spawn time
// (no address left since the admission) names its code in the spawn info
// the API shows on the job. It fails if a path dropped the code (a detail
// without it, a generic code, a status line without counts).
func TestRefusalCodeTravels(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, testConfig(t), nil)
	hs.c.models = []sdk.Model{testModel("shared.infra", "debian12")}
	require.NoError(t, hs.f.refreshPool(context.Background()))
	statusValue := func() string {
		for _, l := range hs.f.statusLines(context.Background()) {
			if l.Component == "Job refusals" {
				assert.Equal(t, sdk.MonitoringStatusOK, l.Status)
				return l.Value
			}
		}
		t.Fatal("no Job refusals status line")
		return ""
	}
	assert.Equal(t, "none", statusValue())

	job := func(id int64, reqs ...sdk.Requirement) candidate {
		hs.c.addJob(id, reqs...)
		return candidate{v1ID: id, v1: &sdk.WorkflowNodeJobRun{ID: id, Status: "Waiting", Job: sdk.ExecutedJob{Action: sdk.Action{Requirements: reqs}}}}
	}
	ctx := context.Background()
	assert.Equal(t, outcomeSkipped, hs.f.processV1(ctx, job(1, regionReq("us"), modelReq(resModel))))
	assert.Equal(t, outcomeSkipped, hs.f.processV1(ctx, job(2, regionReq("us"), modelReq(resModel))))
	hs.h.mu.Lock()
	hs.h.cannotSpawn = refusal.Refuse(refusal.ReasonServed, "vm w-3 already serves the job")
	hs.h.mu.Unlock()
	assert.Equal(t, outcomeSkipped, hs.f.processV1(ctx, job(3, resReqs()...)))
	assert.Equal(t, "3 since start: region 2, served 1", statusValue())

	hs.h.mu.Lock()
	hs.h.cannotSpawn = nil
	hs.h.spawnErr = fmt.Errorf("spawn worker: %w", refusal.Refuse(refusal.ReasonIP, "no static ip address left at clone time"))
	hs.h.mu.Unlock()
	assert.Equal(t, outcomeFailed, hs.f.processV1(ctx, job(4, resReqs()...)))

	logs := hs.logs.String()
	assert.Contains(t, logs, `"msg":"job skipped","job":"1","model":"","reason":"region"`)
	assert.Contains(t, logs, `"msg":"job skipped","job":"3","model":"`+resModel+`","reason":"served","detail":"vm w-3 already serves the job"`)
	assert.Regexp(t, `"msg":"spawn failed, releasing job \(refused: ip\)","job":"4".*"reason":"ip"`, logs)
	hs.c.snapshot(func(c *fakeClient) {
		assert.Empty(t, c.spawnInfos[1], "refused before booking: nothing sent to the job")
		var errInfo *sdk.SpawnInfo
		for i, info := range c.spawnInfos[4] {
			if info.Message.ID == msgSpawnInfoHatcheryErrorSpawn {
				errInfo = &c.spawnInfos[4][i]
			}
		}
		if assert.NotNil(t, errInfo, "spawn info of the failed spawn") {
			args := errInfo.Message.Args
			assert.Contains(t, args[len(args)-1], "ip: no static ip address left at clone time", "the code in the job's spawn info")
		}
	})
}
