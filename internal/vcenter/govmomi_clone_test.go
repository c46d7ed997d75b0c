package vcenter_test

import (
	"errors"
	"github.com/stretchr/testify/require"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// TestTemplateOf: a template read with config.hardware.device and
// snapshot becomes its cards counted, its disks (capacityInBytes, else
// capacityInKB; the backing's datastore, zero when it names none) and
// its snapshots depth first with the current one.
func TestTemplateOf(t *testing.T) {
	t.Parallel()
	ds := types.ManagedObjectReference{Type: "Datastore", Value: "datastore-1"}
	devices := testutil.TemplateDevices(2) // a 10 GB disk in KB, two cards
	devices[0].(*types.VirtualDisk).Backing = &types.VirtualDiskFlatVer2BackingInfo{
		VirtualDeviceFileBackingInfo: types.VirtualDeviceFileBackingInfo{FileName: "[ds] t/t.vmdk", Datastore: &ds},
	}
	devices = append(devices, &types.VirtualDisk{VirtualDevice: types.VirtualDevice{Key: 2001}, CapacityInBytes: 1 << 30})
	snap := func(id string) types.ManagedObjectReference {
		return types.ManagedObjectReference{Type: "VirtualMachineSnapshot", Value: id}
	}
	cur := snap("snapshot-3")
	o := mo.VirtualMachine{
		Config: &types.VirtualMachineConfigInfo{Hardware: types.VirtualHardware{Device: devices}},
		Snapshot: &types.VirtualMachineSnapshotInfo{CurrentSnapshot: &cur, RootSnapshotList: []types.VirtualMachineSnapshotTree{
			{Name: "base", Snapshot: snap("snapshot-1"), ChildSnapshotList: []types.VirtualMachineSnapshotTree{{Name: "child", Snapshot: snap("snapshot-2")}}},
			{Name: "golden", Snapshot: cur},
		}},
	}
	ref := types.ManagedObjectReference{Type: "VirtualMachine", Value: "vm-7"}
	got := vim.TemplateOf(ref, o)
	assert.Equal(t, vctypes.Ref{Type: "VirtualMachine", Value: "vm-7"}, got.Ref)
	assert.Equal(t, 2, got.NICs)
	assert.Equal(t, []vctypes.Disk{
		{CapacityBytes: 10 << 30, Datastore: vctypes.Ref{Type: "Datastore", Value: "datastore-1"}},
		{CapacityBytes: 1 << 30},
	}, got.Disks)
	assert.Equal(t, vim.RefOf(cur), got.CurrentSnapshot)
	var names []string
	for _, s := range got.Snapshots {
		names = append(names, s.Name)
	}
	assert.Equal(t, []string{"base", "child", "golden"}, names, "depth first")
	assert.Equal(t, vctypes.Ref{Type: "VirtualMachineSnapshot", Value: "snapshot-2"}, got.Snapshots[1].Ref)

	empty := vim.TemplateOf(ref, mo.VirtualMachine{})
	assert.Zero(t, empty.NICs)
	assert.True(t, empty.CurrentSnapshot.IsZero())
}

// cloneDevices is a template's device list: a 10 GB disk and nics cards.
func cloneDevices(nics int) object.VirtualDeviceList { return testutil.TemplateDevices(nics) }

// TestCloneSpecOf: the adapter's specification of a clone request: linked
// on the request's snapshot (a delta disk) or full, placed in its pool
// and datastore (unset: the template's), the record then the options in
// ExtraConfig, the flavor's size with the disk grown, the first card
// edited for its network, tools after power on, powered on as asked.
func TestCloneSpecOf(t *testing.T) {
	t.Parallel()
	pool := vctypes.Ref{Type: "ResourcePool", Value: "resgroup-1"}
	ds := vctypes.Ref{Type: "Datastore", Value: "datastore-1"}
	snap := vctypes.Ref{Type: "VirtualMachineSnapshot", Value: "snapshot-1"}
	rec := vctypes.Record{Notes: "record", Options: []vctypes.Option{{Key: "mirror", Value: "record"}}}
	req := vctypes.Clone{Pool: pool, Datastore: ds, Snapshot: snap, Record: rec, PowerOn: true,
		Options: []vctypes.Option{{Key: "guestinfo.metadata", Value: "md"}},
		Network: &vctypes.CloneNetwork{Name: "VM Network", CardType: "vmxnet3"},
		Growth:  &vctypes.Growth{Flavor: "large", CPUs: 4, MemoryMB: 8192, DiskSizeGB: 20}}
	devices := cloneDevices(2)
	spec, card, err := vim.CloneSpecOf(req, devices)
	require.NoError(t, err)
	assert.Equal(t, string(types.VirtualMachineRelocateDiskMoveOptionsCreateNewChildDiskBacking), spec.Location.DiskMoveType)
	assert.Equal(t, vim.MORef(snap), *spec.Snapshot)
	assert.Equal(t, vim.MORef(pool), *spec.Location.Pool)
	assert.Equal(t, vim.MORef(ds), *spec.Location.Datastore)
	assert.True(t, spec.PowerOn)
	assert.False(t, spec.Template)
	assert.True(t, *spec.Config.Tools.AfterPowerOn)
	assert.Equal(t, "record", spec.Config.Annotation)
	assert.Equal(t, []vctypes.Option{{Key: "mirror", Value: "record"}, {Key: "guestinfo.metadata", Value: "md"}},
		vim.OptionsOf(spec.Config.ExtraConfig), "the record's mirror, then the options")
	assert.Equal(t, int32(4), spec.Config.NumCPUs)
	assert.Equal(t, int64(8192), spec.Config.MemoryMB)
	require.Len(t, spec.Config.DeviceChange, 2, "the first card's edit and the disk grown")
	nic := spec.Config.DeviceChange[0].GetVirtualDeviceConfigSpec()
	assert.Equal(t, types.VirtualDeviceConfigSpecOperationEdit, nic.Operation)
	assert.Equal(t, int32(4000), nic.Device.GetVirtualDevice().Key, "the first card")
	require.NotNil(t, card)
	assert.Equal(t, int32(4000), card.Key, "the card whose backing the network sets")
	disk := spec.Config.DeviceChange[1].GetVirtualDeviceConfigSpec().Device.(*types.VirtualDisk)
	assert.Equal(t, int64(20<<30), disk.CapacityInBytes)
	assert.Equal(t, int64(10<<20), devices[0].(*types.VirtualDisk).CapacityInKB, "the template's list is left as it was")
	assert.Nil(t, spec.Customization)

	// Full, where the template is, no network change, powered off.
	spec, card, err = vim.CloneSpecOf(vctypes.Clone{}, cloneDevices(1))
	require.NoError(t, err)
	assert.Equal(t, string(types.VirtualMachineRelocateDiskMoveOptionsMoveChildMostDiskBacking), spec.Location.DiskMoveType)
	assert.Nil(t, spec.Snapshot)
	assert.Nil(t, spec.Location.Pool)
	assert.Nil(t, spec.Location.Datastore)
	assert.Nil(t, card)
	assert.Empty(t, spec.Config.DeviceChange)
	assert.False(t, spec.PowerOn)
	assert.Zero(t, spec.Config.NumCPUs, "the template's size")

	// A network asked of a template without a card, a customization that
	// does not map its cards, a flavor that would shrink its disk.
	_, _, err = vim.CloneSpecOf(vctypes.Clone{Network: &vctypes.CloneNetwork{}}, cloneDevices(0))
	assert.ErrorContains(t, err, "the template has no network card")
	_, _, err = vim.CloneSpecOf(vctypes.Clone{Customization: &vctypes.Customization{Name: "w", NICs: make([]vctypes.NICAddress, 1)}}, cloneDevices(2))
	assert.ErrorContains(t, err, `vm "w": customization maps 1 network cards, the template has 2`)
	_, _, err = vim.CloneSpecOf(vctypes.Clone{Growth: &vctypes.Growth{Flavor: "tiny", CPUs: 1, MemoryMB: 512, DiskSizeGB: 5}}, cloneDevices(1))
	assert.ErrorContains(t, err, `apply flavor "tiny": diskSizeGB 5 is smaller than the template's first disk`)
}

// TestCustomizationSpecOf: LinuxPrep with the hostname, one mapping per
// card, DHCP by default; a static address on its card with its mask,
// gateway (none when unset) and DNS, the DNS global too; Windows: sysprep
// with the computer name, a new SID, a reboot and no password.
func TestCustomizationSpecOf(t *testing.T) {
	t.Parallel()
	c, err := vim.CustomizationSpecOf(vctypes.Customization{Name: "worker-1-job", NICs: make([]vctypes.NICAddress, 2)}, 2)
	require.NoError(t, err)
	prep, ok := c.Identity.(*types.CustomizationLinuxPrep)
	require.True(t, ok, "%T", c.Identity)
	assert.Equal(t, "worker-1-job", prep.HostName.(*types.CustomizationFixedName).Name)
	require.Len(t, c.NicSettingMap, 2, "one mapping per card: vSphere refuses a mismatch")
	for i, m := range c.NicSettingMap {
		assert.IsType(t, &types.CustomizationDhcpIpGenerator{}, m.Adapter.Ip, "card %d", i)
	}
	assert.Empty(t, c.GlobalIPSettings.DnsServerList)
	assert.Nil(t, c.Options)

	static := vctypes.NICAddress{IP: "10.0.0.12", Gateway: "10.0.0.1", SubnetMask: "255.255.255.0", DNS: []string{"10.0.0.2"}}
	c, err = vim.CustomizationSpecOf(vctypes.Customization{Name: "w", NICs: []vctypes.NICAddress{static, {}}}, 2)
	require.NoError(t, err)
	first := c.NicSettingMap[0].Adapter
	assert.Equal(t, &types.CustomizationFixedIp{IpAddress: "10.0.0.12"}, first.Ip)
	assert.Equal(t, "255.255.255.0", first.SubnetMask)
	assert.Equal(t, []string{"10.0.0.1"}, first.Gateway)
	assert.Equal(t, []string{"10.0.0.2"}, first.DnsServerList)
	assert.Equal(t, []string{"10.0.0.2"}, c.GlobalIPSettings.DnsServerList)
	assert.IsType(t, &types.CustomizationDhcpIpGenerator{}, c.NicSettingMap[1].Adapter.Ip)
	noGateway := static
	noGateway.Gateway = ""
	c, err = vim.CustomizationSpecOf(vctypes.Customization{Name: "w", NICs: []vctypes.NICAddress{noGateway}}, 1)
	require.NoError(t, err)
	assert.Empty(t, c.NicSettingMap[0].Adapter.Gateway, "no gateway configured: none set")

	c, err = vim.CustomizationSpecOf(vctypes.Customization{Windows: true, Name: "win2022-wo-1a2b", NICs: []vctypes.NICAddress{{IP: "10.0.0.13", SubnetMask: "255.255.255.0"}}}, 1)
	require.NoError(t, err)
	sp, ok := c.Identity.(*types.CustomizationSysprep)
	require.True(t, ok, "%T", c.Identity)
	assert.Equal(t, "win2022-wo-1a2b", sp.UserData.ComputerName.(*types.CustomizationFixedName).Name)
	assert.Nil(t, sp.GuiUnattended.Password, "no secret in the spec")
	opts, ok := c.Options.(*types.CustomizationWinOptions)
	require.True(t, ok)
	assert.True(t, opts.ChangeSID)
	assert.Equal(t, string(types.CustomizationSysprepRebootOptionReboot), string(opts.Reboot))
	assert.Equal(t, &types.CustomizationFixedIp{IpAddress: "10.0.0.13"}, c.NicSettingMap[0].Adapter.Ip)

	_, err = vim.CustomizationSpecOf(vctypes.Customization{Name: "w"}, 0)
	assert.ErrorContains(t, err, `vm "w": no network card`)
}

// TestCloneRequestOnVcsim: the request's clone on the simulator: the
// template is read once for its read and its clones, again after a
// failed clone (it may have changed); a network that cannot be found
// fails before anything is sent (*vctypes.PrepError, no VM); the
// clone lands on the network asked, sized and recorded.
func TestCloneRequestOnVcsim(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testCtx(t)
	c := env.Client
	tpl, folder := cloneSource(t, ctx, c)
	reads := func(f func()) int64 {
		before := c.Stats()
		f()
		return c.Stats().Sub(before)["RetrievePropertiesEx"].Requests
	}
	var (
		read vctypes.Template
		err  error
	)
	assert.Equal(t, int64(1), reads(func() { read, err = c.LoadTemplate(ctx, tpl) }))
	require.NoError(t, err)
	assert.Equal(t, 1, read.NICs)
	require.Len(t, read.Disks, 1)

	a := inventory.Annotation{HatcheryName: "hatch", WorkerName: "req-1", Created: time.Now().UTC().Truncate(time.Second)}
	req := cloneOf(cloneSpec(t, ctx, c, a, 2, 2048, ""), tpl, folder, "req-1")
	req.Network = &vctypes.CloneNetwork{Name: "nope", CardType: "vmxnet3"}
	_, err = c.CloneVirtualMachine(ctx, req)
	var notSent *vctypes.PrepError
	require.True(t, errors.As(err, &notSent), "%v", err)
	assert.Contains(t, notSent.Step, `network "nope"`)
	_, ok := env.Inspect("req-1")
	assert.False(t, ok, "nothing sent, no VM")
	assert.Equal(t, int64(1), reads(func() { _, err = c.LoadTemplate(ctx, tpl) }), "read again after a failed clone")
	require.NoError(t, err)

	req.Network = &vctypes.CloneNetwork{Name: vcsimtest.NetworkName, CardType: "vmxnet3"}
	ref, err := c.CloneVirtualMachine(ctx, req)
	require.NoError(t, err)
	st := env.MustInspect("req-1")
	assert.Equal(t, vim.MORef(ref), st.Ref)
	assert.Equal(t, int32(2), st.NumCPU)
	assert.Equal(t, a.Marshal(), st.ExtraConfig[inventory.AnnotationMirrorKey])
	assert.Zero(t, reads(func() { _, err = c.LoadTemplate(ctx, tpl) }), "kept since the clone's read")
	require.NoError(t, err)
}
