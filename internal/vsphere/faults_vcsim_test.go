//go:build !race

// The vCenter fault tests drive the simulator's FaultInjector, whose rule
// counters govmomi v0.56.0 (pinned) updates without a lock: any two SOAP
// calls at once while a rule is installed are a data race inside the
// simulator, which the race detector reports as a test failure. These
// tests run without the race detector, in their own step of .ci/test.

package vsphere_test

import (
	"context"
	"errors"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vsphere"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
)

// TestFaultsCloneFails: CloneVM_Task answers a fault. The spawn fails
// naming the clone, creates nothing, releases its IP at once; the job's
// retry spawns normally.
func TestFaultsCloneFails(t *testing.T) {
	t.Parallel()
	for _, mode := range ftModes {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			r := ftStart(t, ftOpts{mode: mode})
			ftRule(r.env, "CloneVM_Task", 1, &types.InsufficientResourcesFault{})

			r.ftSpawnFails("worker-clone-1", "job-1", "", "create vm", "clone")
			assert.EqualValues(t, 1, r.env.InjectedFaults())
			_, exists := ftFind(r.env, "worker-clone-1")
			assert.False(t, exists)
			assert.Empty(t, r.h.FaultsReservedIPs(), "ip released at once")
			r.ftCleanup(1)
			r.ftCheckInvariants()

			// The mark of a name no VM carries is not kept forever: it
			// survives a while (a late VM would still be caught), then goes.
			assert.True(t, r.h.FaultsMarkedToDelete("worker-clone-1"), "marked: a half-made vm may appear")
			r.clock.Advance(vsphere.FaultsDeleteMarkAbsentTTL())
			r.ftCleanup(1)
			assert.False(t, r.h.FaultsMarkedToDelete("worker-clone-1"), "mark of a vm never listed dropped")

			require.NoError(t, r.ftSpawn("worker-clone-2", "job-1", ""), "the retry spawns")
			v, ok := ftFind(r.env, "worker-clone-2")
			require.True(t, ok)
			assert.NotEqual(t, ftForeignIP, v.Annot.IPAddress, "never the foreign vm's address")
			r.ftCleanup(1)
			r.ftCheckInvariants()
		})
	}
}

// TestFaultsClaimFails: a provisioned VM is claimed, then the reconfigure
// that renames and resizes it (ReconfigVM_Task) or the power-on
// (PowerOnVM_Task) fails. The spawn fails naming the step; the VM, under
// the worker's name after a failed power-on and under its pool name after
// a refused renaming reconfigure (vCenter applied nothing), is powered
// off, marked and destroyed by the next cleanup pass; the pool is refilled
// and the retry spawns.
func TestFaultsClaimFails(t *testing.T) {
	t.Parallel()
	// skip: matching calls that pass first. A claim's first reconfigure
	// is its compare-and-swap on changeVersion (docs/high-availability.md):
	// the resize is the second.
	cases := []struct {
		name, method, flavor, step string
		skip                       int
		renamed                    bool // the VM has the worker's name after the fault
	}{
		{"power on", "PowerOnVM_Task", "", "power on", 0, true},
		{"resize", "ReconfigVM_Task", "large", "reconfigure", 1, false},
	}
	for _, tc := range cases {
		for _, mode := range ftModes {
			t.Run(tc.name+"/"+string(mode), func(t *testing.T) {
				t.Parallel()
				r := ftStart(t, ftOpts{mode: mode, pools: []config.WorkerProvisioning{{ModelVMWare: vcsimtest.DefaultTemplate, Number: 1}}})
				ctx := r.env.Context()
				r.ftSync()
				r.h.WarmProvisioningPass(ctx)
				pool := ftOurs(r.env)
				require.Len(t, pool, 1)
				r.ftSync()

				r.env.InjectFault(vcsimtest.Fault{Method: tc.method, Skip: tc.skip, Max: 1, Err: &types.InsufficientResourcesFault{}})
				r.ftSpawnFails("worker-claim-1", "job-2", tc.flavor, "create vm", "prepare provisioned vm", tc.step)
				assert.EqualValues(t, 1, r.env.InjectedFaults())
				name, other := "worker-claim-1", pool[0]
				if !tc.renamed {
					name, other = other, name
				}
				_, stillOther := ftFind(r.env, other)
				assert.False(t, stillOther, "%s: renamed before the fault: %v", other, tc.renamed)
				v, ok := ftFind(r.env, name)
				require.True(t, ok)
				assert.Equal(t, types.VirtualMachinePowerStatePoweredOff, v.PowerState)
				assert.True(t, r.h.FaultsMarkedToDelete(name))

				r.ftCleanup(1)
				_, ok = ftFind(r.env, name)
				assert.False(t, ok, "failed claimed vm destroyed by the next pass")
				r.ftCheckInvariants()

				r.ftSync()
				r.h.WarmProvisioningPass(ctx)
				r.ftSync()
				require.NoError(t, r.ftSpawn("worker-claim-2", "job-2", tc.flavor), "the retry spawns")
				r.ftCleanup(1)
				r.ftCheckInvariants()
			})
		}
	}
}

// TestFaultsRecordStartFails: the post-launch write of WorkerStarted
// (ReconfigVM_Task) fails. The worker runs, so the spawn succeeds and the
// VM is not abandoned; cleanup keeps it while the API knows the worker and
// removes it once the worker is gone past the registration TTL.
func TestFaultsRecordStartFails(t *testing.T) {
	t.Parallel()
	for _, mode := range ftModes {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			r := ftStart(t, ftOpts{mode: mode})
			ftRule(r.env, "ReconfigVM_Task", 1, &types.InvalidState{})

			require.NoError(t, r.ftSpawn("worker-rec-1", "job-4", ""))
			assert.EqualValues(t, 1, r.env.InjectedFaults())
			v, ok := ftFind(r.env, "worker-rec-1")
			require.True(t, ok)
			assert.Equal(t, types.VirtualMachinePowerStatePoweredOn, v.PowerState)
			assert.Nil(t, v.Annot.WorkerStarted, "the start was not recorded")
			assert.Len(t, r.env.Guest.CallsFor("worker-rec-1"), 2, "env then the worker launch")

			r.ftCleanup(1)
			_, ok = ftFind(r.env, "worker-rec-1")
			assert.True(t, ok, "a registered worker is kept")
			r.ftCheckInvariants("worker-rec-1")

			r.cds.RemoveV2Worker("worker-rec-1")
			r.clock.Advance(r.cfg.WorkerRegistrationTTLDuration() + time.Second)
			r.ftCleanup(1)
			_, ok = ftFind(r.env, "worker-rec-1")
			assert.False(t, ok, "the finished worker is removed")
			r.ftCheckInvariants()
		})
	}
}

// TestFaultsDestroyFails: a failed spawn leaves a VM marked for deletion;
// Destroy_Task fails on two passes: the VM stays marked (never forgotten,
// whatever the clock says), and the third pass destroys it. A running
// worker is untouched throughout.
func TestFaultsDestroyFails(t *testing.T) {
	t.Parallel()
	for _, mode := range ftModes {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			r := ftStart(t, ftOpts{mode: mode})
			require.NoError(t, r.ftSpawn("worker-ok", "job-ok", ""))

			r.env.Guest.FailNext(&types.InvalidGuestLogin{})
			r.ftSpawnFails("worker-del-1", "job-5", "", "run env in guest")
			v, ok := ftFind(r.env, "worker-del-1")
			require.True(t, ok)
			assert.Equal(t, types.VirtualMachinePowerStatePoweredOff, v.PowerState)
			assert.True(t, r.h.FaultsMarkedToDelete("worker-del-1"))
			assert.NotContains(t, r.h.FaultsReservedIPs(), v.Annot.IPAddress, "reservation released (the vm's annotation holds the address)")

			ftRule(r.env, "Destroy_Task", 2, &types.ResourceInUse{})
			for pass := 1; pass <= 2; pass++ {
				r.ftCleanup(1)
				_, ok := ftFind(r.env, "worker-del-1")
				assert.True(t, ok, "pass %d: destroy failed, vm still there", pass)
				assert.True(t, r.h.FaultsMarkedToDelete("worker-del-1"), "pass %d: still marked", pass)
				r.clock.Advance(time.Hour)
				ftRegister(r.cds, "worker-ok") // keep the running worker within its ttl
				r.clock.Advance(-time.Hour)
			}
			assert.EqualValues(t, 2, r.env.InjectedFaults())
			r.ftCleanup(1)
			_, ok = ftFind(r.env, "worker-del-1")
			assert.False(t, ok, "destroyed on the third pass")
			_, ok = ftFind(r.env, "worker-ok")
			assert.True(t, ok)
			r.ftCheckInvariants()
		})
	}
}

// TestFaultsGuestNeverReady: guest operations never become ready; the
// readiness wait times out, the spawn fails naming the wait, the VM is
// powered off, marked, its IP released, and cleanup destroys it. It
// shortens the package's readiness timeouts: not parallel.
func TestFaultsGuestNeverReady(t *testing.T) {
	vsphere.FaultsShortenReadiness(t, 300*time.Millisecond)
	for _, mode := range ftModes {
		t.Run(string(mode), func(t *testing.T) {
			r := ftStart(t, ftOpts{mode: mode, env: vcsimtest.Options{ReadyDelay: time.Hour}})
			r.ftSpawnFails("worker-nr-1", "job-6", "", "wait for guest operations ready")
			v, ok := ftFind(r.env, "worker-nr-1")
			require.True(t, ok)
			assert.Equal(t, types.VirtualMachinePowerStatePoweredOff, v.PowerState)
			assert.True(t, r.h.FaultsMarkedToDelete("worker-nr-1"))
			assert.Empty(t, r.h.FaultsReservedIPs(), "ip reservation released")
			assert.Empty(t, r.env.Guest.CallsFor("worker-nr-1"), "no guest call on a vm never ready")
			r.ftCleanup(1)
			_, ok = ftFind(r.env, "worker-nr-1")
			assert.False(t, ok)
			r.ftCheckInvariants()
		})
	}
}

// TestFaultsCloneSlowerThanTaskTimeout: the clone request is slower than
// the clone's bound (its task timeout). The spawn gives up naming the
// clone and keeps the IP reserved (the outcome is unknown); vCenter still
// creates the VM afterwards holding that IP; it carries our annotation and
// was marked, so the next cleanup pass destroys it and frees the IP.
//
// Only the clone's bound is shortened (slowCloneClient), to 2 s against
// the simulator's 3 s answer: the answer comes at least 3 s after the
// request left, after the bound, however slow the machine. Shortening
// every named timeout instead (TaskTimeoutScale 1/300) cut the address
// lock's to 100 ms, which a loaded machine exceeded: the spawn then failed
// reserving its IP, before any clone.
func TestFaultsCloneSlowerThanTaskTimeout(t *testing.T) {
	t.Parallel()
	for _, mode := range ftModes {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			r := ftStart(t, ftOpts{
				mode: mode,
				beforeClient: func(env *vcsimtest.Env) {
					// Set before anything of ours calls the simulator.
					env.Model.DelayConfig.MethodDelay = map[string]int{"CloneVM_Task": 3000}
				},
				wrap: func(c vctypes.Port) vctypes.Port { return slowCloneClient{Port: c, bound: 2 * time.Second} },
			})
			r.ftSpawnFails("worker-slow-1", "job-7", "", "create vm", "clone")
			reserved := r.h.FaultsReservedIPs()
			require.Len(t, reserved, 1, "outcome unknown: the ip stays reserved")
			assert.True(t, r.h.FaultsMarkedToDelete("worker-slow-1"), "outcome unknown: marked")

			require.Eventually(t, func() bool { _, ok := ftFind(r.env, "worker-slow-1"); return ok },
				testutil.Patience(t), 20*time.Millisecond, "the slow clone completes on vCenter's side")
			late, _ := ftFind(r.env, "worker-slow-1")
			require.NotNil(t, late.Annot)
			assert.Equal(t, ftHatchery, late.Annot.HatcheryName)
			assert.Equal(t, reserved[0], late.Annot.IPAddress, "the late vm holds the reserved ip")

			r.ftCleanup(1)
			_, ok := ftFind(r.env, "worker-slow-1")
			assert.False(t, ok, "the late vm is destroyed")
			r.ftCheckInvariants()
		})
	}
}

// slowCloneClient bounds the clones of the Port it wraps by bound, as
// the clone task timeout would (the adapter's runTask takes the earlier
// deadline); every other call keeps its own bound.
type slowCloneClient struct {
	vctypes.Port
	bound time.Duration
}

func (c slowCloneClient) CloneVirtualMachine(ctx context.Context, req vctypes.Clone) (vctypes.Ref, error) {
	ctx, cancel := context.WithTimeout(ctx, c.bound)
	defer cancel()
	return c.Port.CloneVirtualMachine(ctx, req)
}

// TestFaultsSessionTerminatedMidSpawn: the hatchery's vCenter session is
// terminated while the spawn waits for guest operations; the client logs
// in again and the spawn succeeds.
func TestFaultsSessionTerminatedMidSpawn(t *testing.T) {
	t.Parallel()
	for _, mode := range ftModes {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			r := ftStart(t, ftOpts{mode: mode, env: vcsimtest.Options{ReadyDelay: 500 * time.Millisecond}})
			ctx := r.env.Context()
			us, err := session.NewManager(r.client.Vim25()).UserSession(ctx)
			require.NoError(t, err)
			require.NotNil(t, us)

			terminated := make(chan error, 1)
			go func() {
				// When the worker VM is powered on (and not yet ready).
				tick := time.NewTicker(5 * time.Millisecond)
				defer tick.Stop()
				for {
					if v, ok := ftFind(r.env, "worker-sess-1"); ok && v.PowerState == types.VirtualMachinePowerStatePoweredOn {
						terminated <- r.env.Admin.SessionManager.TerminateSession(ctx, []string{us.Key})
						return
					}
					select {
					case <-ctx.Done():
						terminated <- ctx.Err()
						return
					case <-tick.C:
					}
				}
			}()
			require.NoError(t, r.ftSpawn("worker-sess-1", "job-8", ""))
			require.NoError(t, <-terminated)
			assert.GreaterOrEqual(t, r.client.Relogins(), int64(1), "logged in again")
			v, ok := ftFind(r.env, "worker-sess-1")
			require.True(t, ok)
			assert.NotNil(t, v.Annot.WorkerStarted)
			r.ftCleanup(1)
			r.ftCheckInvariants()
		})
	}
}

// TestFaultsVCenterOutage: every property read fails for a while. The
// shared inventory refuses its stale snapshot; cleanup, provisioning,
// capacity and spawns decide nothing and change nothing on vCenter during
// the outage. After recovery the next pass converges: the finished worker
// goes, the running worker and the pool stay.
func TestFaultsVCenterOutage(t *testing.T) {
	t.Parallel()
	for _, mode := range ftModes {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			r := ftStart(t, ftOpts{mode: mode, pools: []config.WorkerProvisioning{{ModelVMWare: vcsimtest.DefaultTemplate, Number: 1}}})
			ctx := r.env.Context()
			r.ftSync()
			r.h.WarmProvisioningPass(ctx)
			require.Len(t, ftOurs(r.env), 1)
			r.ftSync()
			require.NoError(t, r.ftSpawn("worker-out-a", "job-a", ""))
			require.NoError(t, r.ftSpawn("worker-out-b", "job-b", ""))
			// Worker b ends: it leaves the API and its VM powers off.
			r.cds.RemoveV2Worker("worker-out-b")
			b, _ := ftFind(r.env, "worker-out-b")
			_, err := object.NewVirtualMachine(r.env.Admin.Client, b.Ref).PowerOff(ctx)
			require.NoError(t, err)
			require.Eventually(t, func() bool {
				v, _ := ftFind(r.env, "worker-out-b")
				return v.PowerState == types.VirtualMachinePowerStatePoweredOff
			}, 5*time.Second, 10*time.Millisecond)
			before := ftSimVMs(r.env)

			// The outage.
			ftRule(r.env, "RetrievePropertiesEx", 0, nil)
			ftRule(r.env, "RetrieveProperties", 0, nil)
			if r.shared != nil {
				wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				for {
					require.NoError(t, r.shared.WaitRefresh(wctx), "inventory never went stale")
					if _, err := r.shared.VMs(ctx); errors.Is(err, inventory.ErrStale) {
						break
					}
				}
			}
			stats := r.client.Stats()
			r.clock.Advance(r.cfg.WorkerRegistrationTTLDuration() + time.Second)
			for i := 0; i < 2; i++ {
				r.h.WarmKillAwolServersPass(ctx)
				r.h.FaultsKillDisabledWorkersPass(ctx)
				r.h.WarmProvisioningPass(ctx)
			}
			args := ftArgs("worker-out-c", "job-c", "")
			ok, err := r.h.CanAllocateResources(ctx, args.Model, "job-c", nil)
			assert.Error(t, err)
			assert.False(t, ok, "no capacity decision without an inventory")
			err = r.h.SpawnWorker(ctx, args)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "list vms")
			var be *hatchery.BackendError
			assert.True(t, errors.As(err, &be), "vcenter's fault: the job is released, the attempt not counted: %v", err)

			during := r.client.Stats().Sub(stats)
			for _, m := range []string{"Destroy_Task", "PowerOffVM_Task", "ShutdownGuest", "CloneVM_Task", "Rename_Task", "ReconfigVM_Task", "PowerOnVM_Task"} {
				assert.Zero(t, during[m].Requests, "%s called during the outage", m)
			}
			assert.Equal(t, before, ftSimVMs(r.env), "nothing changed on vCenter during the outage")

			// Recovery.
			r.env.Model.Service.FaultInjector().ClearRules()
			r.ftCleanup(1)
			_, ok = ftFind(r.env, "worker-out-b")
			assert.False(t, ok, "the finished worker is removed after recovery")
			_, ok = ftFind(r.env, "worker-out-a")
			assert.True(t, ok, "the running worker stays")
			// Worker a took the provisioned vm; the pool is refilled now.
			r.ftSync()
			r.h.WarmProvisioningPass(ctx)
			r.ftCleanup(1)
			r.ftCheckInvariants()
			assert.Len(t, ftOurs(r.env), 2, "worker a and the refilled pool of one")
		})
	}
}
