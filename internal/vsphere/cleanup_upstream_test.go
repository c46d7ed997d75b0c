package vsphere

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/cloudinit"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
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
			e := newWarmEnv(t, cfg, vms, &warmCDS{})
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
	cds := &warmCDS{v1: []sdk.Worker{{Name: "w-running"}}, v2Region: "eu-west"}
	e := newWarmEnv(t, cfg, vms, cds)
	for _, v := range vms[:3] {
		e.expectDelete(v)
	}
	e.h.killAwolServers(context.Background())
	assert.ElementsMatch(t, []string{"v1:42", "v2:eu-west:run-7f3a"}, cds.releasedJobs())
}

// TestKillAwolServersKeepsJobAWorkerTook: a VM whose record says its worker
// never started (the write of the start was cut by a stop, or another
// instance died before writing it) may still have run its worker: the
// cleanup reclaims the VM but releases its job only while the job still
// waits for a worker. A job Building or Success stays as it is (released,
// the API would queue it again and it would run twice).
func TestKillAwolServersKeepsJobAWorkerTook(t *testing.T) {
	t.Parallel()
	job := func(id string) vmOpt { return wAnnot(func(a *inventory.Annotation) { a.JobID = id }) }
	vms := []inventory.VM{
		warmVM("w-v1-building", wCreated(time.Hour), job("42")),
		warmVM("w-v2-success", wOff, wCreated(time.Hour), job("run-done")),
		warmVM("w-v2-waiting", wCreated(time.Hour), job("run-wait")),
	}
	cds := &warmCDS{v2Region: "default", jobStatus: map[string]string{"42": sdk.StatusBuilding, "run-done": sdk.StatusSuccess}}
	e := newWarmEnv(t, warmConfig(), vms, cds)
	for _, v := range vms {
		e.expectDelete(v)
	}
	e.h.killAwolServers(context.Background())
	assert.Equal(t, []string{"v2:default:run-wait"}, cds.releasedJobs())
}

// TestScrubRegisteredRemovesUserdata: once the API lists a cloud-init
// worker, its VM's userdata keys are set to empty (removed); a worker not
// yet registered keeps them.
func TestScrubRegisteredRemovesUserdata(t *testing.T) {
	t.Parallel()
	vms := []inventory.VM{warmVM("w-reg", wStarted(time.Minute)), warmVM("w-boot", wStarted(time.Minute))}
	cds := &warmCDS{v2: []sdk.V2Worker{{Name: "w-reg"}}}
	e := newWarmEnv(t, warmConfig(), vms, cds)
	e.h.userdata.add("w-reg", warmRef("w-reg"))
	e.h.userdata.add("w-boot", warmRef("w-boot"))
	var got types.VirtualMachineConfigSpec
	e.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), warmRefIs("w-reg"), gomock.Any()).DoAndReturn(
		func(_ context.Context, _ types.ManagedObjectReference, spec types.VirtualMachineConfigSpec) error {
			got = spec
			return nil
		})
	e.h.killAwolServers(context.Background())

	keys := map[string]string{}
	for _, o := range got.ExtraConfig {
		ov := o.GetOptionValue()
		keys[ov.Key], _ = ov.Value.(string)
	}
	require.Contains(t, keys, cloudinit.GuestinfoUserdata)
	require.Contains(t, keys, cloudinit.GuestinfoUserdataEncoding)
	assert.Empty(t, keys[cloudinit.GuestinfoUserdata])
	assert.Empty(t, keys[cloudinit.GuestinfoUserdataEncoding])
	pending := e.h.userdata.snapshot()
	assert.NotContains(t, pending, "w-reg")
	assert.Contains(t, pending, "w-boot")
}
