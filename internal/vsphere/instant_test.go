package vsphere

import (
	"context"
	"testing"
	"time"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/task"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/admission"
	"github.com/cds-contrib/hatchery-vsphere/internal/cloudinit"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/instantparent"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/modelref"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

var (
	instParentRef = spRef("VirtualMachine", "vm-parent")
	instKey       = instantparent.Key{Template: "debian12", Placement: config.DefaultPlacementName}
)

// newInstantFixture is the cloud-init fixture whose model debian12 is
// instant, with its parent (10.0.0.10) in the inventory; ready installs
// it as the ready parent.
func newInstantFixture(t *testing.T, ready bool) *spFixture {
	t.Helper()
	cfg := spIPConfig()
	cfg.DefaultBootstrap = config.BootstrapCloudInit
	cfg.GuestCredentials = []config.GuestCredential{{ModelVMWare: "debian12", CloneMode: config.CloneModeInstant}}
	f := newSpFixture(t, cfg)
	parent := instParentVM(f, vctypes.PoweredOn)
	f.inv.Add(inventory.VM{Name: "debian12", Template: true, Ref: spRef("VirtualMachine", "vm-debian12"), ChangeVersion: "cv1", NumCPU: 2, MemoryMB: 2048}, parent)
	if ready {
		ps, _ := f.h.parentsOf([]inventory.VM{parent})
		f.h.parents.Apply(instantparent.Plan{Ready: map[instantparent.Key]instantparent.Parent{instKey: ps[0]}})
	}
	return f
}

func instParentVM(f *spFixture, power vctypes.PowerState) inventory.VM {
	return inventory.VM{
		Ref: instParentRef, Name: "hatch-test-parent-debian12-default-1", PowerState: power, IPAddresses: []string{"10.0.0.10"},
		NumCPU: 2, MemoryMB: 2048,
		Annotation: &inventory.Annotation{
			HatcheryName: spHatchery, WorkerName: "hatch-test-parent-debian12-default-1", InstantParent: true,
			ParentTemplate: instantparent.TemplateVersion("debian12", "debian12", "vm-debian12", "cv1"),
			Placement:      config.DefaultPlacementName, Created: f.clock.Now().Add(-time.Hour), IPAddress: "10.0.0.10",
		},
	}
}

// childIdentity decodes the child's record (mirror) and cloud-init
// metadata and userdata from its instant clone specification.
func childIdentity(t *testing.T, spec types.VirtualMachineInstantCloneSpec) (*inventory.Annotation, cloudinit.Metadata, cloudinit.Userdata) {
	t.Helper()
	v := optionValues(spec.Config)
	rec, err := inventory.ParseAnnotation(v[inventory.AnnotationMirrorKey])
	require.NoError(t, err)
	mdRaw, err := cloudinit.DecodeGuestinfo(v[cloudinit.GuestinfoMetadata], v[cloudinit.GuestinfoMetadataEncoding])
	require.NoError(t, err)
	md, err := cloudinit.ParseMetadata(mdRaw)
	require.NoError(t, err)
	udRaw, err := cloudinit.DecodeGuestinfo(v[cloudinit.GuestinfoUserdata], v[cloudinit.GuestinfoUserdataEncoding])
	require.NoError(t, err)
	ud, err := cloudinit.ParseCloudConfig(udRaw)
	require.NoError(t, err)
	return rec, md, ud
}

// TestInstantSpawnForksFromReadyParent: a job of an instant model is an
// instant clone of its ready parent (no clone from the template): the
// child's own record (its name, its job, an address of its own, not the
// parent's), its own hostname and static network and its worker config in
// the guestinfo keys internal/cloudinit builds; readiness is its own IP.
func TestInstantSpawnForksFromReadyParent(t *testing.T) {
	t.Parallel()
	f := newInstantFixture(t, true)
	args := spCloudInitArgs()
	child := spNewRef
	var spec types.VirtualMachineInstantCloneSpec
	f.vs.EXPECT().LoadFolder(gomock.Any()).Return(spFolderRef, nil)
	f.vs.EXPECT().InstantCloneVirtualMachine(gomock.Any(), instParentRef, gomock.Any()).
		DoAndReturn(func(_ context.Context, _ vctypes.Ref, r vctypes.InstantClone) (vctypes.Ref, error) {
			spec = vim.InstantCloneSpecOf(r) // as the adapter sends it
			return child, nil
		})
	gomock.InOrder(
		f.vs.EXPECT().WaitForVirtualMachineIP(gomock.Any(), child, "10.0.0.11").Return("10.0.0.11", nil),
		f.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), child, gomock.Any()).Return(nil),
	)
	require.NoError(t, f.h.SpawnWorker(context.Background(), args))

	assert.Equal(t, args.WorkerName, spec.Name)
	require.NotNil(t, spec.Location.Folder)
	assert.Equal(t, vim.MORef(spFolderRef), *spec.Location.Folder, "the hatchery's folder, not the datacenter's root")
	rec, md, ud := childIdentity(t, spec)
	assert.Equal(t, args.WorkerName, rec.WorkerName)
	assert.Equal(t, args.JobID, rec.JobID)
	assert.False(t, rec.InstantParent, "the child's record is its own")
	assert.Equal(t, "10.0.0.11", rec.IPAddress, "an address of its own, not the parent's 10.0.0.10")
	assert.Equal(t, args.WorkerName, md.LocalHostname)
	require.NotNil(t, md.Network)
	assert.Equal(t, []string{"10.0.0.11/24"}, md.Network.Ethernets["nic0"].Addresses)
	require.NotEmpty(t, ud.WriteFiles)
	assert.Equal(t, cloudinit.ConfigPath, ud.WriteFiles[0].Path)
	assert.Equal(t, args.WorkerConfig.EncodeBase64(), ud.WriteFiles[0].Content, "the child's own worker config")
	assert.Contains(t, f.h.custody.Userdata(), args.WorkerName, "its userdata is scrubbed once the worker registers")
}

// TestInstantSpawnFallsBackWithoutParent: no ready parent, the job is a
// linked/full clone in the same spawn; a flavor of another size than the
// parent's asks for a parent of that flavor (demand) and is cloned.
func TestInstantSpawnFallsBackWithoutParent(t *testing.T) {
	t.Parallel()
	f := newInstantFixture(t, false)
	args := spCloudInitArgs()
	vm := instExpectClone(f, args.WorkerName)
	f.vs.EXPECT().WaitForVirtualMachineIP(gomock.Any(), vm, "10.0.0.11").Return("10.0.0.11", nil)
	f.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), vm, gomock.Any()).Return(nil)
	require.NoError(t, f.h.SpawnWorker(context.Background(), args))

	// A parent of the template's size serves no flavor of another size.
	g := newInstantFixture(t, true)
	large := &config.Flavor{Name: "large", CPUs: 8, MemoryMB: 16384}
	key, _, ok := g.h.instantParentFor(modelref.Template{Name: "debian12"}, "", large)
	assert.False(t, ok)
	assert.Equal(t, "large", key.Flavor)
	same := &config.Flavor{Name: "small", CPUs: 2, MemoryMB: 2048}
	key, p, ok := g.h.instantParentFor(modelref.Template{Name: "debian12"}, "", same)
	assert.True(t, ok, "a flavor of the parent's size forks from it")
	assert.Equal(t, instKey, key)
	assert.Equal(t, instParentRef.Value, p.Ref.Value)
}

// TestInstantSpawnForkFaultFallsBack: the fork fails with a vCenter
// fault (the parent powered off under the spawn): the parent is marked
// failed, serves no later child, and the job is a fresh clone.
func TestInstantSpawnForkFaultFallsBack(t *testing.T) {
	t.Parallel()
	f := newInstantFixture(t, true)
	args := spCloudInitArgs()
	fault := task.Error{LocalizedMethodFault: &types.LocalizedMethodFault{Fault: &types.InvalidPowerState{}, LocalizedMessage: "powered off"}}
	f.vs.EXPECT().LoadFolder(gomock.Any()).Return(spFolderRef, nil)
	f.vs.EXPECT().InstantCloneVirtualMachine(gomock.Any(), instParentRef, gomock.Any()).Return(vctypes.Ref{}, fault)
	vm := instExpectClone(f, args.WorkerName)
	f.vs.EXPECT().WaitForVirtualMachineIP(gomock.Any(), vm, "10.0.0.11").Return("10.0.0.11", nil)
	f.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), vm, gomock.Any()).Return(nil)
	require.NoError(t, f.h.SpawnWorker(context.Background(), args))
	_, ok := f.h.parents.Ready(instKey)
	assert.False(t, ok, "a parent whose fork failed serves no child")
	assert.Contains(t, f.h.parents.Failed()["hatch-test-parent-debian12-default-1"], "invalid power state")
}

// instExpectClone sets the calls of a fresh clone of debian12, whose
// reference the inventory gives.
func instExpectClone(f *spFixture, name string) vctypes.Ref {
	tmpl := spRef("VirtualMachine", "vm-debian12")
	f.expectCloneSpecCalls(tmpl, 1)
	f.vs.EXPECT().LoadFolder(gomock.Any()).Return(spFolderRef, nil)
	ref := spNewRef
	f.vs.EXPECT().CloneVirtualMachine(gomock.Any(), spClone{tmpl: tmpl, name: name}).Return(ref, nil)
	return spNewRef
}

// newParentsFixture is an instant fixture without any parent, maxCpus 4.
func newParentsFixture(t *testing.T) *spFixture {
	t.Helper()
	cfg := spIPConfig()
	cfg.DefaultBootstrap = config.BootstrapCloudInit
	cfg.MaxCPUs = 4
	cfg.GuestCredentials = []config.GuestCredential{{ModelVMWare: "debian12", CloneMode: config.CloneModeInstant}}
	f := newSpFixture(t, cfg)
	f.inv.Add(inventory.VM{Name: "debian12", Template: true, Ref: spRef("VirtualMachine", "vm-debian12"), ChangeVersion: "cv1", NumCPU: 2, MemoryMB: 2048})
	return f
}

// expectParentBuild sets the calls of a parent's build and returns where
// its clone specification and its blanking are recorded.
func expectParentBuild(f *spFixture, ref vctypes.Ref) (*types.VirtualMachineCloneSpec, *vctypes.ConfigChange) {
	var spec types.VirtualMachineCloneSpec
	var blank vctypes.ConfigChange
	tmpl := spRef("VirtualMachine", "vm-debian12")
	f.expectCloneSpecCalls(tmpl, 1)
	f.vs.EXPECT().LoadFolder(gomock.Any()).Return(spFolderRef, nil)
	f.vs.EXPECT().CloneVirtualMachine(gomock.Any(), spClone{tmpl: tmpl, folder: spFolderRef}).
		DoAndReturn(func(_ context.Context, req vctypes.Clone) (vctypes.Ref, error) {
			spec = *spSpec(f.t, req, 1)
			return ref, nil
		})
	f.vs.EXPECT().WaitForVirtualMachineIP(gomock.Any(), ref, gomock.Any()).DoAndReturn(
		func(_ context.Context, _ vctypes.Ref, ip string) (string, error) { return ip, nil })
	f.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), ref, gomock.Any()).DoAndReturn(
		func(_ context.Context, _ vctypes.Ref, s vctypes.ConfigChange) error {
			blank = s
			return nil
		})
	return &spec, &blank
}

// TestInstantParentWaitsForCapacity: a parent's footprint is reserved
// against maxCpus before it is built: with a worker of ours holding the
// room, no clone is made (the strict mock refuses any); once the room is
// free the parent is built with its record (instant_parent, its
// template's identity, its placement), then its Notes and guestinfo are
// blanked so that a child reads only its own record.
func TestInstantParentWaitsForCapacity(t *testing.T) {
	t.Parallel()
	f := newParentsFixture(t)
	busy := inventory.VM{Name: "worker-busy", Ref: spRef("VirtualMachine", "vm-busy"), NumCPU: 3, MemoryMB: 1024, PowerState: vctypes.PoweredOn,
		Annotation: &inventory.Annotation{HatcheryName: spHatchery, WorkerName: "worker-busy", JobID: "run-0", Created: f.clock.Now()}}
	f.inv.Add(busy)
	f.h.tendInstantParents(context.Background())
	assert.Zero(t, f.h.parents.ReadyCount())
	assert.Empty(t, f.h.parents.Building())

	f.inv.Set(inventory.VM{Name: "debian12", Template: true, Ref: spRef("VirtualMachine", "vm-debian12"), ChangeVersion: "cv1", NumCPU: 2, MemoryMB: 2048})
	spec, blank := expectParentBuild(f, instParentRef)
	f.h.tendInstantParents(context.Background())
	rec, err := inventory.ParseAnnotation(spec.Config.Annotation)
	require.NoError(t, err)
	assert.True(t, rec.InstantParent)
	assert.Equal(t, instantparent.TemplateVersion("debian12", "debian12", "vm-debian12", "cv1"), rec.ParentTemplate)
	assert.Equal(t, config.DefaultPlacementName, rec.Placement)
	assert.True(t, spec.PowerOn)
	assert.Nil(t, spec.Customization, "booted through cloud-init, as the model's workers")
	assert.Contains(t, optionValues(spec.Config.ExtraConfig), cloudinit.GuestinfoMetadata)
	assert.Equal(t, parentNotes, writtenNotes(*blank))
	_, err = inventory.ParseAnnotation(writtenNotes(*blank))
	assert.ErrorIs(t, err, inventory.ErrNoAnnotation, "a child inheriting the Notes finds no record there")
	v := optionMap(writtenOptions(*blank))
	assert.Contains(t, v, cloudinit.GuestinfoMetadata)
	assert.Contains(t, v, cloudinit.GuestinfoUserdata)
	assert.Empty(t, v[cloudinit.GuestinfoMetadata])
	n, _, _ := f.h.ReservedFootprint()
	assert.Zero(t, n, "the reservation ends with the build: the parent counts from the inventory")
}

// TestInstantParentFailedIsRebuilt: a parent found powered off is
// quarantined and destroyed, and (a first failure) rebuilt in the same
// pass; a ready parent found again after a restart is adopted (blanked
// once), not rebuilt.
func TestInstantParentFailedIsRebuilt(t *testing.T) {
	t.Parallel()
	f := newParentsFixture(t)
	off := instParentVM(f, vctypes.PoweredOff)
	f.inv.Add(off)
	f.vs.EXPECT().DestroyVirtualMachine(gomock.Any(), instParentRef).Return(nil)
	newRef := spRef("VirtualMachine", "vm-parent-2")
	expectParentBuild(f, newRef)
	f.h.tendInstantParents(context.Background())
	assert.False(t, f.h.parents.Quarantined(instKey, f.clock.Now()), "a first failure is rebuilt at once")

	// A restart: a new hatchery finds the parent from its record.
	g := newParentsFixture(t)
	g.inv.Add(instParentVM(g, vctypes.PoweredOn))
	g.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), instParentRef, gomock.Any()).Return(nil).Times(1)
	g.h.tendInstantParents(context.Background())
	p, ok := g.h.parents.Ready(instKey)
	require.True(t, ok, "adopted")
	assert.Equal(t, "hatch-test-parent-debian12-default-1", p.Name)
	g.h.tendInstantParents(context.Background()) // blanked once: no second reconfigure
}

// TestInstantParentCleanupVerdict: the awol cleanup never takes a parent
// in use for an orphan worker (it has no job and never started a worker),
// and destroys one no instant model uses.
func TestInstantParentCleanupVerdict(t *testing.T) {
	t.Parallel()
	f := newParentsFixture(t)
	parent := instParentVM(f, vctypes.PoweredOn)
	f.clock.Advance(24 * time.Hour)
	v := f.h.awolVerdict(context.Background(), parent, apiWorkers{known: map[string]bool{}})
	assert.False(t, v.del, v.reason)
	assert.Equal(t, "instant parent in use", v.reason)

	f.h.Reconfigure(func() *config.Config {
		c := *f.h.conf()
		c.GuestCredentials = []config.GuestCredential{{ModelVMWare: "debian12"}}
		return &c
	}())
	v = f.h.awolVerdict(context.Background(), parent, apiWorkers{known: map[string]bool{}})
	assert.True(t, v.del)
	assert.False(t, v.release, "a parent holds no job")
	assert.Equal(t, "instant parent no instant model uses", v.reason)

	f.inv.Add(parent)
	names, err := f.h.WorkersStarted(context.Background())
	require.NoError(t, err)
	assert.NotContains(t, names, parent.Name, "a parent is not counted against maxWorker")
}

// TestInstantSpawnFlavorAsksForItsParent: a job whose flavor is not the
// parent's size is a fresh clone, and its flavor's parent becomes wanted
// (the next pass builds it), and stays wanted while such jobs come.
func TestInstantSpawnFlavorAsksForItsParent(t *testing.T) {
	t.Parallel()
	f := newInstantFixture(t, true)
	large := config.Flavor{Name: "large", CPUs: 8, MemoryMB: 16384}
	cfg := *f.h.conf()
	cfg.Flavors = []config.Flavor{large}
	f.h.Reconfigure(&cfg)
	args := spCloudInitArgs()
	annot := inventory.Annotation{HatcheryName: spHatchery, WorkerName: args.WorkerName, JobID: args.JobID, Flavor: "large"}
	f.expectCloneSpecCalls(spRef("VirtualMachine", "vm-debian12"), 1)
	f.vs.EXPECT().LoadFolder(gomock.Any()).Return(spFolderRef, nil)
	ref := spNewRef
	f.vs.EXPECT().CloneVirtualMachine(gomock.Any(), spClone{tmpl: spRef("VirtualMachine", "vm-debian12"), name: args.WorkerName}).Return(ref, nil)
	boot := &cloudinit.Boot{Script: "./worker", CDSConfig: "x"}
	plan := admission.NewPlan(f.h.conf(), args.Model, nil)
	plan.Flavor = &large
	_, err := f.h.instantOrClaimOrClone(context.Background(), args, plan, modelref.Template{Name: "debian12"}, &annot, boot)
	require.NoError(t, err)
	kl := instantparent.Key{Template: "debian12", Placement: config.DefaultPlacementName, Flavor: "large"}
	assert.Equal(t, []instantparent.Key{kl}, f.h.parents.Demand(f.clock.Now()))
	find := func(modelref.Template) (string, string, bool) { return "vm-debian12", "cv1", true }
	var keys []instantparent.Key
	for _, w := range instantparent.Wants(f.h.conf(), find, f.h.parents.Demand(f.clock.Now())) {
		keys = append(keys, w.Key)
	}
	assert.Contains(t, keys, kl, "the next pass builds the flavor's parent")
}
