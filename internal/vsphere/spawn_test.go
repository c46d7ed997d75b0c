package vsphere

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/guest"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/ippool"
	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient/cdsclienttest"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// spAPI is the CDS client of the spawn tests: it records the model spawn
// errors, and any other call panics: the spawn path must not make it.
func spAPI() *cdsclienttest.Fake {
	return &cdsclienttest.Fake{Allow: []string{"WorkerModelSpawnError"}}
}

const spSecret = "s3cr3t-guest-password"

// spV2Args is a V2 spawn of job "run-1" on template debian12.
func spV2Args() spawn.Arguments {
	return spawn.Arguments{
		WorkerName: "worker-v2-1",
		JobID:      "run-1",
		Model: sdk.WorkerStarterWorkerModel{
			ModelV2:     &sdk.V2WorkerModel{Name: "my-model", Type: sdk.VSphere},
			VSphereSpec: sdk.V2WorkerModelVSphereSpec{Image: "debian12", Username: "admin", Password: spSecret},
			PreCmd:      "cd /tmp",
			Cmd:         "./worker --basedir={{.Basedir}}",
			PostCmd:     "sudo shutdown -h now",
		},
		HatcheryName: spHatchery,
		WorkerConfig: spawn.WorkerConfig{Name: "worker-v2-1", Basedir: "/var/lib/cds", HatcheryName: spHatchery, APIEndpoint: "http://api", APIToken: "jwt-token", RunJobID: "run-1", Model: "my-model"},
	}
}

func spIPConfig() *config.Config {
	cfg := spConfig()
	cfg.IPRange, cfg.Gateway, cfg.SubnetMask, cfg.DNS = "10.0.0.10/29", "10.0.0.1", "255.255.255.0", "10.0.0.2"
	return cfg
}

var spNewRef = spRef("VirtualMachine", "vm-new")

// expectClone sets the calls of a successful (or failing) fresh clone.
func (f *spFixture) expectClone(template, name string, cloneErr error) vctypes.Ref {
	tmpl := spRef("VirtualMachine", "vm-"+template)
	f.vs.EXPECT().LoadVirtualMachine(gomock.Any(), template).Return(tmpl, nil)
	f.expectCloneSpecCalls(tmpl, 1)
	f.vs.EXPECT().LoadFolder(gomock.Any()).Return(spFolderRef, nil)
	if cloneErr != nil {
		f.vs.EXPECT().CloneVirtualMachine(gomock.Any(), vcenter.MORef(tmpl), gomock.Any(), name, gomock.Any()).Return(nil, cloneErr)
		return vctypes.Ref{}
	}
	ref := spNewRef
	f.vs.EXPECT().CloneVirtualMachine(gomock.Any(), vcenter.MORef(tmpl), gomock.Any(), name, gomock.Any()).Return(spMOPtr(ref), nil)
	vm := spNewRef
	return vm
}

type spProgMatcher struct{ path string }

func (m spProgMatcher) Matches(x any) bool {
	s, ok := x.(vctypes.GuestProgram)
	return ok && s.Path == m.path
}
func (m spProgMatcher) String() string { return "program " + m.path }

func TestSpawnWorkerV2Success(t *testing.T) {
	t.Parallel()
	f := newSpFixture(t, spIPConfig())
	f.inv.Add(inventory.VM{Name: "debian12", Template: true})
	args := spV2Args()
	vm := f.expectClone("debian12", args.WorkerName, nil)

	var launched *vctypes.GuestProgram
	var written types.VirtualMachineConfigSpec
	auth := &vctypes.GuestAuth{Username: "admin", Password: spSecret}
	gomock.InOrder(
		f.vs.EXPECT().WaitForGuestOperationsReady(gomock.Any(), vm).Return(nil),
		f.vs.EXPECT().WaitForVirtualMachineIP(gomock.Any(), vm, "10.0.0.10").Return("10.0.0.10", nil),
		f.vs.EXPECT().StartProgramInGuest(gomock.Any(), vm, auth, spProgMatcher{guest.EnvProgram}).Return(int64(1), nil),
		f.vs.EXPECT().StartProgramInGuest(gomock.Any(), vm, auth, spProgMatcher{guest.LaunchProgram}).
			DoAndReturn(func(_ context.Context, _ vctypes.Ref, _ *vctypes.GuestAuth, s vctypes.GuestProgram) (int64, error) {
				launched = &s
				return 2, nil
			}),
		f.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), vcenter.MORef(vm), gomock.Any()).
			DoAndReturn(func(_ context.Context, _ types.ManagedObjectReference, s types.VirtualMachineConfigSpec) error {
				written = s
				return nil
			}),
	)

	require.NoError(t, f.h.SpawnWorker(context.Background(), args))

	require.NotNil(t, launched)
	assert.Equal(t, "-n ;cd /tmp\n./worker --basedir=/var/lib/cds\nsudo shutdown -h now", launched.Args)
	require.Len(t, launched.Env, 1)
	env, ok := strings.CutPrefix(launched.Env[0], "CDS_CONFIG=")
	require.True(t, ok)
	got, err := spawn.DecodeWorkerConfig(env)
	require.NoError(t, err)
	assert.Equal(t, args.WorkerConfig, got)

	annot, err := inventory.AnnotationFromVM(written.Annotation, vcenter.OptionsOf(written.ExtraConfig))
	require.NoError(t, err)
	require.NotNil(t, annot.WorkerStarted, "worker start recorded")
	assert.Equal(t, f.clock.Now(), *annot.WorkerStarted)
	assert.Equal(t, "run-1", annot.JobID)
	assert.Equal(t, "debian12", annot.VMwareModelPath)
	assert.Equal(t, "10.0.0.10", annot.IPAddress)
	assert.Equal(t, spHatchery, annot.HatcheryName)
	assert.False(t, f.h.life.SpawnInFlight("run-1"), "job no longer pending")
	assert.Zero(t, len(markedNames(f.h)))
	assert.NotContains(t, written.Annotation, spSecret)
	assert.NotContains(t, written.Annotation, "jwt-token")
}

func TestSpawnWorkerFailures(t *testing.T) {
	t.Parallel()
	// Classified, as the port's errors are (vcenter.Classify).
	loginFault := vcenter.Classify(soap.WrapVimFault(&types.InvalidGuestLogin{}))
	tests := []struct {
		name     string
		args     func(*spawn.Arguments)
		setup    func(f *spFixture, vm vctypes.Ref)
		cloneErr error
		noVM     bool // the failure happens before any vCenter write
		wantStep string
		wantIs   error
		powerOff bool
		noMark   bool // the name belongs to a vm that is not ours
		keepIP   bool // vcenter may still create the vm holding the ip
		// reason is spawns_failed's (metrics.SpawnFailureReasonOf).
		reason metrics.SpawnFailureReason
	}{
		{
			name:     "clone fails with a fault",
			reason:   metrics.SpawnFailureClone,
			cloneErr: soap.WrapVimFault(&types.InsufficientResourcesFault{}),
			wantStep: "create vm",
		},
		{
			name:     "clone outcome unknown: ip kept",
			reason:   metrics.SpawnFailureClone,
			cloneErr: fmt.Errorf("wait for task task-1: %w", context.DeadlineExceeded),
			wantStep: "create vm",
			keepIP:   true,
		},
		{
			name:     "clone refused: name taken meanwhile",
			reason:   metrics.SpawnFailureClone,
			cloneErr: soap.WrapVimFault(&types.DuplicateName{Name: "worker-v2-1"}),
			wantStep: "create vm",
			noMark:   true,
		},
		{
			name:   "guest operations never ready",
			reason: metrics.SpawnFailureGuestNotReady,
			setup: func(f *spFixture, vm vctypes.Ref) {
				f.vs.EXPECT().WaitForGuestOperationsReady(gomock.Any(), vm).Return(context.DeadlineExceeded)
			},
			wantStep: "wait for guest operations ready", wantIs: context.DeadlineExceeded, powerOff: true,
		},
		{
			name:   "ip timeout",
			reason: metrics.SpawnFailureGuestNotReady,
			setup: func(f *spFixture, vm vctypes.Ref) {
				f.vs.EXPECT().WaitForGuestOperationsReady(gomock.Any(), vm).Return(nil)
				f.vs.EXPECT().WaitForVirtualMachineIP(gomock.Any(), vm, "10.0.0.10").Return("", context.DeadlineExceeded)
			},
			wantStep: "wait for ip", wantIs: context.DeadlineExceeded, powerOff: true,
		},
		{
			name:   "guest reports another ip",
			reason: metrics.SpawnFailureGuestNotReady,
			setup: func(f *spFixture, vm vctypes.Ref) {
				f.vs.EXPECT().WaitForGuestOperationsReady(gomock.Any(), vm).Return(nil)
				f.vs.EXPECT().WaitForVirtualMachineIP(gomock.Any(), vm, "10.0.0.10").Return("172.17.0.1", nil)
			},
			wantStep: "wait for ip", powerOff: true,
		},
		{
			name:   "bad credentials refused by env",
			reason: metrics.SpawnFailureGuestNotReady,
			setup: func(f *spFixture, vm vctypes.Ref) {
				f.vs.EXPECT().WaitForGuestOperationsReady(gomock.Any(), vm).Return(nil)
				f.vs.EXPECT().WaitForVirtualMachineIP(gomock.Any(), vm, "10.0.0.10").Return("10.0.0.10", nil)
				f.vs.EXPECT().StartProgramInGuest(gomock.Any(), vm, gomock.Any(), spProgMatcher{guest.EnvProgram}).Return(int64(0), loginFault)
			},
			wantStep: "run env in guest", wantIs: guest.ErrLogin, powerOff: true,
		},
		{
			name:   "bad credentials refused at launch",
			reason: metrics.SpawnFailureLaunch,
			setup: func(f *spFixture, vm vctypes.Ref) {
				f.vs.EXPECT().WaitForGuestOperationsReady(gomock.Any(), vm).Return(nil)
				f.vs.EXPECT().WaitForVirtualMachineIP(gomock.Any(), vm, "10.0.0.10").Return("10.0.0.10", nil)
				f.vs.EXPECT().StartProgramInGuest(gomock.Any(), vm, gomock.Any(), spProgMatcher{guest.EnvProgram}).Return(int64(1), nil)
				f.vs.EXPECT().StartProgramInGuest(gomock.Any(), vm, gomock.Any(), spProgMatcher{guest.LaunchProgram}).Return(int64(0), loginFault)
			},
			wantStep: "launch worker", wantIs: guest.ErrLogin, powerOff: true,
		},
		{
			name:     "no guest credentials",
			reason:   metrics.SpawnFailureOther,
			args:     func(a *spawn.Arguments) { a.Model.VSphereSpec.Username, a.Model.VSphereSpec.Password = "", "" },
			noVM:     true,
			wantStep: "resolve guest credentials",
		},
		{
			name:     "image is not a template",
			reason:   metrics.SpawnFailureOther,
			args:     func(a *spawn.Arguments) { a.Model.VSphereSpec.Image = "ubuntu24" },
			noVM:     true,
			wantStep: `resolve template: template "ubuntu24" of model "my-model" not found`,
		},
		{
			name:     "bad script template",
			reason:   metrics.SpawnFailureOther,
			args:     func(a *spawn.Arguments) { a.Model.Cmd = "./worker {{.Nope}}" },
			noVM:     true,
			wantStep: "build worker script",
		},
		{
			name:     "unknown flavor",
			args:     func(a *spawn.Arguments) { a.Model.JobFlavor = "huge" },
			noVM:     true,
			wantStep: `resolve flavor: flavor "huge" is not defined`,
			reason:   metrics.SpawnFailureFlavor,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newSpFixture(t, spIPConfig())
			f.inv.Add(inventory.VM{Name: "debian12", Template: true})
			args := spV2Args()
			if tt.args != nil {
				tt.args(&args)
			}
			if !tt.noVM {
				vm := f.expectClone("debian12", args.WorkerName, tt.cloneErr)
				if tt.setup != nil {
					tt.setup(f, vm)
				}
				if tt.powerOff {
					f.vs.EXPECT().ShutdownVirtualMachine(gomock.Any(), vm).Return(nil)
				}
			}

			err := f.h.SpawnWorker(context.Background(), args)

			require.Error(t, err)
			msg := err.Error()
			assert.Contains(t, msg, `spawn worker "worker-v2-1" for job "run-1": `+tt.wantStep)
			assert.Equal(t, tt.reason, metrics.SpawnFailureReasonOf(err), "the spawns_failed reason")
			if tt.wantIs != nil {
				assert.ErrorIs(t, err, tt.wantIs)
			}
			assert.NotContains(t, msg, spSecret)
			assert.NotContains(t, msg, "jwt-token")
			assert.Equal(t, !tt.noVM && !tt.noMark, isMarked(f.h, args.WorkerName), "vm marked for deletion iff one was created")
			used, _ := f.h.ips.Counts(nil)
			if tt.keepIP {
				assert.Equal(t, 1, used, "ip reservation kept")
			} else {
				assert.Zero(t, used, "ip reservation released")
			}
			assert.False(t, f.h.life.SpawnInFlight(args.JobID))
		})
	}
}

// TestWaitGuestEnvRetries runs sequentially: it shortens the package's
// readiness timeouts, which parallel tests only start reading after it.
func TestWaitGuestEnvRetries(t *testing.T) {
	saved := guest.Readiness
	t.Cleanup(func() { guest.Readiness = saved })
	guest.Readiness.EnvRetry = time.Millisecond
	guest.Readiness.Env = 10 * time.Second

	f := newSpFixture(t, spConfig())
	vm := spNewRef
	notReady := soap.WrapVimFault(&types.GuestOperationsUnavailable{})
	gomock.InOrder(
		f.vs.EXPECT().StartProgramInGuest(gomock.Any(), vm, gomock.Any(), spProgMatcher{guest.EnvProgram}).Return(int64(0), notReady),
		f.vs.EXPECT().StartProgramInGuest(gomock.Any(), vm, gomock.Any(), spProgMatcher{guest.EnvProgram}).Return(int64(0), notReady),
		f.vs.EXPECT().StartProgramInGuest(gomock.Any(), vm, gomock.Any(), spProgMatcher{guest.EnvProgram}).Return(int64(7), nil),
	)
	require.NoError(t, f.h.guest().WaitEnv(context.Background(), vm, guest.Access{Auth: &vctypes.GuestAuth{Username: "u"}}))

	// A context that ends stops the retries with its error.
	ctx, cancel := context.WithCancel(context.Background())
	f.vs.EXPECT().StartProgramInGuest(gomock.Any(), vm, gomock.Any(), spProgMatcher{guest.EnvProgram}).
		DoAndReturn(func(context.Context, vctypes.Ref, *vctypes.GuestAuth, vctypes.GuestProgram) (int64, error) {
			cancel()
			return 0, notReady
		})
	err := f.h.guest().WaitEnv(ctx, vm, guest.Access{Auth: &vctypes.GuestAuth{Username: "u"}})
	require.ErrorIs(t, err, context.Canceled)
}

func TestSpawnWorkerNeverTouchesForeignVMs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		foreign inventory.VM
	}{
		{name: "unannotated vm with the worker's name", foreign: inventory.VM{Ref: spRef("VirtualMachine", "vm-f1"), Name: "worker-v2-1", PowerState: vctypes.PoweredOn}},
		{name: "other hatchery's vm with the worker's name", foreign: inventory.VM{Ref: spRef("VirtualMachine", "vm-f2"), Name: "worker-v2-1", Annotation: &inventory.Annotation{HatcheryName: "other"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newSpFixture(t, spIPConfig())
			f.inv.Add(inventory.VM{Name: "debian12", Template: true})
			f.inv.Add(tt.foreign)
			// Strict mock: no expectation, so any rename, reconfigure,
			// power or destroy call fails the test.
			err := f.h.SpawnWorker(context.Background(), spV2Args())
			require.Error(t, err)
			assert.Contains(t, err.Error(), "already exists")
			assert.False(t, isMarked(f.h, tt.foreign.Name))
		})
	}
}

func TestSpawnWorkerRefusesAJobAlreadyBeingSpawned(t *testing.T) {
	t.Parallel()
	f := newSpFixture(t, spIPConfig())
	f.h.life.BeginSpawn("run-1")
	err := f.h.SpawnWorker(context.Background(), spV2Args())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "already being spawned")
	assert.True(t, f.h.life.SpawnInFlight("run-1"), "the other spawn's entry is kept")
}

func TestSpawnWorkerV1UsesOurModelTemplate(t *testing.T) {
	t.Parallel()
	f := newSpFixture(t, spConfig())
	f.inv.Set([]inventory.VM{
		{Name: "mymodel", Template: true, Annotation: &inventory.Annotation{HatcheryName: spHatchery, Model: true, WorkerModelLastModified: "1700000000"}},
	}...)
	args := spawn.Arguments{WorkerName: "worker-v1-1", JobID: "12", Model: spV1Model(), WorkerConfig: spawn.WorkerConfig{Name: "worker-v1-1", BookedJobID: 12}}
	vm := f.expectClone("mymodel", "worker-v1-1", nil)
	var written types.VirtualMachineConfigSpec
	f.vs.EXPECT().WaitForGuestOperationsReady(gomock.Any(), vm).Return(nil)
	f.vs.EXPECT().WaitForVirtualMachineIP(gomock.Any(), vm, "").Return("192.168.0.9", nil)
	f.vs.EXPECT().StartProgramInGuest(gomock.Any(), vm, &vctypes.GuestAuth{Username: "root", Password: spSecret}, gomock.Any()).Return(int64(1), nil).Times(2)
	f.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), vcenter.MORef(vm), gomock.Any()).
		DoAndReturn(func(_ context.Context, _ types.ManagedObjectReference, s types.VirtualMachineConfigSpec) error {
			written = s
			return nil
		})

	require.NoError(t, f.h.SpawnWorker(context.Background(), args))
	a, err := inventory.AnnotationFromVM(written.Annotation, nil)
	require.NoError(t, err)
	assert.Equal(t, "shared.infra/mymodel", a.WorkerModelPath)
	assert.Equal(t, "12", a.JobID)
	assert.False(t, a.Model)

	// Without our template the V1 job fails before any vCenter call.
	f2 := newSpFixture(t, spConfig())
	f2.inv.Set([]inventory.VM{{Name: "mymodel", Template: true, Annotation: &inventory.Annotation{HatcheryName: "other", Model: true}}}...)
	err = f2.h.SpawnWorker(context.Background(), args)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "resolve template")
}

// TestSpawnWorkerWithoutAFreeAddressIsARefusal: CanSpawn saw a free
// address, but every one is held when the clone reserves it (a concurrent
// spawn, a refill, the other instance's locks): the spawn returns a
// refusal with the ip reason (the framework releases the job, its attempt
// uncounted), clones nothing and marks nothing.
func TestSpawnWorkerWithoutAFreeAddressIsARefusal(t *testing.T) {
	t.Parallel()
	f := newSpFixture(t, spIPConfig())
	f.inv.Add(inventory.VM{Name: "debian12", Template: true})
	for i := range 32 {
		f.inv.Add(inventory.VM{Name: fmt.Sprintf("other-%d", i), IPAddresses: []string{fmt.Sprintf("10.0.0.%d", i)}})
	}
	args := spV2Args()

	err := f.h.SpawnWorker(context.Background(), args)

	var r *refusal.Refusal
	require.ErrorAs(t, err, &r)
	assert.Equal(t, refusal.ReasonIP, r.Reason)
	assert.ErrorIs(t, err, ippool.ErrNoIPAvailable)
	assert.False(t, isMarked(f.h, args.WorkerName), "nothing was cloned")
	assert.False(t, f.h.life.SpawnInFlight(args.JobID))
}
