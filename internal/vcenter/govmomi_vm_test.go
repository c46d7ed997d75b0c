package vcenter_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// testCtx bounds a test's vCenter calls. It is a liveness bound (a hung
// call fails the test instead of the whole run), not a speed target: a
// loaded 2-core CI machine running the packages in parallel needs minutes
// for what takes seconds alone.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// cloneSpec is a worker clone spec: placement, the annotation and its
// mirror, optional CPU/RAM override and a Linux customization with a fixed
// IP when ip is set.
func cloneSpec(t *testing.T, ctx context.Context, c *vcenter.Client, a inventory.Annotation, cpus int32, memMB int64, ip string) vctypes.Clone {
	t.Helper()
	pool, err := c.LoadResourcePool(ctx)
	require.NoError(t, err)
	ds, err := c.LoadDatastore(ctx, vcsimtest.DatastoreName)
	require.NoError(t, err)
	req := vctypes.Clone{Pool: pool, Datastore: ds, Record: a.Record()}
	if cpus > 0 || memMB > 0 {
		req.Growth = &vctypes.Growth{CPUs: cpus, MemoryMB: memMB}
	}
	if ip != "" {
		req.Customization = &vctypes.Customization{Name: "worker", NICs: []vctypes.NICAddress{
			{IP: ip, SubnetMask: "255.255.255.0", Gateway: "10.0.0.1", DNS: []string{"10.0.0.53"}},
		}}
	}
	return req
}

// cloneSource returns the simulator's default template and the folder
// new VMs go to, as c reads them: what a clone request starts from.
func cloneSource(t *testing.T, ctx context.Context, c *vcenter.Client) (tpl, folder vctypes.Ref) {
	t.Helper()
	tpl, err := c.LoadVirtualMachine(ctx, vcsimtest.DefaultTemplate)
	require.NoError(t, err)
	folder, err = c.LoadFolder(ctx)
	require.NoError(t, err)
	return tpl, folder
}

// cloneOf is req cloning template tpl into folder under name.
func cloneOf(req vctypes.Clone, tpl, folder vctypes.Ref, name string) vctypes.Clone {
	req.Template, req.Folder, req.Name = tpl, folder, name
	return req
}

// cloneWorker clones the default template into name and returns the VM.
func cloneWorker(t *testing.T, ctx context.Context, env *vcsimtest.Env, name string, ip string) types.ManagedObjectReference {
	t.Helper()
	c := env.Client
	tpl, folder := cloneSource(t, ctx, c)
	a := inventory.Annotation{HatcheryName: "hatch", WorkerName: name, VMwareModelPath: vcsimtest.DefaultTemplate, Created: time.Now().UTC().Truncate(time.Second)}
	ref, err := c.CloneVirtualMachine(ctx, cloneOf(cloneSpec(t, ctx, c, a, 0, 0, ip), tpl, folder, name))
	require.NoError(t, err)
	return vim.MORef(ref)
}

func TestCloneStartGuest(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testCtx(t)
	c := env.Client

	vm := cloneWorker(t, ctx, env, "worker-1", "10.0.0.10")
	require.NoError(t, c.StartVirtualMachine(ctx, vim.RefOf(vm)))
	require.NoError(t, c.WaitForGuestOperationsReady(ctx, vim.RefOf(vm)))
	ip, err := c.WaitForVirtualMachineIP(ctx, vim.RefOf(vm), "10.0.0.10")
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.10", ip)

	pid, err := c.StartProgramInGuest(ctx, vim.RefOf(vm),
		&vctypes.GuestAuth{Username: vcsimtest.DefaultGuestUser, Password: vcsimtest.DefaultGuestPassword},
		vctypes.GuestProgram{Path: "/bin/echo", Args: "-n ;echo hi", Env: []string{"CDS_CONFIG=abc"}})
	require.NoError(t, err)
	assert.NotZero(t, pid)
	calls := env.Guest.CallsFor("worker-1")
	require.Len(t, calls, 1)
	assert.Equal(t, "/bin/echo", calls[0].ProgramPath)
	assert.Equal(t, "-n ;echo hi", calls[0].Arguments)
	assert.Equal(t, []string{"CDS_CONFIG=abc"}, calls[0].EnvVariables)
	assert.Equal(t, pid, calls[0].Pid)
}

func TestListVirtualMachinesLeafPropertiesAndTemplates(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{ForeignVMs: 3})
	ctx := testCtx(t)
	c := env.Client
	cloneWorker(t, ctx, env, "worker-1", "")

	vms, err := c.ListVirtualMachineObjects(ctx)
	require.NoError(t, err)
	byName := map[string]inventory.VM{}
	for _, o := range vms {
		v := inventory.VMFromInfo(vim.VMInfoOf(o))
		byName[v.Name] = v
		// Only the leaf properties of VMProperties are retrieved.
		require.NotNil(t, o.Config, o.Name)
		assert.Empty(t, o.Config.Name, "config.name is not a listed property")
		assert.Empty(t, o.Config.GuestId, "config.guestId is not a listed property")
		assert.Nil(t, o.Config.Hardware.Device, "devices are not listed")
		assert.Empty(t, o.Summary.Config.Name, "summary is not listed")
		assert.Nil(t, o.Runtime.Host, "runtime.host is not listed")
		assert.Nil(t, o.ResourcePool)
		if o.Guest != nil {
			assert.Empty(t, o.Guest.GuestId, "guest.guestId is not listed")
		}
	}
	require.Len(t, byName, 5)
	assert.True(t, byName[vcsimtest.DefaultTemplate].Template)
	assert.Equal(t, int32(2), byName[vcsimtest.DefaultTemplate].NumCPU)
	assert.Equal(t, int32(4096), byName[vcsimtest.DefaultTemplate].MemoryMB)
	assert.False(t, byName["worker-1"].Template)
	require.NotNil(t, byName["worker-1"].Annotation, "the ExtraConfig mirror survives the clone")
	assert.Equal(t, "hatch", byName["worker-1"].Annotation.HatcheryName)
	assert.True(t, byName["foreign-00000"].PoweredOn())
	assert.Equal(t, []string{"10.200.0.1"}, byName["foreign-00000"].IPAddresses)

	// The container view is reused: a second list is one request.
	before := c.Stats()
	_, err = c.ListVirtualMachineObjects(ctx)
	require.NoError(t, err)
	delta := c.Stats().Sub(before)
	// The session's wait collector (the clone's wait above made it) polls
	// on its own goroutine: an answer to a poll sent before the window
	// may land in it (seen: WaitForUpdatesEx {0 requests, 434 response
	// bytes}). Every other method counts.
	delete(delta, "WaitForUpdatesEx")
	require.Len(t, delta, 1, "%v", delta)
	assert.Equal(t, int64(1), delta["RetrievePropertiesEx"].Requests)
	assert.Positive(t, delta["RetrievePropertiesEx"].RequestBytes)
	assert.Positive(t, delta["RetrievePropertiesEx"].ResponseBytes)
}

func TestCloneMirrorsAnnotationAndOverridesSize(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testCtx(t)
	c := env.Client
	tpl, folder := cloneSource(t, ctx, c)
	a := inventory.Annotation{HatcheryName: "hatch", WorkerName: "big-1", Flavor: "large", Created: time.Now().UTC().Truncate(time.Second)}

	cref, err := c.CloneVirtualMachine(ctx, cloneOf(cloneSpec(t, ctx, c, a, 4, 8192, ""), tpl, folder, "big-1"))
	require.NoError(t, err)
	ref := vim.MORef(cref)
	st := env.MustInspect("big-1")
	assert.Equal(t, ref, st.Ref)
	assert.Equal(t, int32(4), st.NumCPU)
	assert.Equal(t, int32(8192), st.MemoryMB)
	assert.Equal(t, a.Marshal(), st.ExtraConfig[inventory.AnnotationMirrorKey])
	// vcsim drops config.annotation on clone; the annotation
	// path is exercised by a reconfigure, as when a VM is claimed.
	vm := ref
	a.JobID = "42"
	rec := a.Record()
	require.NoError(t, c.ReconfigureVirtualMachine(ctx, vim.RefOf(vm), vctypes.ConfigChange{Record: &rec}))
	st = env.MustInspect("big-1")
	assert.Equal(t, a.Marshal(), st.Annotation)
	assert.Equal(t, a.Marshal(), st.ExtraConfig[inventory.AnnotationMirrorKey])

	vms, err := c.ListVirtualMachineObjects(ctx)
	require.NoError(t, err)
	for _, o := range vms {
		if o.Name == "big-1" {
			v := inventory.VMFromInfo(vim.VMInfoOf(o))
			require.NotNil(t, v.Annotation)
			assert.Equal(t, "42", v.Annotation.JobID)
			assert.Equal(t, int32(4), v.NumCPU)
		}
	}

	// Cloning to an existing name fails and names both VMs.
	_, err = c.CloneVirtualMachine(ctx, vctypes.Clone{Template: tpl, Folder: folder, Name: "big-1"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `clone "big-1" from template "debian12"`)
}

func TestPowerOperationsAreIdempotent(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testCtx(t)
	c := env.Client
	vm := cloneWorker(t, ctx, env, "worker-1", "")

	for range 2 {
		require.NoError(t, c.StartVirtualMachine(ctx, vim.RefOf(vm)))
		state, err := powerState(ctx, c, vm)
		require.NoError(t, err)
		assert.Equal(t, types.VirtualMachinePowerStatePoweredOn, state)
	}
	assert.True(t, env.MustInspect("worker-1").GuestOperationsReady)

	// Shutdown wait on a powered-on VM ends with ctx.
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	err := c.WaitForVirtualMachineShutdown(short, vim.RefOf(vm))
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)

	for range 2 {
		require.NoError(t, c.ShutdownVirtualMachine(ctx, vim.RefOf(vm)))
		require.NoError(t, c.WaitForVirtualMachineShutdown(ctx, vim.RefOf(vm)))
	}
	st := env.MustInspect("worker-1")
	assert.Equal(t, types.VirtualMachinePowerStatePoweredOff, st.PowerState)
	assert.False(t, st.GuestOperationsReady)
}

// TestSuspendAndResume: a running VM is suspended (twice: already
// suspended is success) and a power on resumes it; a powered-off VM cannot
// be suspended (ErrPoweredOff).
func TestSuspendAndResume(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testCtx(t)
	c := env.Client
	vm := cloneWorker(t, ctx, env, "worker-s", "")

	require.ErrorIs(t, c.SuspendVirtualMachine(ctx, vim.RefOf(vm)), vctypes.ErrPoweredOff)
	require.NoError(t, c.StartVirtualMachine(ctx, vim.RefOf(vm)))
	for range 2 {
		require.NoError(t, c.SuspendVirtualMachine(ctx, vim.RefOf(vm)))
		state, err := powerState(ctx, c, vm)
		require.NoError(t, err)
		assert.Equal(t, types.VirtualMachinePowerStateSuspended, state)
	}
	assert.False(t, env.MustInspect("worker-s").GuestOperationsReady, "a suspended guest runs nothing")

	require.NoError(t, c.StartVirtualMachine(ctx, vim.RefOf(vm)))
	state, err := powerState(ctx, c, vm)
	require.NoError(t, err)
	assert.Equal(t, types.VirtualMachinePowerStatePoweredOn, state)
	require.NoError(t, c.WaitForGuestOperationsReady(ctx, vim.RefOf(vm)))
}

func TestDestroy(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testCtx(t)
	c := env.Client
	vm := cloneWorker(t, ctx, env, "worker-1", "")

	require.NoError(t, c.StartVirtualMachine(ctx, vim.RefOf(vm)))
	err := c.DestroyVirtualMachine(ctx, vim.RefOf(vm))
	require.Error(t, err, "a powered-on VM is not destroyed")
	assert.Contains(t, err.Error(), `destroy "`)
	_, ok := env.Inspect("worker-1")
	assert.True(t, ok)

	require.NoError(t, c.ShutdownVirtualMachine(ctx, vim.RefOf(vm)))
	require.NoError(t, c.DestroyVirtualMachine(ctx, vim.RefOf(vm)))
	_, ok = env.Inspect("worker-1")
	assert.False(t, ok)
	require.NoError(t, c.DestroyVirtualMachine(ctx, vim.RefOf(vm)), "destroying a VM already gone is success")

	_, err = c.LoadVirtualMachine(ctx, "worker-1")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `find virtual machine "worker-1"`)
}

func TestRenameReconfigureAndMarkAsTemplate(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testCtx(t)
	c := env.Client
	vm := cloneWorker(t, ctx, env, "warmpool-v2-abc", "")

	require.NoError(t, c.RenameVirtualMachine(ctx, vim.RefOf(vm), "worker-7"))
	_, ok := env.Inspect("warmpool-v2-abc")
	assert.False(t, ok)
	loaded, err := c.LoadVirtualMachine(ctx, "worker-7")
	require.NoError(t, err)
	assert.Equal(t, vm.Reference(), vim.MORef(loaded))

	require.NoError(t, c.ReconfigureVirtualMachine(ctx, loaded, vctypes.ConfigChange{Growth: &vctypes.Growth{Flavor: "large", CPUs: 8, MemoryMB: 16384}}))
	st := env.MustInspect("worker-7")
	assert.Equal(t, int32(8), st.NumCPU)
	assert.Equal(t, int32(16384), st.MemoryMB)

	require.NoError(t, c.MarkVirtualMachineAsTemplate(ctx, loaded))
	assert.True(t, env.MustInspect("worker-7").Template)
	err = c.StartVirtualMachine(ctx, loaded)
	require.Error(t, err, "a template cannot be powered on")
	assert.Contains(t, err.Error(), `power on "worker-7"`)
}

func TestLoadVirtualMachineDevicesAndEthernetCard(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testCtx(t)
	c := env.Client
	tpl, err := c.LoadVirtualMachine(ctx, vcsimtest.DefaultTemplate)
	require.NoError(t, err)
	devices, err := vcenter.LoadVirtualMachineDevices(c, ctx, vim.MORef(tpl))
	require.NoError(t, err)
	assert.Len(t, devices.SelectByType((*types.VirtualDisk)(nil)), 1)
	cards := devices.SelectByType((*types.VirtualEthernetCard)(nil))
	require.Len(t, cards, 1)
	_, err = devices.FindSCSIController("")
	require.NoError(t, err)

	card := cards[0].(types.BaseVirtualEthernetCard).GetVirtualEthernetCard()
	card.Backing = nil
	require.NoError(t, c.SetupEthernetCard(ctx, card, "e1000", vcsimtest.NetworkName))
	backing, ok := card.Backing.(*types.VirtualEthernetCardNetworkBackingInfo)
	require.True(t, ok, "%T", card.Backing)
	assert.Equal(t, vcsimtest.NetworkName, backing.DeviceName)
	require.Error(t, c.SetupEthernetCard(ctx, card, "no-such-card", vcsimtest.NetworkName))
}

// powerState reads the VM's power state through the port (the adapter
// has no method of its own for it: the hatchery reads it from the
// inventory).
func powerState(ctx context.Context, c *vcenter.Client, vm types.ManagedObjectReference) (types.VirtualMachinePowerState, error) {
	vms, err := c.RetrieveVirtualMachineObjects(ctx, []types.ManagedObjectReference{vm})
	if err != nil {
		return "", err
	}
	if len(vms) != 1 {
		return "", fmt.Errorf("vm %s: %d answers", vm.Value, len(vms))
	}
	return vms[0].Runtime.PowerState, nil
}

// TestReconfigureRequest: a vctypes.ConfigChange is one reconfigure on
// vCenter: the compare-and-swap on the change version, the new name, the
// record (Notes and mirror), the options and the growth to a flavor, whose
// first disk the adapter grows after reading the VM's devices itself. A
// change it cannot build sends nothing (*vctypes.PrepError: a disk is
// never shrunk; a VM whose devices cannot be read); a stale change
// version is refused, classified.
func TestReconfigureRequest(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testCtx(t)
	c := env.Client
	vm := vim.RefOf(cloneWorker(t, ctx, env, "warmpool-v2-r", ""))
	firstDisk := func() int64 {
		devices, err := vcenter.LoadVirtualMachineDevices(c, ctx, vim.MORef(vm))
		require.NoError(t, err)
		disks := devices.SelectByType((*types.VirtualDisk)(nil))
		require.NotEmpty(t, disks)
		return disks[0].(*types.VirtualDisk).CapacityInKB
	}
	before := firstDisk()
	grownGB := before>>20 + 2
	infos, err := c.RetrieveVirtualMachines(ctx, []vctypes.Ref{vm})
	require.NoError(t, err)
	require.Len(t, infos, 1)
	read := infos[0].ChangeVersion

	a := inventory.Annotation{HatcheryName: "hatch", WorkerName: "worker-r", JobID: "42", Flavor: "big"}
	rec := a.Record()
	change := vctypes.ConfigChange{ChangeVersion: read, Name: "worker-r", Record: &rec,
		Options: []vctypes.Option{{Key: "guestinfo.test", Value: "x"}},
		Growth:  &vctypes.Growth{Flavor: "big", CPUs: 4, MemoryMB: 8192, DiskSizeGB: grownGB}}
	require.NoError(t, c.ReconfigureVirtualMachine(ctx, vm, change))
	st := env.MustInspect("worker-r")
	assert.Equal(t, a.Marshal(), st.Annotation)
	assert.Equal(t, a.Marshal(), st.ExtraConfig[inventory.AnnotationMirrorKey])
	assert.Equal(t, "x", st.ExtraConfig["guestinfo.test"])
	assert.Equal(t, int32(4), st.NumCPU)
	assert.Equal(t, int32(8192), st.MemoryMB)
	assert.Equal(t, grownGB<<20, firstDisk(), "the first disk grew to the flavor's size")

	err = c.ReconfigureVirtualMachine(ctx, vm, vctypes.ConfigChange{ChangeVersion: read, Name: "worker-again"})
	assert.ErrorIs(t, err, vctypes.FaultConcurrentAccess, "the version read before the first change is stale: %v", err)
	var prep *vctypes.PrepError
	assert.False(t, errors.As(err, &prep), "vCenter answered: not a preparation error")

	err = c.ReconfigureVirtualMachine(ctx, vm, vctypes.ConfigChange{Name: "worker-shrunk", Growth: &vctypes.Growth{Flavor: "tiny", CPUs: 1, MemoryMB: 1024, DiskSizeGB: 1}})
	require.True(t, errors.As(err, &prep), "%v", err)
	assert.Equal(t, `apply flavor "tiny"`, prep.Step)
	assert.Contains(t, err.Error(), "a disk is never shrunk")
	_, renamed := env.Inspect("worker-shrunk")
	assert.False(t, renamed, "nothing sent")
	assert.Equal(t, grownGB<<20, firstDisk())

	gone := vctypes.Ref{Type: "VirtualMachine", Value: "vm-gone"}
	err = c.ReconfigureVirtualMachine(ctx, gone, vctypes.ConfigChange{Growth: &vctypes.Growth{Flavor: "big", CPUs: 4, MemoryMB: 8192, DiskSizeGB: 40}})
	require.True(t, errors.As(err, &prep), "%v", err)
	assert.Equal(t, "load devices", prep.Step)
	assert.ErrorIs(t, err, vctypes.FaultNotFound, "the device read's fault, classified")
}
