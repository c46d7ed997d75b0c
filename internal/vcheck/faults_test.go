package vcheck

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// lines are rep's results of capability.
func lines(rep *Report, capability string) []Result {
	var out []Result
	for _, r := range rep.Results {
		if r.Capability == capability {
			out = append(out, r)
		}
	}
	return out
}

// TestPrivilegeRemoved: a privilege the configured features need,
// denied to the user on the hatchery's folder (the simulator's
// HasPrivilegeOnEntities extended in vcsimtest to answer a denial as
// vCenter does), is a failed "privileges" line naming the privilege, the
// object missing it and the fix.
func TestPrivilegeRemoved(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	env.DenyPrivileges("VirtualMachine.Interact.Suspend")
	rep := Run(context.Background(), envConfig(env, false), envDialer(env), Options{RunID: "priv"})
	t.Logf("report:\n%s", text(rep))
	got := lines(rep, "privileges")
	require.Len(t, got, 1)
	assert.Equal(t, Fail, got[0].Status)
	assert.Equal(t, vcsimtest.FolderPath, got[0].Object)
	assert.Contains(t, got[0].Detail, "VirtualMachine.Interact.Suspend")
	assert.Contains(t, got[0].Fix, "grant VirtualMachine.Interact.Suspend on "+vcsimtest.FolderPath)
	assert.Equal(t, "no permission", got[0].Fault)
	assert.True(t, rep.Failed())
	assert.Empty(t, scratchLeft(t, env))
}

// TestGuestNeverReady: a template whose guest never becomes ready for
// guest operations (VMware Tools installed but never running: the
// simulator's readiness delayed past the check's bound) fails "guest
// ready" with the fix; the program is not tried; the clone is removed.
func TestGuestNeverReady(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{ReadyDelay: time.Hour})
	rep := Run(context.Background(), envConfig(env, false), envDialer(env), Options{RunID: "notready", GuestReadyTimeout: 100 * time.Millisecond})
	t.Logf("report:\n%s", text(rep))
	got := lines(rep, "guest ready")
	require.Len(t, got, 1)
	assert.Equal(t, Fail, got[0].Status)
	assert.Contains(t, got[0].Detail, "not ready within 100ms")
	assert.Contains(t, got[0].Fix, "VMware Tools")
	assert.Empty(t, lines(rep, "guest program"))
	assert.True(t, rep.Failed())
	assert.Equal(t, Pass, lines(rep, "clean-up")[0].Status)
	assert.Empty(t, scratchLeft(t, env))
}

// TestGuestCannotReachTheAPI: a guest from which the worker download URL
// does not answer (the fake guest's fetch exits 7, curl's "failed to
// connect") fails "api from guest" naming the URL and the network fix;
// one that reads another guestinfo value than vCenter holds fails
// "guestinfo in guest"; the guest program itself passed.
func TestGuestCannotReachTheAPI(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	env.Guest.SetExitCode(func(c vcsimtest.GuestCall) int32 {
		switch {
		case strings.Contains(c.Arguments, "/download/worker/"):
			return 7
		case strings.Contains(c.Arguments, "vmware-rpctool"):
			return 1 // the guest reads another guestinfo value
		}
		return 0
	})
	rep := Run(context.Background(), envConfig(env, false), envDialer(env), Options{RunID: "nonet"})
	t.Logf("report:\n%s", text(rep))
	assert.Equal(t, Pass, lines(rep, "guest program")[0].Status)
	got := lines(rep, "api from guest")
	require.Len(t, got, 1)
	assert.Equal(t, Fail, got[0].Status)
	assert.Contains(t, got[0].Detail, "could not fetch http://127.0.0.1:8081/download/worker/linux/$(uname -m) (exit code 7)")
	assert.Contains(t, got[0].Fix, "workerApiHttp")
	gi := lines(rep, "guestinfo in guest")
	require.Len(t, gi, 1)
	assert.Equal(t, Fail, gi[0].Status)
	assert.Contains(t, gi[0].Detail, `did not read guestinfo.hatchery-vsphere-check = "nonet-0" (exit code 1)`)
	assert.True(t, rep.Failed())
	assert.Empty(t, scratchLeft(t, env))
}

// TestDatastoreFull: a placement whose datastore has no room (the
// simulator extended in vcsimtest to answer NoDiskSpace as vCenter does)
// fails its clone with the fault and the fix; the other placement's
// clone passes and carries the rest of the check.
func TestDatastoreFull(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{Placements: true})
	env.FillDatastore(vcsimtest.DatastoreA, 0)
	cfg := envConfig(env, false)
	cfg.Placements = env.PlacementConfigs()
	cfg.ResourcePoolString, cfg.DatastoreString = "", ""
	dial := func(ctx context.Context) (*vcenter.Client, error) {
		c := env.ClientConfig()
		c.ResourcePool = ""
		for _, p := range cfg.Placements {
			c.Placements = append(c.Placements, vcenter.PlacementKeys{ResourcePool: p.ResourcePool, Datastores: p.Datastores, Folder: p.Folder, Network: p.Network})
		}
		return vcenter.Dial(ctx, c)
	}
	rep := Run(context.Background(), cfg, dial, Options{RunID: "full"})
	t.Logf("report:\n%s", text(rep))
	clones := lines(rep, "clone")
	require.Len(t, clones, 2)
	assert.Equal(t, Fail, clones[0].Status)
	assert.Equal(t, vcsimtest.DefaultTemplate+" -> a", clones[0].Object)
	assert.Equal(t, "no disk space", clones[0].Fault)
	assert.Contains(t, clones[0].Fix, "free space on the datastore")
	assert.Equal(t, Pass, clones[1].Status)
	assert.Equal(t, Pass, lines(rep, "power on")[0].Status)
	assert.True(t, rep.Failed())
	assert.Empty(t, scratchLeft(t, env))
}

// TestLeftoversRemovedByRecordOnly: what a run left (kept, as a killed
// run leaves it: its folder, its powered-off VMs, a lock) is removed by
// the next run's clean-up, by the check's record; a folder of the same
// prefix holding a VM without the record is left alone, VM and folder,
// and said on a failed line.
func TestLeftoversRemovedByRecordOnly(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	cfg := envConfig(env, false)
	kept := Run(context.Background(), cfg, envDialer(env), Options{RunID: "killed", Keep: true})
	require.False(t, kept.Failed(), text(kept))
	require.Equal(t, FolderPrefix+"killed", kept.Kept)
	_, err := env.Client.CreateLock(context.Background(), FolderPrefix+"killed-lock")
	require.NoError(t, err)
	foreignFolder := vcsimtest.FolderPath + "/" + FolderPrefix + "not-ours"
	env.AddVMsIn(foreignFolder, []vcsimtest.ForeignVM{{Name: "someone-elses", Annotation: "not the check's", PoweredOn: true}})
	left := scratchLeft(t, env)
	assert.Contains(t, left, FolderPrefix+"killed")
	assert.Contains(t, left, "lock "+FolderPrefix+"killed-lock")

	rep := Run(context.Background(), cfg, envDialer(env), Options{RunID: "next", CleanOnly: true})
	t.Logf("report:\n%s", text(rep))
	var passed, failed []Result
	for _, r := range lines(rep, "clean-up of earlier runs") {
		if r.Status == Pass {
			passed = append(passed, r)
		} else {
			failed = append(failed, r)
		}
	}
	require.Len(t, passed, 1)
	assert.Contains(t, passed[0].Detail, "removed 1 vm(s)")
	assert.Contains(t, passed[0].Detail, FolderPrefix+"killed")
	require.Len(t, failed, 1)
	assert.Equal(t, FolderPrefix+"not-ours", failed[0].Object)
	assert.Contains(t, failed[0].Detail, "someone-elses")
	assert.Equal(t, []string{FolderPrefix + "not-ours"}, scratchLeft(t, env), "only the folder without the record stays")
	st, ok := env.Inspect("someone-elses")
	require.True(t, ok, "the VM without the record is not destroyed")
	assert.Equal(t, "poweredOn", string(st.PowerState), "nor powered off")
}

// TestBadInput: an unknown template, an unreachable vCenter and refused
// credentials each give one failed line with its fix, a failed run and
// nothing left behind; the password never shows.
func TestBadInput(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})

	t.Run("unknown template", func(t *testing.T) {
		cfg := envConfig(env, false)
		cfg.Models[0].ModelVMWare = "no-such-template"
		rep := Run(context.Background(), cfg, envDialer(env), Options{RunID: "unknown"})
		t.Logf("report:\n%s", text(rep))
		bad := failedLines(rep)
		require.Len(t, bad, 1)
		assert.Equal(t, "topology", bad[0].Capability)
		assert.Equal(t, config.KeyPrefix+".models[0].modelVMWare", bad[0].Object)
		assert.Contains(t, bad[0].Detail, `no template "no-such-template"`)
		assert.Empty(t, lines(rep, "scratch folder"), "nothing is created")
		assert.Empty(t, scratchLeft(t, env))
	})
	t.Run("unreachable", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close())
		cfg := envConfig(env, false)
		cfg.Endpoint = "https://" + addr + "/sdk"
		dial := func(ctx context.Context) (*vcenter.Client, error) {
			c := env.ClientConfig()
			c.Endpoint = cfg.Endpoint
			return vcenter.Dial(ctx, c)
		}
		rep := Run(context.Background(), cfg, dial, Options{RunID: "unreachable"})
		t.Logf("report:\n%s", text(rep))
		require.Len(t, rep.Results, 1)
		assert.Equal(t, "session", rep.Results[0].Capability)
		assert.Equal(t, Fail, rep.Results[0].Status)
		assert.Contains(t, rep.Results[0].Fix, "vCenter did not answer")
	})
	t.Run("wrong credentials", func(t *testing.T) {
		const wrong = "wrong-Pa55word!"
		cfg := envConfig(env, false)
		cfg.Password = wrong
		dial := func(ctx context.Context) (*vcenter.Client, error) {
			c := env.ClientConfig()
			c.Password = wrong
			return vcenter.Dial(ctx, c)
		}
		rep := Run(context.Background(), cfg, dial, Options{RunID: "creds"})
		out := text(rep)
		t.Logf("report:\n%s", out)
		require.Len(t, rep.Results, 1)
		assert.Equal(t, Fail, rep.Results[0].Status)
		assert.Contains(t, rep.Results[0].Fix, "refused the user or password")
		assert.NotContains(t, out, wrong)
		assert.NotContains(t, out, vcsimtest.DefaultPassword)
		assert.Empty(t, scratchLeft(t, env))
	})
}

// failedLines are rep's results that fail it.
func failedLines(rep *Report) []Result {
	var out []Result
	for _, r := range rep.Results {
		if r.Failed() {
			out = append(out, r)
		}
	}
	return out
}

// killHandler is a log handler that ends a run's context when the run
// logs the capability it waits for, as a kill at that point would.
type killHandler struct {
	slog.Handler
	at     string
	cancel context.CancelFunc
}

func (h killHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h killHandler) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "capability" && a.Value.String() == h.at {
			h.cancel()
		}
		return true
	})
	return nil
}

// TestKilledRunLeftoversRemovedByTheNext: a run stopped right after its
// VM powered on (its context ended, as a kill) leaves its folder and a
// powered-on VM; the next run's clean-up removes them by their record
// and then passes every line.
func TestKilledRunLeftoversRemovedByTheNext(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	cfg := envConfig(env, false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	killed := Run(ctx, cfg, envDialer(env), Options{RunID: "killed", Logger: slog.New(killHandler{at: "power on", cancel: cancel})})
	t.Logf("killed run:\n%s", text(killed))
	require.True(t, killed.Failed())
	for _, r := range failedLines(killed) {
		assert.Contains(t, r.Fix, "the run was stopped", "%s: the fix says why, not a privilege", r.Capability)
	}
	st, ok := env.Inspect(FolderPrefix + "killed-0-" + vcsimtest.DefaultTemplate)
	require.True(t, ok, "the killed run left its clone")
	assert.Equal(t, "poweredOn", string(st.PowerState))
	require.Contains(t, scratchLeft(t, env), FolderPrefix+"killed")

	rep := Run(context.Background(), cfg, envDialer(env), Options{RunID: "next"})
	t.Logf("next run:\n%s", text(rep))
	first := lines(rep, "clean-up of earlier runs")
	require.Len(t, first, 1)
	assert.Equal(t, Pass, first[0].Status)
	assert.Contains(t, first[0].Detail, "removed 1 vm(s) and "+FolderPrefix+"killed")
	assert.False(t, rep.Failed())
	assert.Empty(t, scratchLeft(t, env))
}

// TestGuestRefusesTheAccount: a guest refusing the model's account
// (InvalidGuestLogin, through the spawn's own probe) fails "guest ready"
// with the fault and the account's fix at once, neither password shown.
func TestGuestRefusesTheAccount(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	const accepted = "the-guest-Accepts-this"
	env.Guest.SetCredentials(vcsimtest.DefaultGuestUser, accepted)
	rep := Run(context.Background(), envConfig(env, false), envDialer(env), Options{RunID: "login"})
	out := text(rep)
	t.Logf("report:\n%s", out)
	got := lines(rep, "guest ready")
	require.Len(t, got, 1)
	assert.Equal(t, Fail, got[0].Status)
	assert.Equal(t, "invalid guest login", got[0].Fault)
	assert.Contains(t, got[0].Fix, "guest account")
	assert.Empty(t, lines(rep, "guest program"))
	assert.NotContains(t, out, vcsimtest.DefaultGuestPassword)
	assert.NotContains(t, out, accepted)
	assert.Empty(t, scratchLeft(t, env))
}
