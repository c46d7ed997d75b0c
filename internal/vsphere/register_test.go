package vsphere

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/guest"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"
)

func spRegisterArgs() spawn.Arguments {
	return spawn.Arguments{
		WorkerName:   "register-mymodel-1",
		Model:        spV1Model(),
		RegisterOnly: true,
		HatcheryName: spHatchery,
		WorkerConfig: spawn.WorkerConfig{Name: "register-mymodel-1", HatcheryName: spHatchery, APIToken: "jwt-token", Model: "shared.infra/mymodel"},
	}
}

// expectRegisterWorker sets the readiness and launch calls of the tmp VM.
func (f *spFixture) expectRegisterWorker(vm vctypes.Ref, launched *string) {
	f.vs.EXPECT().WaitForGuestOperationsReady(gomock.Any(), vm).Return(nil)
	f.vs.EXPECT().WaitForVirtualMachineIP(gomock.Any(), vm, "").Return("192.168.0.4", nil)
	f.vs.EXPECT().StartProgramInGuest(gomock.Any(), vm, gomock.Any(), spProgMatcher{guest.EnvProgram}).Return(int64(1), nil)
	f.vs.EXPECT().StartProgramInGuest(gomock.Any(), vm, gomock.Any(), spProgMatcher{guest.LaunchProgram}).
		DoAndReturn(func(_ context.Context, _ vctypes.Ref, _ *vctypes.GuestAuth, s vctypes.GuestProgram) (int64, error) {
			*launched = s.Args
			return 2, nil
		})
	f.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), vcenter.MORef(vm), gomock.Any()).Return(nil) // worker start
}

func TestRegisterModelReplacesOurTemplate(t *testing.T) {
	t.Parallel()
	f := newSpFixture(t, spConfig())
	cds := spAPI()
	f.h.cds = cds
	f.h.pool.CDS = f.h.cds
	oldRef := spRef("VirtualMachine", "vm-old")
	f.inv.Set([]inventory.VM{
		{Name: "debian12-base", Template: true},
		{Ref: oldRef, Name: "mymodel", Template: true, Annotation: &inventory.Annotation{HatcheryName: spHatchery, Model: true, WorkerModelLastModified: "1600000000"}},
	}...)
	vm := f.expectClone("debian12-base", "mymodel-tmp", nil)
	var launched string
	f.expectRegisterWorker(vm, &launched)
	oldVM := oldRef
	var final types.VirtualMachineConfigSpec
	gomock.InOrder(
		f.vs.EXPECT().WaitForVirtualMachineShutdown(gomock.Any(), vm).Return(nil),
		f.vs.EXPECT().DestroyVirtualMachine(gomock.Any(), oldVM).Return(nil),
		f.vs.EXPECT().RenameVirtualMachine(gomock.Any(), vm, "mymodel").Return(nil),
		f.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), vcenter.MORef(vm), gomock.Any()).
			DoAndReturn(func(_ context.Context, _ types.ManagedObjectReference, s types.VirtualMachineConfigSpec) error {
				final = s
				return nil
			}),
		f.vs.EXPECT().MarkVirtualMachineAsTemplate(gomock.Any(), vm).Return(nil),
	)

	require.NoError(t, f.h.SpawnWorker(context.Background(), spRegisterArgs()))

	assert.Equal(t, "-n ;./worker register\nsudo shutdown -h now", launched)
	a, err := inventory.AnnotationFromVM(final.Annotation, vcenter.OptionsOf(final.ExtraConfig))
	require.NoError(t, err)
	assert.True(t, a.Model)
	assert.False(t, a.RegisterOnly)
	assert.Equal(t, "1700000000", a.WorkerModelLastModified)
	assert.Equal(t, "shared.infra/mymodel", a.WorkerModelPath)
	assert.Empty(t, a.IPAddress)
	assert.Nil(t, a.WorkerStarted)
	assert.Empty(t, cds.SpawnErrors())
	assert.Zero(t, len(markedNames(f.h)))
	assert.False(t, f.h.life.SpawnInFlight("register-mymodel"))
}

func TestRegisterModelFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		vms      []inventory.VM
		setup    func(f *spFixture, vm vctypes.Ref)
		wantStep string
	}{
		{
			name: "no shutdown",
			setup: func(f *spFixture, vm vctypes.Ref) {
				f.vs.EXPECT().WaitForVirtualMachineShutdown(gomock.Any(), vm).Return(context.DeadlineExceeded)
			},
			wantStep: "wait for shutdown",
		},
		{
			name: "foreign template with the model's name is left alone",
			vms:  []inventory.VM{{Ref: spRef("VirtualMachine", "vm-foreign"), Name: "mymodel", Template: true, Annotation: &inventory.Annotation{HatcheryName: "other", Model: true}}},
			setup: func(f *spFixture, vm vctypes.Ref) {
				f.vs.EXPECT().WaitForVirtualMachineShutdown(gomock.Any(), vm).Return(nil)
			},
			wantStep: "replace template",
		},
		{
			name: "unannotated template with the model's name is left alone",
			vms:  []inventory.VM{{Ref: spRef("VirtualMachine", "vm-foreign"), Name: "mymodel", Template: true}},
			setup: func(f *spFixture, vm vctypes.Ref) {
				f.vs.EXPECT().WaitForVirtualMachineShutdown(gomock.Any(), vm).Return(nil)
			},
			wantStep: "replace template",
		},
		{
			name: "rename fails",
			setup: func(f *spFixture, vm vctypes.Ref) {
				f.vs.EXPECT().WaitForVirtualMachineShutdown(gomock.Any(), vm).Return(nil)
				f.vs.EXPECT().RenameVirtualMachine(gomock.Any(), vm, "mymodel").Return(errors.New("rename task failed"))
			},
			wantStep: "rename",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newSpFixture(t, spConfig())
			cds := spAPI()
			f.h.cds = cds
			f.h.pool.CDS = f.h.cds
			f.inv.Set(append([]inventory.VM{{Name: "debian12-base", Template: true}}, tt.vms...)...)
			vm := f.expectClone("debian12-base", "mymodel-tmp", nil)
			var launched string
			f.expectRegisterWorker(vm, &launched)
			tt.setup(f, vm)
			f.vs.EXPECT().ShutdownVirtualMachine(gomock.Any(), vm).Return(nil)

			err := f.h.SpawnWorker(context.Background(), spRegisterArgs())

			require.Error(t, err)
			assert.Contains(t, err.Error(), `register model "shared.infra/mymodel" in vm "mymodel-tmp": `+tt.wantStep)
			assert.True(t, isMarked(f.h, "mymodel-tmp"))
			assert.False(t, isMarked(f.h, "mymodel"), "the other template is never marked")
			// The framework reports the returned error on the model, once:
			// the hatchery does not report it too.
			assert.Empty(t, cds.SpawnErrors())
			assert.NotContains(t, err.Error(), spSecret)
		})
	}
}

func TestRegisterModelForeignTmpNameIsNotTouched(t *testing.T) {
	t.Parallel()
	f := newSpFixture(t, spConfig())
	cds := spAPI()
	f.h.cds = cds
	f.h.pool.CDS = f.h.cds
	f.inv.Set([]inventory.VM{{Name: "debian12-base", Template: true}, {Name: "mymodel-tmp", PowerState: vctypes.PoweredOn}}...)
	err := f.h.SpawnWorker(context.Background(), spRegisterArgs())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "check name")
	assert.False(t, isMarked(f.h, "mymodel-tmp"))
	assert.Empty(t, cds.SpawnErrors(), "the framework reports it, once")
}

func TestWorkerScript(t *testing.T) {
	t.Parallel()
	args := spV2Args()
	tests := []struct {
		name     string
		pre      string
		register bool
		want     string
	}{
		{name: "pre cmd post", want: "cd /tmp\n./worker --basedir=/var/lib/cds\nsudo shutdown -h now"},
		{name: "prestart first", pre: "echo {{.Name}}", want: "echo worker-v2-1\ncd /tmp\n./worker --basedir=/var/lib/cds\nsudo shutdown -h now"},
		{name: "register", register: true, want: "cd /tmp\n./worker --basedir=/var/lib/cds register\nsudo shutdown -h now"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := args
			a.RegisterOnly = tt.register
			got, err := guest.Script(a, tt.pre, time.Hour)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// A model whose command does not render is refused before any clone, with
// an error naming the model and the field, marked as the model commands'
// fault (the framework then reports it once and does not try that version
// again); a model written with the API's {{.API}} renders.
func TestRegisterModelCommandThatDoesNotRender(t *testing.T) {
	t.Parallel()
	f := newSpFixture(t, spConfig())
	cds := spAPI()
	f.h.cds = cds
	f.h.pool.CDS = f.h.cds
	f.inv.Set(inventory.VM{Name: "debian12-base", Template: true})
	args := spRegisterArgs()
	m := *args.Model.ModelV1
	m.ModelVirtualMachine.Cmd = "./worker --hatchery={{.Hatchery}}"
	args.Model.ModelV1 = &m

	err := f.h.SpawnWorker(context.Background(), args) // no clone expected: the mock fails on one

	require.Error(t, err)
	var mce *spawn.ModelCommandError
	assert.True(t, errors.As(err, &mce), "%v", err)
	assert.Contains(t, err.Error(), `register model "shared.infra/mymodel" in vm "mymodel-tmp": build register script: worker script of model "shared.infra/mymodel": model commands do not render: `)
	assert.Contains(t, err.Error(), "can't evaluate field Hatchery")
	assert.Empty(t, cds.SpawnErrors(), "the framework reports it")

	m.ModelVirtualMachine.Cmd = "curl {{.API}}/download/worker/linux/$(uname -m) -o worker && chmod +x worker && ./worker"
	args.WorkerConfig.APIEndpoint = "https://cds.example"
	script, err := guest.Script(args, "", time.Hour)
	require.NoError(t, err)
	assert.Equal(t, "curl https://cds.example/download/worker/linux/$(uname -m) -o worker && chmod +x worker && ./worker register\nsudo shutdown -h now", script)
}
