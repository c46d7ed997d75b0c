package hatchery

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
)

// TestRefusalReportedOnceWhicheverPath: a job refused reaches
// Observer.JobSkipped exactly once, with the refusing decision's code,
// whichever decision refused it: the hatchery's CanSpawn, the worker
// counts (provision.maxWorker, also told to a HealthObserver, which is
// not a second report), AllocateResources, CanAllocateResources
// answering false, or SpawnWorker refusing at spawn time (also a failed
// spawn). The daemon counts capacity_refusals there (internal/daemon), so
// this is the "counted once" half that lives in the framework. It fails
// if a path reports twice (a second door) or not at all.
func TestRefusalReportedOnceWhicheverPath(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		setup func(r *resRig)
		want  refusal.Reason
	}{
		{name: "CanSpawn", want: refusal.ReasonIP, setup: func(r *resRig) {
			r.ah.fakeHatchery.cannotSpawn = refusal.Refuse(refusal.ReasonIP, "no static ip available")
		}},
		{name: "maxWorker", want: refusal.ReasonMaxWorkers, setup: func(r *resRig) {
			r.c.liveWorkers = func() []sdk.Worker { return []sdk.Worker{{Name: "w-busy", Status: sdk.StatusBuilding}} }
			require.NoError(t, r.f.refreshPool(context.Background()))
			r.f.pool.SetMaxWorker(1)
		}},
		{name: "AllocateResources", want: refusal.ReasonCapacityCPU, setup: func(r *resRig) {
			r.ah.refuse = refusal.Refuse(refusal.ReasonCapacityCPU, "maxCpus reached")
		}},
		{name: "at spawn time", want: refusal.ReasonIP, setup: func(r *resRig) {
			r.ah.fakeHatchery.spawnErr = refusal.Refuse(refusal.ReasonIP, "no static ip address left at clone time")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			obs := &onceObs{}
			r := newResRig(t, nil)
			r.f.obs = obs
			tc.setup(r)
			r.c.addJob(7, resReqs()...)
			r.f.processV1(context.Background(), r.v1(7))
			assert.Equal(t, []refusal.Reason{tc.want}, obs.skipped(), "one report, with the decision's code")
			assert.Contains(t, r.f.refusals.value(), string(tc.want)+" 1", "the status line counts it once")
		})
	}
	t.Run("CanAllocateResources", func(t *testing.T) {
		t.Parallel()
		obs := &onceObs{}
		hs := newHarness(t, testConfig(t), func(o *Options) { o.Observer = obs })
		hs.c.models = []sdk.Model{testModel("shared.infra", "debian12")}
		require.NoError(t, hs.f.refreshPool(context.Background()))
		hs.h.full = true
		hs.c.addJob(8, resReqs()...)
		cand := candidate{v1ID: 8, v1: &sdk.WorkflowNodeJobRun{ID: 8, Status: "Waiting", Job: sdk.ExecutedJob{Action: sdk.Action{Requirements: resReqs()}}}}
		assert.Equal(t, outcomeCapacity, hs.f.processV1(context.Background(), cand))
		assert.Equal(t, []refusal.Reason{refusal.ReasonCapacity}, obs.skipped())
	})
}

// onceObs records JobSkipped codes and counts MaxWorkersReached apart.
type onceObs struct {
	healthObs
	codes []refusal.Reason
}

func (o *onceObs) JobSkipped(r refusal.Reason) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.codes = append(o.codes, r)
}

func (o *onceObs) skipped() []refusal.Reason {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]refusal.Reason(nil), o.codes...)
}
