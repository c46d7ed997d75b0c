//go:build !race

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// TestVCenterFaultsFailNoJob: the real daemon, with
// maxAttemptsNumberBeforeFailure = 1 and no warm pool, serves V1 and V2
// jobs while vCenter answers its first clones with its own internal error
// (SystemError: a fault of vCenter, not of the job or its template). Every
// affected job goes back to the queue without its attempt counted: none is
// failed nor given up on, and every one ends up run by a worker. (Counted,
// the first fault alone would fail a V1 job and make the hatchery give up
// on a V2 one.) The template is not quarantined either.
func TestVCenterFaultsFailNoJob(t *testing.T) {
	const (
		jobs   = 6
		faults = 4
	)
	r := newRig(t)
	cfg := r.sims.Config
	cfg.WorkerProvisioning = nil // every spawn clones
	cfg.CommonConfiguration.Provision.MaxAttemptsNumberBeforeFailure = 1
	oneSimulatorTask(cfg)
	require.NoError(t, cfg.Validate())
	r.sims.Env.InjectFault(vcsimtest.Fault{Method: "CloneVM_Task", Max: faults})

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r.playWorkers(ctx, 100*time.Millisecond)
	r.start(nil)
	r.addJobs(jobs)

	done := func() (n int) {
		for _, j := range r.jobs {
			if r.jobState(j).Status == sdk.StatusSuccess {
				n++
			}
		}
		return n
	}
	require.Eventually(t, func() bool { return done() == jobs }, 90*time.Second, 100*time.Millisecond,
		"every job runs despite the faults (%d/%d done)", done(), jobs)
	assert.EqualValues(t, faults, r.sims.Env.InjectedFaults(), "the faults were met by spawns")
	for _, j := range r.jobs {
		assert.False(t, r.jobState(j).Failed, "job %s failed by the hatchery for a fault of vcenter", j.ID)
	}
	logs := r.logs.String()
	assert.NotContains(t, logs, "giving up on job")
	assert.NotContains(t, logs, "giving up on it")
	assert.NotContains(t, logs, "template quarantined")
	assert.Contains(t, logs, "attempt_counted=false", "the spawns that met a fault were released uncounted")
}
