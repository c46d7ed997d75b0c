package vcsimtest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/cloudinit"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// guestinfo is the cloud-init guestinfo of a VM named name: a static
// address when ip is set, DHCP otherwise.
func guestinfo(t *testing.T, name, ip string) []types.BaseOptionValue {
	t.Helper()
	var addr *cloudinit.Address
	if ip != "" {
		addr = &cloudinit.Address{IP: ip, Gateway: "10.0.0.1", SubnetMask: "255.255.255.0"}
	}
	opts, err := cloudinit.Options(name+"-instance", name, addr, cloudinit.Boot{Script: "true", CDSConfig: name + "-config"})
	require.NoError(t, err)
	return vim.OptionValues(opts)
}

// instantFixture is a running parent (a clone of the default template with
// its own guestinfo, booted) and the references a child's spec needs.
type instantFixture struct {
	parent *object.VirtualMachine
	folder *object.Folder // the VM folder
	pool   types.ManagedObjectReference
}

// startParent clones the default template into a VM named name with the
// guestinfo of parentIP (static; "" for DHCP), powered on when on is set,
// and waits for its boot when it is.
func startParent(ctx context.Context, t *testing.T, env *vcsimtest.Env, name, parentIP string, on bool) instantFixture {
	t.Helper()
	tpl, folder, pool := cloneFixture(ctx, t, env)
	spec := types.VirtualMachineCloneSpec{
		Location: types.VirtualMachineRelocateSpec{Pool: &pool},
		Config:   &types.VirtualMachineConfigSpec{ExtraConfig: guestinfo(t, name, parentIP)},
		PowerOn:  on,
	}
	task, err := tpl.Clone(ctx, folder, name, spec)
	require.NoError(t, err)
	info, err := task.WaitForResult(ctx)
	require.NoError(t, err)
	if on {
		_, err = env.CloudInit.WaitForBoots(ctx, 1)
		require.NoError(t, err)
	}
	return instantFixture{
		parent: object.NewVirtualMachine(env.Admin.Client, info.Result.(types.ManagedObjectReference)),
		folder: folder,
		pool:   pool,
	}
}

// instantClone runs an instant clone of parent and returns the child's
// reference or the task's error.
func instantClone(ctx context.Context, parent *object.VirtualMachine, spec types.VirtualMachineInstantCloneSpec) (types.ManagedObjectReference, error) {
	task, err := parent.InstantClone(ctx, spec)
	if err != nil {
		return types.ManagedObjectReference{}, err
	}
	info, err := task.WaitForResult(ctx)
	if err != nil {
		return types.ManagedObjectReference{}, err
	}
	ref, ok := info.Result.(types.ManagedObjectReference)
	if !ok {
		return types.ManagedObjectReference{}, errors.New("task result is not a reference")
	}
	return ref, nil
}

// TestInstantCloneForksARunningChild: InstantClone_Task (instantclone.go,
// modelling vCenter 6.7+) creates the child powered on, in the spec's
// folder and pool, with the parent's hardware and the spec's ExtraConfig
// on top of the parent's; the child re-identifies from its own guestinfo:
// the static address its metadata gives, or a DHCP lease that is not the
// parent's. The parent is left as it was.
func TestInstantCloneForksARunningChild(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		parentIP string
		childIP  string // "": DHCP
	}{
		{name: "static", parentIP: "10.0.0.10", childIP: "10.0.0.11"},
		{name: "dhcp", parentIP: "", childIP: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := vcsimtest.Start(t, vcsimtest.Options{})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			fx := startParent(ctx, t, env, "parent", tc.parentIP, true)
			before := env.MustInspect("parent")
			require.NotEmpty(t, before.IPAddress)
			children, err := fx.folder.CreateFolder(ctx, "children")
			require.NoError(t, err)
			childFolder := children.Reference()

			childInfo := guestinfo(t, "child", tc.childIP)
			ref, err := instantClone(ctx, fx.parent, types.VirtualMachineInstantCloneSpec{
				Name:     "child",
				Location: types.VirtualMachineRelocateSpec{Folder: &childFolder, Pool: &fx.pool},
				Config:   append(childInfo, &types.OptionValue{Key: "hatchery.child", Value: "yes"}),
			})
			require.NoError(t, err)

			boots, err := env.CloudInit.WaitForBoots(ctx, 2)
			require.NoError(t, err)
			assert.Equal(t, "child", boots[1].VM)
			assert.Equal(t, "child-instance", boots[1].InstanceID, "the child's own metadata")
			assert.Equal(t, "child-config", boots[1].CDSConfig, "the child's own worker config")

			child := env.MustInspect("child")
			assert.Equal(t, ref, child.Ref, "the task's result is the child")
			assert.Equal(t, types.VirtualMachinePowerStatePoweredOn, child.PowerState)
			assert.True(t, child.GuestOperationsReady)
			assert.Equal(t, before.NumCPU, child.NumCPU)
			assert.Equal(t, before.MemoryMB, child.MemoryMB)
			assert.Equal(t, "yes", child.ExtraConfig["hatchery.child"])
			for _, ov := range childInfo {
				o := ov.GetOptionValue()
				assert.Equal(t, o.Value, child.ExtraConfig[o.Key], o.Key)
			}
			if tc.childIP != "" {
				assert.Equal(t, tc.childIP, child.IPAddress)
			} else {
				assert.NotEmpty(t, child.IPAddress)
			}
			assert.NotEqual(t, before.IPAddress, child.IPAddress, "never the parent's address")
			assert.Equal(t, []string{child.IPAddress}, child.GuestNetIPs)

			var mc mo.VirtualMachine
			pc := property.DefaultCollector(env.Admin.Client)
			require.NoError(t, pc.RetrieveOne(ctx, ref, []string{"parent", "resourcePool", "runtime.host", "config.hardware.device"}, &mc))
			assert.Equal(t, childFolder, *mc.Parent)
			assert.Equal(t, fx.pool, *mc.ResourcePool)
			var mp mo.VirtualMachine
			require.NoError(t, pc.RetrieveOne(ctx, fx.parent.Reference(), []string{"runtime.host", "config.hardware.device"}, &mp))
			assert.Equal(t, *mp.Runtime.Host, *mc.Runtime.Host, "the parent's host")
			parentDevices, childDevices := object.VirtualDeviceList(mp.Config.Hardware.Device), object.VirtualDeviceList(mc.Config.Hardware.Device)
			require.Len(t, childDevices, len(parentDevices))
			for _, d := range parentDevices {
				assert.NotNil(t, childDevices.Find(parentDevices.Name(d)), parentDevices.Name(d))
			}
			pnic := parentDevices.SelectByType((*types.VirtualEthernetCard)(nil))
			cnic := childDevices.SelectByType((*types.VirtualEthernetCard)(nil))
			require.Len(t, cnic, 1)
			require.Len(t, pnic, 1)
			assert.NotEqual(t, pnic[0].(types.BaseVirtualEthernetCard).GetVirtualEthernetCard().MacAddress,
				cnic[0].(types.BaseVirtualEthernetCard).GetVirtualEthernetCard().MacAddress, "a new MAC")

			after := env.MustInspect("parent")
			assert.Equal(t, before, after, "the parent is unchanged")
		})
	}
}

// TestInstantCloneRefusesAPoweredOffParent: vCenter forks only a running
// VM: the task fails with InvalidPowerState, which vcenter.Classify makes
// vctypes.FaultInvalidPowerState; no child is created.
func TestInstantCloneRefusesAPoweredOffParent(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fx := startParent(ctx, t, env, "parent", "10.0.0.10", false)

	_, err := instantClone(ctx, fx.parent, types.VirtualMachineInstantCloneSpec{Name: "child", Location: types.VirtualMachineRelocateSpec{Pool: &fx.pool}})
	require.Error(t, err)
	var ips *types.InvalidPowerState
	_, ok := fault.As(err, &ips)
	require.True(t, ok, "InvalidPowerState, got %v", err)
	assert.Equal(t, types.VirtualMachinePowerStatePoweredOff, ips.ExistingState)
	assert.True(t, errors.Is(vcenter.Classify(err), vctypes.FaultInvalidPowerState), "classified: %v", vcenter.Classify(err))
	_, exists := env.Inspect("child")
	assert.False(t, exists, "no child")
}

// TestInstantCloneRefusesATakenName: a name taken in the destination
// folder fails the task with DuplicateName (vctypes.FaultDuplicateName),
// as vCenter does; the default folder is the datacenter's VM folder.
func TestInstantCloneRefusesATakenName(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fx := startParent(ctx, t, env, "parent", "10.0.0.10", true)

	spec := types.VirtualMachineInstantCloneSpec{Name: "child", Config: guestinfo(t, "child", "10.0.0.11")}
	first, err := instantClone(ctx, fx.parent, spec)
	require.NoError(t, err)
	var mc mo.VirtualMachine
	require.NoError(t, property.DefaultCollector(env.Admin.Client).RetrieveOne(ctx, first, []string{"parent"}, &mc))
	assert.Equal(t, fx.folder.Reference(), *mc.Parent, "the datacenter's VM folder by default")

	_, err = instantClone(ctx, fx.parent, spec)
	require.Error(t, err)
	assert.True(t, fault.Is(err, &types.DuplicateName{}), "DuplicateName, got %v", err)
	assert.True(t, errors.Is(vcenter.Classify(err), vctypes.FaultDuplicateName))
	// The parent's own name too.
	spec.Name = "parent"
	_, err = instantClone(ctx, fx.parent, spec)
	assert.True(t, fault.Is(err, &types.DuplicateName{}), "DuplicateName, got %v", err)
}

// TestInstantCloneChildIsReadyAfterReidentification: with
// Options.InstantReadyDelay, the child's guest reports tools running,
// guest operations ready and its address only once the delay has passed
// since the fork (the guest's re-identification); until then it reports
// no address at all, not the parent's.
func TestInstantCloneChildIsReadyAfterReidentification(t *testing.T) {
	t.Parallel()
	const delay = 1500 * time.Millisecond
	env := vcsimtest.Start(t, vcsimtest.Options{InstantReadyDelay: delay})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fx := startParent(ctx, t, env, "parent", "10.0.0.10", true)

	start := time.Now()
	_, err := instantClone(ctx, fx.parent, types.VirtualMachineInstantCloneSpec{Name: "child", Config: guestinfo(t, "child", "10.0.0.11")})
	require.NoError(t, err)
	early := env.MustInspect("child")
	forked := time.Since(start)
	if forked < delay { // a starved machine may have passed the delay already
		assert.Equal(t, types.VirtualMachinePowerStatePoweredOn, early.PowerState)
		assert.False(t, early.GuestOperationsReady, "not ready before re-identification")
		assert.Empty(t, early.IPAddress, "no address before re-identification")
	}
	_, err = env.CloudInit.WaitForBoots(ctx, 2)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), delay)
	child := env.MustInspect("child")
	assert.True(t, child.GuestOperationsReady)
	assert.Equal(t, "10.0.0.11", child.IPAddress)
}

// TestInstantCloneEditsOnlyNetworkCards: spec.location.deviceChange may
// only edit network cards (vCenter refuses anything else with
// InvalidArgument); an edit of the card's backing is the child's.
func TestInstantCloneEditsOnlyNetworkCards(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fx := startParent(ctx, t, env, "parent", "10.0.0.10", true)
	devices, err := fx.parent.Device(ctx)
	require.NoError(t, err)
	disk := devices.SelectByType((*types.VirtualDisk)(nil))[0]
	_, err = instantClone(ctx, fx.parent, types.VirtualMachineInstantCloneSpec{
		Name: "child",
		Location: types.VirtualMachineRelocateSpec{DeviceChange: []types.BaseVirtualDeviceConfigSpec{
			&types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationEdit, Device: disk},
		}},
	})
	assert.True(t, fault.Is(err, &types.InvalidArgument{}), "InvalidArgument, got %v", err)

	finder := dcFinder(ctx, t, env)
	net, err := finder.Network(ctx, "DC0_DVPG0")
	require.NoError(t, err)
	backing, err := net.EthernetCardBackingInfo(ctx)
	require.NoError(t, err)
	nic := devices.SelectByType((*types.VirtualEthernetCard)(nil))[0]
	nic.GetVirtualDevice().Backing = backing
	ref, err := instantClone(ctx, fx.parent, types.VirtualMachineInstantCloneSpec{
		Name: "child",
		Location: types.VirtualMachineRelocateSpec{DeviceChange: []types.BaseVirtualDeviceConfigSpec{
			&types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationEdit, Device: nic},
		}},
	})
	require.NoError(t, err)
	var mc mo.VirtualMachine
	require.NoError(t, property.DefaultCollector(env.Admin.Client).RetrieveOne(ctx, ref, []string{"network"}, &mc))
	assert.Equal(t, []types.ManagedObjectReference{net.Reference()}, mc.Network, "the edited backing")
}

// TestInstantCloneLatencyModel: with the latency model (ApplyTaskDelays,
// LatencyOptions) an instant clone's task takes the fork's figure
// (OpInstantCloneTask, a fraction of a linked clone's) and its child is
// ready the re-identification's figure later (OpInstantReidentify): the
// two add up to OpInstantClone. Bounds allow four standard deviations of
// the model's jitter below the figures.
//
// Not parallel: the task delays are process-wide (ApplyTaskDelays), and
// the package's parallel tests run only after this one.
func TestInstantCloneLatencyModel(t *testing.T) {
	task, ready := vcsimtest.Modelled(vcsimtest.OpInstantCloneTask), vcsimtest.Modelled(vcsimtest.OpInstantReidentify)
	require.Equal(t, vcsimtest.Modelled(vcsimtest.OpInstantClone), task+ready, "the total is the fork and the re-identification")
	require.Less(t, task, vcsimtest.Modelled(vcsimtest.OpLinkedClone))
	low := func(d time.Duration) time.Duration {
		return time.Duration(float64(d) * (1 - 4*vcsimtest.LatencyJitter))
	}

	restore := vcsimtest.ApplyTaskDelays(vcsimtest.OpLinkedClone)
	defer restore()
	env := vcsimtest.Start(t, vcsimtest.LatencyOptions(vcsimtest.Options{}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fx := startParent(ctx, t, env, "parent", "10.0.0.10", true)

	start := time.Now()
	it, err := fx.parent.InstantClone(ctx, types.VirtualMachineInstantCloneSpec{Name: "child", Config: guestinfo(t, "child", "10.0.0.11")})
	require.NoError(t, err)
	info, err := it.WaitForResult(ctx)
	require.NoError(t, err)
	require.NotNil(t, info.StartTime)
	require.NotNil(t, info.CompleteTime)
	assert.GreaterOrEqual(t, info.CompleteTime.Sub(*info.StartTime), low(task), "the fork's task delay")
	assert.Equal(t, "InstantClone", info.Name)
	_, err = env.CloudInit.WaitForBoots(ctx, 2)
	require.NoError(t, err)
	total := time.Since(start)
	assert.GreaterOrEqual(t, total, low(task)+low(ready), "ready after the fork and the re-identification")
	t.Logf("instant clone task %s (model %s), child ready %s after the call (model %s)",
		info.CompleteTime.Sub(*info.StartTime).Round(time.Millisecond), task, total.Round(time.Millisecond), task+ready)
}

// TestInstantCloneCopiesTheParentsConfiguration: the child is a copy of
// the running parent's configuration, as on vCenter: its Notes and its
// ExtraConfig are the parent's, with the spec's option values on top (a
// key set again takes the spec's value, an empty value removes the key).
func TestInstantCloneCopiesTheParentsConfiguration(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fx := startParent(ctx, t, env, "parent", "10.0.0.10", true)
	task, err := fx.parent.Reconfigure(ctx, types.VirtualMachineConfigSpec{
		Annotation: "parent notes",
		ExtraConfig: []types.BaseOptionValue{
			&types.OptionValue{Key: "hatchery.kept", Value: "parent"},
			&types.OptionValue{Key: "hatchery.replaced", Value: "parent"},
			&types.OptionValue{Key: "hatchery.removed", Value: "parent"},
		},
	})
	require.NoError(t, err)
	require.NoError(t, task.Wait(ctx))

	_, err = instantClone(ctx, fx.parent, types.VirtualMachineInstantCloneSpec{Name: "child", Config: []types.BaseOptionValue{
		&types.OptionValue{Key: "hatchery.replaced", Value: "child"},
		&types.OptionValue{Key: "hatchery.removed", Value: ""},
		&types.OptionValue{Key: "hatchery.added", Value: "child"},
	}})
	require.NoError(t, err)
	child, parent := env.MustInspect("child"), env.MustInspect("parent")
	assert.Equal(t, "parent notes", child.Annotation)
	assert.Equal(t, "parent", child.ExtraConfig["hatchery.kept"])
	assert.Equal(t, "child", child.ExtraConfig["hatchery.replaced"])
	assert.NotContains(t, child.ExtraConfig, "hatchery.removed")
	assert.Equal(t, "child", child.ExtraConfig["hatchery.added"])
	assert.Equal(t, "parent", parent.ExtraConfig["hatchery.replaced"], "the parent keeps its own")
	assert.Equal(t, "parent", parent.ExtraConfig["hatchery.removed"])
	assert.NotContains(t, parent.ExtraConfig, "hatchery.added")
}
