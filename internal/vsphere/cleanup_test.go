package vsphere

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient/cdsclienttest"
	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vmware/govmomi/task"
)

// TestKillAwolServers covers every branch of the awol cleanup: each case
// lists the datacenter and exactly which VMs are destroyed (powered off
// first when on). The mock is strict: any other vCenter call fails.
func TestKillAwolServers(t *testing.T) {
	t.Parallel()
	const regTTL = 10 * time.Minute
	const ttl = 120 * time.Minute

	provOn := func(name string, opts ...vmOpt) inventory.VM {
		return warmProvVM(name, "debian12", "", append([]vmOpt{wOn}, opts...)...)
	}

	cases := []struct {
		name      string
		vms       []inventory.VM
		v1        []sdk.Worker
		v2        []sdk.V2Worker
		apiErr    error
		noAPI     bool
		toDelete  []string
		pending   []string
		jobs      []string
		using     []string
		preparing []string
		launched  []string // launched by this run, start not recorded (a minute ago)
		events    []vctypes.Event
		eventsErr error
		destroyed []string
	}{
		{
			name:      "marked for deletion, powered on: powered off and destroyed",
			vms:       []inventory.VM{warmVM("w-1")},
			toDelete:  []string{"w-1"},
			v2:        []sdk.V2Worker{{Name: "w-1"}},
			destroyed: []string{"w-1"},
		},
		{
			name:      "marked for deletion, powered off: destroyed",
			vms:       []inventory.VM{warmVM("w-1", wOff)},
			toDelete:  []string{"w-1"},
			destroyed: []string{"w-1"},
		},
		{
			name:      "marked for deletion is deleted even when the api fails",
			vms:       []inventory.VM{warmVM("w-1"), warmVM("w-old", wCreated(time.Hour))},
			toDelete:  []string{"w-1"},
			apiErr:    errors.New("api down"),
			destroyed: []string{"w-1"},
		},
		{
			name:     "api error: nothing else is decided",
			vms:      []inventory.VM{warmVM("w-old", wCreated(time.Hour)), warmVM("w-done", wOff, wStarted(time.Hour)), provOn("warmpool-v2-half", wCreated(time.Hour))},
			apiErr:   errors.New("api down"),
			toDelete: nil,
		},
		{
			name:  "no api client: nothing but marked vms",
			vms:   []inventory.VM{warmVM("w-old", wCreated(time.Hour))},
			noAPI: true,
		},
		{
			name: "provisioned idle vm is left to the provisioning loop",
			vms:  []inventory.VM{warmProvVM("warmpool-v2-idle", "debian12", "", wCreated(24*time.Hour))},
		},
		{
			name:    "provisioned vm being provisioned is kept",
			vms:     []inventory.VM{provOn("warmpool-v2-busy", wCreated(time.Hour))},
			pending: []string{"warmpool-v2-busy"},
		},
		{
			name:      "half-provisioned vm left by a crash is deleted",
			vms:       []inventory.VM{provOn("warmpool-v2-half", wCreated(regTTL+time.Minute))},
			destroyed: []string{"warmpool-v2-half"},
		},
		{
			name: "provisioned vm powered on within the bound is kept",
			vms:  []inventory.VM{provOn("warmpool-v2-young", wCreated(regTTL-time.Minute))},
		},
		{
			name:  "provisioned vm being claimed is kept",
			vms:   []inventory.VM{provOn("warmpool-v2-claimed", wCreated(time.Hour))},
			using: []string{"warmpool-v2-claimed"},
		},
		{
			name: "model vm is kept",
			vms:  []inventory.VM{warmVM("model-debian", wOff, wCreated(48*time.Hour), wAnnot(func(a *inventory.Annotation) { a.Model = true }))},
		},
		{
			name: "our template is never touched",
			vms:  []inventory.VM{warmVM("grp-model", wOff, wTemplate, wCreated(48*time.Hour))},
		},
		{
			name:      "worker never started past the registration ttl is deleted",
			vms:       []inventory.VM{warmVM("w-stuck", wCreated(regTTL+time.Second))},
			destroyed: []string{"w-stuck"},
		},
		{
			name: "worker never started within the registration ttl is kept",
			vms:  []inventory.VM{warmVM("w-young", wCreated(regTTL-time.Second))},
		},
		{
			// A spawn cut by a restart, or another instance's spawn between
			// its clone and its power-on: its job still waits, nothing
			// tells the two apart. Deleting it would destroy the other
			// instance's VM under its spawn and release its job.
			name: "powered off, worker never started, created before this run, its job waiting: kept within the registration ttl",
			vms:  []inventory.VM{warmVM("w-orphan", wOff, wCreated(time.Minute), wAnnot(func(a *inventory.Annotation) { a.JobID = "77" }))},
		},
		{
			name:      "powered off, worker never started, created before this run, past the registration ttl: deleted",
			vms:       []inventory.VM{warmVM("w-orphan-old", wOff, wCreated(regTTL+time.Minute), wAnnot(func(a *inventory.Annotation) { a.JobID = "77" }))},
			destroyed: []string{"w-orphan-old"},
		},
		{
			name: "powered off, worker never started, created by this run: kept within the registration ttl",
			vms:  []inventory.VM{warmVM("w-cloning", wOff, wCreated(-time.Second), wAnnot(func(a *inventory.Annotation) { a.JobID = "78" }))},
		},
		{
			name:      "worker launched by this run, start record failed, finished and powered off: deleted",
			vms:       []inventory.VM{warmVM("w-unrecorded", wOff, wCreated(-time.Second))},
			launched:  []string{"w-unrecorded"},
			destroyed: []string{"w-unrecorded"},
		},
		{
			name:     "worker launched by this run, start record failed, powered on and registering: kept",
			vms:      []inventory.VM{warmVM("w-unrecorded-on", wCreated(-time.Second))},
			launched: []string{"w-unrecorded-on"},
		},
		{
			name: "powered on, worker never started, created by an earlier run: kept within the registration ttl (its worker may be registering)",
			vms:  []inventory.VM{warmVM("w-earlier-on", wCreated(time.Minute))},
		},
		{
			name: "renamed but never started (crash during a claim) is deleted",
			vms: []inventory.VM{warmVM("w-renamed", wOff, wCreated(3*time.Hour), wAnnot(func(a *inventory.Annotation) {
				a.Provisioning = true
				a.VMwareModelPath = "debian12"
			}))},
			destroyed: []string{"w-renamed"},
		},
		{
			name:      "claimed vm being prepared under its new name is kept",
			vms:       []inventory.VM{warmVM("w-preparing", wOff, wCreated(3*time.Hour))},
			preparing: []string{"w-preparing"},
		},
		{
			name: "worker whose job is being spawned is kept",
			vms:  []inventory.VM{warmVM("w-spawning", wCreated(time.Hour), wAnnot(func(a *inventory.Annotation) { a.JobID = "77" }))},
			jobs: []string{"77"},
		},
		{
			name:      "worker known to the api past the worker ttl is deleted",
			vms:       []inventory.VM{warmVM("w-v1", wCreated(ttl+time.Hour), wStarted(ttl+time.Minute))},
			v1:        []sdk.Worker{{Name: "w-v1", Status: sdk.StatusBuilding}},
			destroyed: []string{"w-v1"},
		},
		{
			name:      "v2 worker known to the api past the worker ttl is deleted",
			vms:       []inventory.VM{warmVM("w-v2", wCreated(ttl+time.Hour), wStarted(ttl+time.Minute))},
			v2:        []sdk.V2Worker{{Name: "w-v2", Status: sdk.StatusBuilding}},
			destroyed: []string{"w-v2"},
		},
		{
			// The post-command powered the VM off: the job is over, the
			// API's list lags (a V1 worker stays listed, Disabled, for
			// minutes after it unregistered; a lost one until its beat
			// times out).
			name:      "worker known to the api, powered off: finished, destroyed at once",
			vms:       []inventory.VM{warmVM("w-off-v1", wOff, wCreated(3*time.Minute), wStarted(2*time.Minute))},
			v1:        []sdk.Worker{{Name: "w-off-v1", Status: sdk.StatusBuilding}},
			destroyed: []string{"w-off-v1"},
		},
		{
			name:      "v2 worker known to the api (disabled), powered off: destroyed at once",
			vms:       []inventory.VM{warmVM("w-off-v2", wOff, wCreated(3*time.Minute), wStarted(2*time.Minute))},
			v2:        []sdk.V2Worker{{Name: "w-off-v2", Status: sdk.StatusDisabled}},
			destroyed: []string{"w-off-v2"},
		},
		{
			name: "registration vm powered off, its worker still listed: kept to become a template",
			vms: []inventory.VM{warmVM("register-m1-z", wOff, wCreated(5*time.Minute), wStarted(4*time.Minute), wAnnot(func(a *inventory.Annotation) {
				a.RegisterOnly = true
				a.WorkerModelPath = "grp/m1"
			}))},
			v1: []sdk.Worker{{Name: "register-m1-z", Status: sdk.StatusRegistering}},
		},
		{
			name: "provisioned idle (powered off) vm is left to the pool even if the api lists its name",
			vms:  []inventory.VM{warmProvVM("warmpool-v2-listed", "debian12", "", wCreated(time.Hour))},
			v2:   []sdk.V2Worker{{Name: "warmpool-v2-listed", Status: sdk.StatusDisabled}},
		},
		{
			name:      "powered-off pool vm claimed under its worker name, before its power-on: kept",
			vms:       []inventory.VM{warmVM("w-claimed-off", wOff, wCreated(time.Hour), wStarted(0))},
			v1:        []sdk.Worker{{Name: "w-claimed-off", Status: sdk.StatusWaiting}},
			preparing: []string{"w-claimed-off"},
		},
		{
			name: "worker known to the api within the worker ttl is kept",
			vms:  []inventory.VM{warmVM("w-busy", wCreated(ttl), wStarted(ttl-time.Minute))},
			v1:   []sdk.Worker{{Name: "w-busy", Status: sdk.StatusBuilding}},
		},
		{
			name: "worker known to the api whose record lacks the start time is kept within the ttl",
			vms:  []inventory.VM{warmVM("w-lag", wCreated(time.Hour))},
			v2:   []sdk.V2Worker{{Name: "w-lag", Status: sdk.StatusWaiting}},
		},
		{
			name:      "worker known to the api whose record lacks the start time: ttl from creation",
			vms:       []inventory.VM{warmVM("w-lag", wCreated(ttl+time.Minute))},
			v2:        []sdk.V2Worker{{Name: "w-lag", Status: sdk.StatusWaiting}},
			destroyed: []string{"w-lag"},
		},
		{
			name:      "worker unknown to the api and powered off has finished",
			vms:       []inventory.VM{warmVM("w-done", wOff, wCreated(5*time.Minute), wStarted(4*time.Minute))},
			destroyed: []string{"w-done"},
		},
		{
			name:      "worker unknown to the api, powered on, past the registration ttl",
			vms:       []inventory.VM{warmVM("w-lost", wCreated(time.Hour), wStarted(regTTL+time.Second))},
			destroyed: []string{"w-lost"},
		},
		{
			name: "worker unknown to the api, powered on, within the registration ttl",
			vms:  []inventory.VM{warmVM("w-booting", wCreated(time.Hour), wStarted(regTTL-time.Second))},
		},
		{
			name: "registration vm powered off within the ttl waits to become a template",
			vms: []inventory.VM{warmVM("register-m1-x", wOff, wCreated(5*time.Minute), wStarted(4*time.Minute), wAnnot(func(a *inventory.Annotation) {
				a.RegisterOnly = true
				a.WorkerModelPath = "grp/m1"
			}))},
		},
		{
			name: "registration vm powered off past the ttl is deleted",
			vms: []inventory.VM{warmVM("register-m1-y", wOff, wCreated(time.Hour), wStarted(regTTL+time.Minute), wAnnot(func(a *inventory.Annotation) {
				a.RegisterOnly = true
				a.WorkerModelPath = "grp/m1"
			}))},
			destroyed: []string{"register-m1-y"},
		},
		{
			name: "no timestamp in the annotation: oldest event decides (old)",
			vms:  []inventory.VM{warmVM("w-notime", wAnnot(func(a *inventory.Annotation) { a.Created = time.Time{} }))},
			events: []vctypes.Event{
				{Type: "VmClonedEvent", Created: warmNow.Add(-time.Hour)},
				{Type: "VmStartingEvent", Created: warmNow.Add(-59 * time.Minute)},
			},
			destroyed: []string{"w-notime"},
		},
		{
			name: "no timestamp in the annotation: oldest event decides (young)",
			vms:  []inventory.VM{warmVM("w-notime", wAnnot(func(a *inventory.Annotation) { a.Created = time.Time{} }))},
			events: []vctypes.Event{
				{Type: "VmClonedEvent", Created: warmNow.Add(-time.Minute)},
			},
		},
		{
			name:      "no timestamp and events unreadable: kept",
			vms:       []inventory.VM{warmVM("w-notime", wAnnot(func(a *inventory.Annotation) { a.Created = time.Time{} }))},
			eventsErr: errors.New("events gone"),
		},
		{
			// The debug hold: the annotation alone (an empty table, as
			// after a restart) keeps the VM until its hold expires, even
			// though its worker never started long ago.
			name: "held, hold running: kept although its worker never started",
			vms:  []inventory.VM{warmVM("w-held", wCreated(time.Hour), wHeld(10*time.Minute))},
		},
		{
			name:      "held, hold expired: destroyed (after a restart too: the annotation carries it)",
			vms:       []inventory.VM{warmVM("w-held", wCreated(time.Hour), wHeld(-time.Second))},
			destroyed: []string{"w-held"},
		},
		{
			name:      "held, hold expired while a new spawn of its job is in flight: destroyed",
			vms:       []inventory.VM{warmVM("w-held", wHeld(-time.Second), wAnnot(func(a *inventory.Annotation) { a.JobID = "job-9" }))},
			jobs:      []string{"job-9"},
			destroyed: []string{"w-held"},
		},
		{
			name: "held by another hatchery, expired: never touched",
			vms: []inventory.VM{warmVM("w-foreign", wCreated(time.Hour), wHeld(-time.Hour),
				wAnnot(func(a *inventory.Annotation) { a.HatcheryName = "other-hatchery" }))},
		},
		{
			name: "mixed datacenter: exactly the expired ones go",
			vms: []inventory.VM{
				warmVM("w-keep", wCreated(time.Minute)),
				warmVM("w-stuck", wCreated(time.Hour)),
				warmVM("w-done", wOff, wStarted(time.Hour)),
				warmProvVM("warmpool-v2-idle", "debian12", ""),
				provOn("warmpool-v2-half", wCreated(time.Hour)),
				warmVM("w-api", wStarted(time.Hour)),
			},
			v1:        []sdk.Worker{{Name: "w-api"}},
			destroyed: []string{"warmpool-v2-half", "w-done", "w-stuck"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var cds *cdsclienttest.Fake
			if !tc.noAPI {
				cds = &cdsclienttest.Fake{V1Workers: tc.v1, V2Workers: tc.v2, V1WorkersErr: tc.apiErr}
			}
			cfg := warmConfig()
			// A pool configured large enough: no provisioned VM is surplus here.
			cfg.WorkerProvisioning = []config.WorkerProvisioning{{ModelVMWare: "debian12", Number: 5}}
			e := newWarmEnv(t, cfg, tc.vms, cds)
			for _, n := range tc.toDelete {
				e.h.markToDelete(n)
			}
			for _, n := range tc.pending {
				putPhase(e.h, n, lifecycle.Provisioning)
			}
			for _, j := range tc.jobs {
				e.h.life.BeginSpawn(j)
			}
			for _, n := range tc.using {
				putPhase(e.h, n, lifecycle.Claimed, lifecycle.WithRef("vm-"+n))
			}
			for _, n := range tc.preparing {
				putPhase(e.h, n, lifecycle.Preparing)
			}
			for _, n := range tc.launched {
				e.h.recordUnrecordedStart(n, warmNow.Add(-time.Minute))
			}
			if tc.events != nil || tc.eventsErr != nil {
				e.vs.EXPECT().LoadVirtualMachineEvents(gomock.Any(), gomock.Any()).Return(tc.events, tc.eventsErr)
			}
			byName := map[string]inventory.VM{}
			for _, v := range tc.vms {
				byName[v.Name] = v
			}
			for _, n := range tc.destroyed {
				e.expectDelete(byName[n])
			}

			e.h.killAwolServers(context.Background())

			for _, n := range tc.destroyed {
				assert.False(t, isMarked(e.h, n), "%s still marked after its deletion", n)
			}
		})
	}
}

// TestKillAwolServersRetriesFailedDeletion: a destroy that fails keeps the VM
// marked; the next pass destroys it and forgets the mark.
func TestKillAwolServersRetriesFailedDeletion(t *testing.T) {
	t.Parallel()
	vm := warmVM("w-1", wOff)
	e := newWarmEnv(t, warmConfig(), []inventory.VM{vm}, &cdsclienttest.Fake{})
	e.h.markToDelete("w-1")
	gomock.InOrder(
		e.vs.EXPECT().DestroyVirtualMachine(gomock.Any(), warmRefIs("w-1")).Return(errors.New("task failed")),
		e.vs.EXPECT().DestroyVirtualMachine(gomock.Any(), warmRefIs("w-1")).Return(nil),
	)

	e.h.killAwolServers(context.Background())
	require.True(t, isMarked(e.h, "w-1"), "a failed deletion must stay marked")

	e.h.killAwolServers(context.Background())
	assert.False(t, isMarked(e.h, "w-1"))
}

// TestKillAwolServersFailedDeletionOfExpiredVMIsRetried: a VM found expired
// but not destroyed stays marked, so it goes even if the API is down next pass.
func TestKillAwolServersFailedDeletionOfExpiredVMIsRetried(t *testing.T) {
	t.Parallel()
	vm := warmVM("w-stuck", wCreated(time.Hour))
	cds := &cdsclienttest.Fake{}
	e := newWarmEnv(t, warmConfig(), []inventory.VM{vm}, cds)
	gomock.InOrder(
		e.vs.EXPECT().ShutdownVirtualMachine(gomock.Any(), warmRefIs("w-stuck")).Return(errors.New("host unreachable")),
		e.vs.EXPECT().ShutdownVirtualMachine(gomock.Any(), warmRefIs("w-stuck")).Return(nil),
		e.vs.EXPECT().DestroyVirtualMachine(gomock.Any(), warmRefIs("w-stuck")).Return(nil),
	)
	e.h.killAwolServers(context.Background())
	require.True(t, isMarked(e.h, "w-stuck"))

	cds.Update(func(f *cdsclienttest.Fake) { f.V1WorkersErr = errors.New("api down") })
	e.h.killAwolServers(context.Background())
	assert.False(t, isMarked(e.h, "w-stuck"))
}

// TestKillDisabledWorkers: only our VMs whose worker is disabled are marked.
func TestKillDisabledWorkers(t *testing.T) {
	t.Parallel()
	foreign := warmVM("w-foreign")
	foreign.Annotation.HatcheryName = "hatch-b"
	vms := []inventory.VM{
		warmVM("w-dis-v1"),
		warmVM("w-dis-v2"),
		warmVM("w-ok"),
		foreign,
		warmVM("w-tpl", wTemplate),
		{Ref: warmRef("w-bare"), Name: "w-bare"},
	}
	cds := &cdsclienttest.Fake{
		V1Workers: []sdk.Worker{{Name: "w-dis-v1", Status: sdk.StatusDisabled}, {Name: "w-ok", Status: sdk.StatusBuilding}, {Name: "w-foreign", Status: sdk.StatusDisabled}},
		V2Workers: []sdk.V2Worker{{Name: "w-dis-v2", Status: sdk.StatusDisabled}, {Name: "w-tpl", Status: sdk.StatusDisabled}, {Name: "w-bare", Status: sdk.StatusDisabled}},
	}
	e := newWarmEnv(t, warmConfig(), vms, cds)

	e.h.killDisabledWorkers(context.Background())

	assert.Equal(t, []string{"w-dis-v1", "w-dis-v2"}, markedNames(e.h))
}

// TestKillDisabledWorkersSkipsDestroyedVMs: the API lists an ended V1
// worker, Disabled, for minutes after the cleanup destroyed its VM; a
// snapshot that still shows the VM must not get it marked again (the next
// pass would destroy a VM vCenter no longer has).
func TestKillDisabledWorkersSkipsDestroyedVMs(t *testing.T) {
	t.Parallel()
	vms := []inventory.VM{warmVM("w-destroyed", wOff), warmVM("w-deleting", wOff), warmVM("w-dis")}
	cds := &cdsclienttest.Fake{V1Workers: []sdk.Worker{
		{Name: "w-destroyed", Status: sdk.StatusDisabled},
		{Name: "w-deleting", Status: sdk.StatusDisabled},
		{Name: "w-dis", Status: sdk.StatusDisabled},
	}}
	e := newWarmEnv(t, warmConfig(), vms, cds)
	putPhase(e.h, "w-destroyed", lifecycle.Deleting)
	require.NoError(t, e.h.life.Move("w-destroyed", lifecycle.Deleting, lifecycle.Destroyed))
	putPhase(e.h, "w-deleting", lifecycle.Deleting)

	e.h.killDisabledWorkers(context.Background())

	assert.Equal(t, []string{"w-dis"}, markedNames(e.h))
	assert.Equal(t, lifecycle.Destroyed, e.h.life.Phase("w-destroyed"))
}

// TestKillDisabledWorkersAPIError: nothing is marked when the API fails.
func TestKillDisabledWorkersAPIError(t *testing.T) {
	t.Parallel()
	cds := &cdsclienttest.Fake{V2WorkersErr: errors.New("api down"), V1Workers: []sdk.Worker{{Name: "w-1", Status: sdk.StatusDisabled}}}
	e := newWarmEnv(t, warmConfig(), []inventory.VM{warmVM("w-1")}, cds)
	e.h.killDisabledWorkers(context.Background())
	assert.Zero(t, len(markedNames(e.h)))
}

// TestCleanupPassesQuietWhileVCenterDoesNotAnswer: a cleanup pass whose
// inventory is stale because vCenter did not answer (the pass that runs
// between vCenter's return and the inventory's first good refresh
// included) logs at DEBUG, the vCenter client having logged the outage; a
// stale inventory for another reason stays a WARN.
func TestCleanupPassesQuietWhileVCenterDoesNotAnswer(t *testing.T) {
	t.Parallel()
	reset := &url.Error{Op: "Post", URL: "https://vc/sdk", Err: errors.New("connection reset by peer")}
	cases := []struct {
		name  string
		err   error
		level string
	}{
		{"stale after vcenter did not answer", fmt.Errorf("%w: last successful refresh 10s ago (limit 8s): last refresh failed: %w", inventory.ErrStale, reset), "level=DEBUG"},
		{"stale for another reason", fmt.Errorf("%w: last successful refresh 10s ago (limit 8s): last refresh failed: %w", inventory.ErrStale, errors.New("permission denied")), "level=WARN"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cds := &cdsclienttest.Fake{V1Workers: []sdk.Worker{{Name: "w-1", Status: sdk.StatusDisabled}}}
			e := newWarmEnv(t, warmConfig(), []inventory.VM{warmVM("w-1")}, cds)
			var logs bytes.Buffer
			e.h.log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			e.inv.SetErr(tc.err)
			e.h.killDisabledWorkers(context.Background())
			e.h.killAwolServers(context.Background())
			assert.Empty(t, markedNames(e.h), "nothing decided on a stale inventory")
			for _, msg := range []string{"disabled workers cleanup skipped: cannot list vms", "awol cleanup skipped: cannot list vms"} {
				line := regexp.MustCompile(`(?m)^.*msg="` + regexp.QuoteMeta(msg) + `".*$`).FindString(logs.String())
				assert.Contains(t, line, tc.level, "%s:\n%s", msg, logs.String())
			}
		})
	}
}

// TestKillAwolServersEmptiesUnconfiguredPools: with no workerProvisioning
// entry left the provisioning loop does not run, so cleanup removes the idle
// provisioned VMs of ours — and only those.
func TestKillAwolServersEmptiesUnconfiguredPools(t *testing.T) {
	t.Parallel()
	other := warmProvVM("warmpool-v2-b", "debian12", "")
	other.Annotation.HatcheryName = "hatch-b"
	vms := []inventory.VM{
		warmProvVM("warmpool-v2-idle", "debian12", ""),
		warmProvVM("warmpool-v2-idle-large", "ubuntu", "large"),
		warmProvVM("warmpool-v2-booting", "debian12", "", wOn),
		warmProvVM("warmpool-v2-claimed", "debian12", ""),
		other,
	}
	e := newWarmEnv(t, warmConfig(), vms, &cdsclienttest.Fake{})
	putPhase(e.h, "warmpool-v2-booting", lifecycle.Provisioning)
	putPhase(e.h, "warmpool-v2-claimed", lifecycle.Claimed, lifecycle.WithRef("vm-warmpool-v2-claimed"))
	e.expectDelete(vms[0])
	e.expectDelete(vms[1])

	e.h.killAwolServers(context.Background())
	assert.Zero(t, len(markedNames(e.h)))
}

// TestKillAwolServersDropsAbsentDeleteMarks: a delete mark whose VM no
// listing shows (a clone that failed with a fault marks its name) goes
// once it has been missing for deleteMarkAbsentTTL; never while the name
// is being cloned, provisioned, claimed or deleted; a VM listed again
// restarts the count. In the lifecycle table a name is in one phase: a
// busy name is in its busy phase (cloning, provisioning, preparing), never
// Marked, and the cleanup never drops it.
func TestKillAwolServersDropsAbsentDeleteMarks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// busy puts the name in one of the in-flight phases instead of
		// marking it.
		busy func(h *HatcheryVSphere, name string)
		// listedOnce lists the VM on the second pass only.
		listedOnce bool
		wantKept   bool
	}{
		{name: "never listed: dropped"},
		{name: "clone in flight: kept", busy: func(h *HatcheryVSphere, n string) { putPhase(h, n, lifecycle.Cloning) }, wantKept: true},
		{name: "being provisioned: kept", busy: func(h *HatcheryVSphere, n string) { putPhase(h, n, lifecycle.Provisioning) }, wantKept: true},
		{name: "claimed, being prepared: kept", busy: func(h *HatcheryVSphere, n string) { putPhase(h, n, lifecycle.Preparing) }, wantKept: true},
		{name: "listed in between: count restarts", listedOnce: true, wantKept: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newWarmEnv(t, warmConfig(), nil, &cdsclienttest.Fake{})
			now := warmNow
			e.h.now = func() time.Time { return now }
			// kept: still marked, or still in its busy phase.
			kept := func() bool { return isMarked(e.h, "w-gone") }
			if tc.busy != nil {
				tc.busy(e.h, "w-gone")
				phase := e.h.life.Phase("w-gone")
				kept = func() bool { return e.h.life.Phase("w-gone") == phase }
			} else {
				e.h.markToDelete("w-gone")
			}

			e.h.killAwolServers(context.Background())
			require.True(t, kept(), "a fresh mark is kept")
			now = now.Add(deleteMarkAbsentTTL / 2)
			if tc.listedOnce {
				// Listed, and marked: the pass destroys it, and the
				// destroy fails, so it stays marked.
				e.inv.Set(warmVM("w-gone", wOff))
				e.vs.EXPECT().DestroyVirtualMachine(gomock.Any(), warmRefIs("w-gone")).Return(errors.New("task failed"))
			}
			e.h.killAwolServers(context.Background())
			require.True(t, kept(), "kept before the bound")
			e.inv.Set()

			now = now.Add(deleteMarkAbsentTTL/2 + time.Second)
			e.h.killAwolServers(context.Background())
			assert.Equal(t, tc.wantKept, kept())
		})
	}
}

// TestKillAwolServersShutdownDuringDeletionIsNoWarning: a destroy whose wait
// is cut short because the hatchery is stopping is logged at INFO, not WARN
// (a healthy run that stops mid-deletion logs no WARN); a destroy that fails
// while running still warns.
func TestKillAwolServersShutdownDuringDeletionIsNoWarning(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		stopping bool
		want     string
	}{
		{"stopping", true, "level=INFO"},
		{"running", false, "level=WARN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newWarmEnv(t, warmConfig(), []inventory.VM{warmVM("w-1", wOff)}, &cdsclienttest.Fake{})
			var logs bytes.Buffer
			e.h.log = slog.New(slog.NewTextHandler(&logs, nil))
			e.h.pool.Log = e.h.log
			e.h.markToDelete("w-1")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			e.vs.EXPECT().DestroyVirtualMachine(gomock.Any(), warmRefIs("w-1")).DoAndReturn(
				func(context.Context, vctypes.Ref) error {
					if tc.stopping {
						cancel() // shutdown while the destroy task runs
						return fmt.Errorf("wait for task: %w", context.Canceled)
					}
					return errors.New("task failed")
				})

			e.h.killAwolServers(ctx)
			line := ""
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, "vm not deleted") {
					line = l
				}
			}
			require.NotEmpty(t, line, "the failed deletion is logged:\n%s", logs.String())
			assert.Contains(t, line, tc.want)
			assert.True(t, isMarked(e.h, "w-1"), "the VM stays marked for the next pass")
		})
	}
}

// TestKillAwolServersNeverStopsAWorkerOnAStaleListing is the worker VM that
// vanished mid-job in `demo --instances 2` on a loaded machine. The
// cleanup's listing still showed a worker's VM powered off, as it was
// between its clone and its power-on (a snapshot older than the power-on:
// the other instance's spawn, or this one's before its watch caught up),
// while the API's worker list, read after, already listed its worker: the
// verdict "worker finished: powered off, its worker still listed by the
// api". vCenter refuses to destroy the running VM; the deletion used to
// answer that with a power off and a second destroy, killing the worker
// 0.3 s after it signed in. Now the deletion is withdrawn: no power off,
// the VM not marked, and the next pass, on a listing that shows it
// running, keeps it. The same holds for the other verdicts that rest on
// the VM being powered off ("unknown to the api and powered off", a job
// Building while the VM is listed off).
func TestKillAwolServersNeverStopsAWorkerOnAStaleListing(t *testing.T) {
	t.Parallel()
	// The port's errors come classified (vcenter.Classify), as the
	// adapter's do.
	invalidPower := vcenter.Classify(task.Error{LocalizedMethodFault: &types.LocalizedMethodFault{
		Fault: &types.InvalidPowerState{ExistingState: types.VirtualMachinePowerStatePoweredOn},
	}})
	cases := []struct {
		name string
		vm   inventory.VM
		cds  *cdsclienttest.Fake
	}{
		{"its worker listed by the api", warmVM("w-1", wOff, wCreated(5*time.Second)),
			&cdsclienttest.Fake{V2Workers: []sdk.V2Worker{{Name: "w-1"}}}},
		{"its worker unknown to the api, start recorded", warmVM("w-1", wOff, wCreated(2*time.Minute), wStarted(time.Minute)),
			&cdsclienttest.Fake{}},
		{"its job building on it, start not recorded", warmVM("w-1", wOff, wCreated(time.Hour), wAnnot(func(a *inventory.Annotation) { a.JobID = "42" })),
			&cdsclienttest.Fake{JobStatus: map[string]string{"42": sdk.StatusBuilding}, JobWorker: map[string]string{"42": "w-1"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newWarmEnv(t, warmConfig(), []inventory.VM{tc.vm}, tc.cds)
			var logs bytes.Buffer
			e.h.log = slog.New(slog.NewTextHandler(&logs, nil))
			// Only the destroy: no ShutdownVirtualMachine is expected, and
			// the mock fails the test on one.
			e.vs.EXPECT().DestroyVirtualMachine(gomock.Any(), warmRefIs("w-1")).Return(invalidPower)
			e.h.killAwolServers(context.Background())
			assert.False(t, isMarked(e.h, "w-1"), "a withdrawn deletion leaves no mark: it would power the vm off next pass")
			assert.Contains(t, logs.String(), "awol cleanup withdrew its deletion")
			assert.NotContains(t, logs.String(), "level=WARN")
			assert.Empty(t, tc.cds.Released(), "nothing released: the worker runs")

			// The next listing shows it running: kept, no vCenter call.
			on := tc.vm
			on.PowerState = vctypes.PoweredOn
			e.inv.Set(on)
			e.h.killAwolServers(context.Background())
		})
	}
}
