package vsphere

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/guest"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"
)

// planSnapshot is a configuration whose model entry and flavor name its
// snapshot: the guest account, the preStartScript, the OS and the size of
// flavor "small" (the default flavor) all differ between two snapshots.
func planSnapshot(account, os string, cpus int32) *config.Config {
	cfg := spConfig()
	cfg.Flavors = []config.Flavor{{Name: "small", CPUs: cpus, MemoryMB: int64(cpus) * 1024}}
	cfg.DefaultFlavor = "small"
	cfg.GuestCredentials = []config.GuestCredential{{
		ModelVMWare: "debian12", Username: account, Password: account + "-password",
		PreStartScript: "echo snapshot-" + account, OS: os,
	}}
	return cfg
}

// planSeen is what one spawn did on the port: the clone's specification
// and each guest program, with the account it ran under.
type planSeen struct {
	spec     *types.VirtualMachineCloneSpec
	accounts []string
	programs []vctypes.GuestProgram
}

// TestReloadMidSpawnKeepsTheJobsPlan: a job's spawn builds the plan its
// admission resolved from one configuration snapshot, whatever a reload
// swaps in while it runs. The configuration is replaced from inside the
// spawn's first template read (a port call made after the spawn began,
// before its clone specification, guest account and guest OS are used) by
// one where the model's entry names another account, preStartScript and OS
// (windows) and flavor "small" is twice the size. Every later step of that
// spawn uses the first snapshot (a Linux customization, 2 vCPUs, the first
// account, the Linux probe and launch with the first preStartScript); the
// next job, admitted after the reload, uses the new one throughout. A
// spawn without an admission (no reservation) resolves its plan once, at
// its start, and behaves the same. Before the plan, the spawn read the
// running configuration at each step and this spawn mixed the two: sysprep
// and PowerShell (the new OS) under the old account.
func TestReloadMidSpawnKeepsTheJobsPlan(t *testing.T) {
	t.Parallel()
	for _, admitted := range []bool{true, false} {
		t.Run(fmt.Sprintf("admitted=%v", admitted), func(t *testing.T) {
			t.Parallel()
			first, second := planSnapshot("alice", config.OSLinux, 2), planSnapshot("bob", config.OSWindows, 4)
			f := newSpFixture(t, first)
			f.inv.Add(inventory.VM{Name: "debian12", Template: true})
			tmpl := spRef("VirtualMachine", "vm-debian12")

			// The admission's pool reads and the clone specification's.
			f.vs.EXPECT().LoadResourcePool(gomock.Any()).Return(spPoolRef, nil).AnyTimes()
			roomy := &vctypes.PoolRuntime{MemoryUnreservedBytes: 1 << 40, CPUUnreservedMHz: 1 << 20}
			f.vs.EXPECT().ResourcePoolRuntime(gomock.Any(), spPoolRef).Return(roomy, nil).AnyTimes()
			f.vs.EXPECT().LoadVirtualMachine(gomock.Any(), "debian12").Return(tmpl, nil).AnyTimes()
			f.vs.EXPECT().LoadDatastore(gomock.Any(), "LocalDS_0").Return(spDSRef, nil).AnyTimes()
			f.vs.EXPECT().LoadFolder(gomock.Any()).Return(spFolderRef, nil).AnyTimes()
			// The reload: from inside the first spawn's template read
			// (the adapter keeps the read for the next: here each spawn
			// asks the mock).
			var reloaded sync.Once
			f.vs.EXPECT().LoadTemplate(gomock.Any(), tmpl).DoAndReturn(func(context.Context, vctypes.Ref) (vctypes.Template, error) {
				reloaded.Do(func() { f.h.Reconfigure(second) })
				return spTemplateMO(spDevices(1), nil), nil
			}).Times(2)

			var mu sync.Mutex
			seen := map[string]*planSeen{}
			vmOf := map[string]string{} // VM reference -> worker name
			f.vs.EXPECT().CloneVirtualMachine(gomock.Any(), spClone{tmpl: tmpl, folder: spFolderRef}).
				DoAndReturn(func(_ context.Context, req vctypes.Clone) (vctypes.Ref, error) {
					mu.Lock()
					defer mu.Unlock()
					seen[req.Name] = &planSeen{spec: spSpec(t, req, 1)}
					ref := spRef("VirtualMachine", "vm-"+req.Name)
					vmOf[ref.Value] = req.Name
					return ref, nil
				}).Times(2)
			f.vs.EXPECT().WaitForGuestOperationsReady(gomock.Any(), gomock.Any()).Return(nil).Times(2)
			f.vs.EXPECT().WaitForVirtualMachineIP(gomock.Any(), gomock.Any(), "").Return("10.0.0.5", nil).Times(2)
			f.vs.EXPECT().StartProgramInGuest(gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any()).
				DoAndReturn(func(_ context.Context, vm vctypes.Ref, auth *vctypes.GuestAuth, p vctypes.GuestProgram) (int64, error) {
					mu.Lock()
					defer mu.Unlock()
					s := seen[vmOf[vm.Value]]
					s.accounts = append(s.accounts, auth.Username)
					s.programs = append(s.programs, p)
					return 1, nil
				}).Times(4)
			f.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), gomock.Any(), gomock.Any()).Return(nil).Times(2)

			spawnJob := func(job string) {
				args := spV2Args()
				args.WorkerName, args.JobID = "worker-"+job, job
				if admitted {
					res, err := f.h.AllocateResources(context.Background(), args.Model, job, nil)
					require.NoError(t, err)
					require.NotNil(t, res)
					args.Reservation = res
				}
				require.NoError(t, f.h.SpawnWorker(context.Background(), args))
			}
			spawnJob("run-1")
			require.Same(t, second, f.h.conf(), "the reload happened during the first spawn")
			spawnJob("run-2")

			before, after := seen["worker-run-1"], seen["worker-run-2"]
			require.NotNil(t, before)
			require.NotNil(t, after)

			// The spawn the reload met: the first snapshot throughout.
			assert.IsType(t, &types.CustomizationLinuxPrep{}, before.spec.Customization.Identity, "linux customization, not sysprep")
			assert.EqualValues(t, 2, before.spec.Config.NumCPUs, "the first snapshot's flavor")
			assert.Equal(t, []string{"alice", "alice"}, before.accounts)
			require.Len(t, before.programs, 2)
			assert.Equal(t, guest.EnvProgram, before.programs[0].Path)
			assert.Equal(t, guest.LaunchProgram, before.programs[1].Path)
			assert.True(t, strings.Contains(before.programs[1].Args, "echo snapshot-alice"), "the first entry's preStartScript")

			// The next job: the new snapshot throughout.
			assert.IsType(t, &types.CustomizationSysprep{}, after.spec.Customization.Identity, "windows: sysprep")
			assert.EqualValues(t, 4, after.spec.Config.NumCPUs, "the new snapshot's flavor")
			assert.Equal(t, []string{"bob", "bob"}, after.accounts)
			require.Len(t, after.programs, 2)
			assert.Equal(t, guest.PowerShellProgram, after.programs[0].Path)
			assert.Equal(t, guest.PowerShellProgram, after.programs[1].Path)
			script, ok := spawnScriptOf(after.programs[1])
			require.True(t, ok, "the windows launch carries its script in its environment")
			assert.Contains(t, script, "echo snapshot-bob")
		})
	}
}

// spawnScriptOf is the worker script a Windows launch carries in its
// environment (guest.ScriptEnv, encoded by guest.EncodeScript).
func spawnScriptOf(p vctypes.GuestProgram) (string, bool) {
	for _, e := range p.Env {
		if v, ok := strings.CutPrefix(e, guest.ScriptEnv+"="); ok {
			s, err := guest.DecodeScript(v)
			return s, err == nil
		}
	}
	return "", false
}
