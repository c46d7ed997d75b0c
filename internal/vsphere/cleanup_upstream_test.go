package vsphere

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/cloudinit"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient/cdsclienttest"
)

// TestKillAwolServersFinishedWorkerGracePeriod: a finished worker's VM
// (powered off, unknown to the API) is kept while its start is younger
// than finishedWorkerGracePeriod and destroyed after it; with the period
// at 0 it is destroyed at once.
func TestKillAwolServersFinishedWorkerGracePeriod(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		grace     int
		destroyed []string
	}{
		{name: "grace 300s keeps the recent one", grace: 300, destroyed: []string{"w-old"}},
		{name: "grace 0 destroys both", grace: 0, destroyed: []string{"w-old", "w-recent"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := warmConfig()
			cfg.FinishedWorkerGracePeriod = tc.grace
			vms := []inventory.VM{
				warmVM("w-recent", wOff, wStarted(2*time.Minute)),
				warmVM("w-old", wOff, wStarted(10*time.Minute)),
			}
			e := newWarmEnv(t, cfg, vms, &cdsclienttest.Fake{})
			for _, v := range vms {
				if slices.Contains(tc.destroyed, v.Name) {
					e.expectDelete(v)
				}
			}
			e.h.killAwolServers(context.Background())
			// gomock fails the test on a destroy not expected (w-recent
			// with a grace) and on a missing one at Finish.
		})
	}
}

// TestKillAwolServersReleasesReclaimedJob: the job of a VM destroyed before
// its worker registered goes back to the queue at once (V1 by number, V2
// in the region the V2 sign-in answered, not provision.region); a finished worker's job and a known worker's
// job are not released.
func TestKillAwolServersReleasesReclaimedJob(t *testing.T) {
	t.Parallel()
	cfg := warmConfig()
	cfg.CommonConfiguration.Provision.Region = "eu"
	job := func(id string) vmOpt { return wAnnot(func(a *inventory.Annotation) { a.JobID = id }) }
	vms := []inventory.VM{
		warmVM("w-never-started", wCreated(time.Hour), job("42")),
		warmVM("w-never-registered", wStarted(time.Hour), job("run-7f3a")),
		warmVM("w-finished", wOff, wStarted(time.Hour), job("43")),
		warmVM("w-running", wStarted(time.Minute), job("44")),
	}
	cds := &cdsclienttest.Fake{V1Workers: []sdk.Worker{{Name: "w-running"}}, Region: "eu-west"}
	e := newWarmEnv(t, cfg, vms, cds)
	for _, v := range vms[:3] {
		e.expectDelete(v)
	}
	e.h.killAwolServers(context.Background())
	assert.ElementsMatch(t, []string{"v1:42", "v2:eu-west:run-7f3a"}, cds.Released())
}

// TestKillAwolServersFollowsTheJob: a VM about to be judged "worker never
// started" or "worker never registered" is judged by the API's view of its
// job first (the worker list proves nothing: a worker can sign in, run and
// sign out between two reads of it). Its job is released only while it
// still waits for a worker of ours; a job the VM's worker ran marks the VM
// finished; an unreadable job keeps the VM within workerTTL.
func TestKillAwolServersFollowsTheJob(t *testing.T) {
	t.Parallel()
	const regTTL = 10 * time.Minute
	job := func(id string) vmOpt { return wAnnot(func(a *inventory.Annotation) { a.JobID = id }) }
	cases := []struct {
		name      string
		vm        inventory.VM
		cds       *cdsclienttest.Fake
		destroyed bool
		released  []string
		// logged must appear in the cleanup's log line about the VM,
		// notLogged must not.
		logged, notLogged string
	}{
		{
			name:      "v2 worker signed in, ran and signed out between two list reads: finished, not 'never registered'",
			vm:        warmVM("w-v2-quick", wStarted(regTTL+time.Minute), job("run-quick")),
			cds:       &cdsclienttest.Fake{JobStatus: map[string]string{"run-quick": sdk.StatusSuccess}, JobWorker: map[string]string{"run-quick": "w-v2-quick"}},
			destroyed: true,
			logged:    "worker finished: job Success, worker w-v2-quick",
			notLogged: "never registered",
		},
		{
			name:      "v1 worker ran, vm powered off, start never recorded (earlier run): finished",
			vm:        warmVM("w-v1-ran", wOff, wCreated(time.Minute), job("42")),
			cds:       &cdsclienttest.Fake{JobStatus: map[string]string{"42": sdk.StatusSuccess}, JobWorker: map[string]string{"42": "w-v1-ran"}},
			destroyed: true,
			logged:    "worker finished: job Success",
			notLogged: "never started",
		},
		{
			name:   "its worker runs the job (building), the list read before it registered: kept",
			vm:     warmVM("w-v1-building", wCreated(time.Hour), job("43")),
			cds:    &cdsclienttest.Fake{JobStatus: map[string]string{"43": sdk.StatusBuilding}, JobWorker: map[string]string{"43": "w-v1-building"}},
			logged: "its worker runs its job",
		},
		{
			name:      "its worker took the job and the vm is powered off: finished",
			vm:        warmVM("w-v1-off", wOff, wCreated(time.Hour), wStarted(regTTL+time.Minute), job("44")),
			cds:       &cdsclienttest.Fake{JobStatus: map[string]string{"44": sdk.StatusBuilding}, JobWorker: map[string]string{"44": "w-v1-off"}},
			destroyed: true,
			logged:    "worker finished",
		},
		{
			name:      "job taken by another worker: deleted, not released",
			vm:        warmVM("w-v2-other", wStarted(regTTL+time.Minute), job("run-other")),
			cds:       &cdsclienttest.Fake{JobStatus: map[string]string{"run-other": sdk.StatusBuilding}, JobWorker: map[string]string{"run-other": "w-elsewhere"}},
			destroyed: true,
			logged:    "not ours to release",
		},
		{
			name:      "v1 booking dropped by the api (job waiting, booked by no one): deleted, not released",
			vm:        warmVM("w-v1-lapsed", wCreated(time.Hour), job("45")),
			cds:       &cdsclienttest.Fake{JobHolder: map[string]string{"45": ""}},
			destroyed: true,
			logged:    "no longer held by this hatchery",
		},
		{
			name:      "v2 job still scheduled by us: reclaimed and released",
			vm:        warmVM("w-v2-wait", wStarted(regTTL+time.Minute), job("run-wait")),
			destroyed: true,
			released:  []string{"v2:default:run-wait"},
			logged:    "worker never registered",
		},
		{
			name:      "v1 job still booked by us: reclaimed and released",
			vm:        warmVM("w-v1-wait", wCreated(time.Hour), job("46")),
			destroyed: true,
			released:  []string{"v1:46"},
			logged:    "worker never started",
		},
		{
			name:      "job gone from the api: deleted, not released",
			vm:        warmVM("w-v2-gone", wStarted(regTTL+time.Minute), job("run-gone")),
			cds:       &cdsclienttest.Fake{JobGone: map[string]bool{"run-gone": true}},
			destroyed: true,
			logged:    "job gone from the api",
		},
		{
			name:   "job unreadable: kept within the worker ttl",
			vm:     warmVM("w-v1-unread", wCreated(time.Hour), job("47")),
			cds:    &cdsclienttest.Fake{JobErr: &cdsclient.APIError{Status: 503}},
			logged: "its job is unreadable",
		},
		{
			name:      "job unreadable past the worker ttl: deleted, not released",
			vm:        warmVM("w-v1-unread-old", wCreated(121*time.Minute), job("48")),
			cds:       &cdsclienttest.Fake{JobErr: &cdsclient.APIError{Status: 503}},
			destroyed: true,
			logged:    "past the worker ttl",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cds := tc.cds
			if cds == nil {
				cds = &cdsclienttest.Fake{}
			}
			cds.Region = "default"
			e := newWarmEnv(t, warmConfig(), []inventory.VM{tc.vm}, cds)
			var logs bytes.Buffer
			e.h.log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			if tc.destroyed {
				e.expectDelete(tc.vm)
			}
			e.h.killAwolServers(context.Background())
			assert.Equal(t, tc.released, cds.Released())
			var line string
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, "awol cleanup") && strings.Contains(l, "vm="+tc.vm.Name) {
					line = l
				}
			}
			require.NotEmpty(t, line, "no cleanup line about %s:\n%s", tc.vm.Name, logs.String())
			assert.Contains(t, line, tc.logged)
			if tc.notLogged != "" {
				assert.NotContains(t, line, tc.notLogged)
			}
		})
	}
}

// TestKillAwolServersReadsJobsOnlyOfVMsAboutToBeReclaimed: the job read
// costs one API call per VM about to be judged "never registered", none
// for a VM whose worker the API lists, a young VM or a finished one.
func TestKillAwolServersReadsJobsOnlyOfVMsAboutToBeReclaimed(t *testing.T) {
	t.Parallel()
	job := func(id string) vmOpt { return wAnnot(func(a *inventory.Annotation) { a.JobID = id }) }
	vms := []inventory.VM{
		warmVM("w-running", wStarted(time.Hour), job("1")),
		warmVM("w-young", wCreated(time.Minute), job("2")),
		warmVM("w-done", wOff, wStarted(time.Hour), job("3")),
		warmVM("w-stuck", wCreated(time.Hour), job("4")),
	}
	cds := &cdsclienttest.Fake{V1Workers: []sdk.Worker{{Name: "w-running", Status: sdk.StatusBuilding}}}
	e := newWarmEnv(t, warmConfig(), vms, cds)
	e.expectDelete(vms[2])
	e.expectDelete(vms[3])
	e.h.killAwolServers(context.Background())
	for _, id := range []string{"1", "2", "3"} {
		assert.Zero(t, cds.Reads(id), "job %s read", id)
	}
	// Read by the verdict, then again right before its release.
	assert.Equal(t, 2, cds.Reads("4"))
	assert.Equal(t, []string{"v1:4"}, cds.Released())
}

// TestReleaseReclaimedJobAlreadyReleased: a release answered "already
// released" (400 id 135) is done: logged at Info as such, never warned
// about, never repeated by a later pass.
func TestReleaseReclaimedJobAlreadyReleased(t *testing.T) {
	t.Parallel()
	vm := warmVM("w-stuck", wCreated(time.Hour), wAnnot(func(a *inventory.Annotation) { a.JobID = "42" }))
	cds := &cdsclienttest.Fake{ReleaseErr: &cdsclient.APIError{Status: 400, ID: 135, Message: "Job already released"}}
	e := newWarmEnv(t, warmConfig(), []inventory.VM{vm}, cds)
	var logs bytes.Buffer
	e.h.log = slog.New(slog.NewTextHandler(&logs, nil))
	e.expectDelete(vm)
	e.h.killAwolServers(context.Background())
	e.inv.Set() // the VM is gone
	e.h.killAwolServers(context.Background())
	assert.Equal(t, []string{"v1:42"}, cds.Released())
	assert.Contains(t, logs.String(), "job of reclaimed vm already released by the api")
	assert.NotContains(t, logs.String(), "level=WARN")
}

// TestScrubRegisteredRemovesUserdata: once the API lists a cloud-init
// worker, its VM's userdata keys are set to empty (removed); a worker not
// yet registered keeps them.
func TestScrubRegisteredRemovesUserdata(t *testing.T) {
	t.Parallel()
	vms := []inventory.VM{warmVM("w-reg", wStarted(time.Minute)), warmVM("w-boot", wStarted(time.Minute))}
	cds := &cdsclienttest.Fake{V2Workers: []sdk.V2Worker{{Name: "w-reg"}}}
	e := newWarmEnv(t, warmConfig(), vms, cds)
	e.h.custody.TrackUserdata("w-reg", warmRef("w-reg"))
	e.h.custody.TrackUserdata("w-boot", warmRef("w-boot"))
	var got vctypes.ConfigChange
	e.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), warmRefIs("w-reg"), gomock.Any()).DoAndReturn(
		func(_ context.Context, _ vctypes.Ref, spec vctypes.ConfigChange) error {
			got = spec
			return nil
		})
	e.h.killAwolServers(context.Background())

	keys := optionMap(writtenOptions(got))
	require.Contains(t, keys, cloudinit.GuestinfoUserdata)
	require.Contains(t, keys, cloudinit.GuestinfoUserdataEncoding)
	assert.Empty(t, keys[cloudinit.GuestinfoUserdata])
	assert.Empty(t, keys[cloudinit.GuestinfoUserdataEncoding])
	pending := e.h.custody.Userdata()
	assert.NotContains(t, pending, "w-reg")
	assert.Contains(t, pending, "w-boot")
}
