package vim

import (
	"errors"
	"fmt"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// The clone's specification built from a request in the project's terms
// (vctypes.Clone), and what a clone reads of its template in those terms:
// pure functions of govmomi's data, called by the adapter's
// CloneVirtualMachine and LoadTemplate (internal/vcenter, govmomi_clone.go),
// which read the template's devices and set the card's backing.

// CloneSpecOf is vCenter's clone specification of req for a template of
// devices (a private copy: its first card is edited): placed in req's
// pool and datastore (unset: the template's), linked on req.Snapshot
// (createNewChildDiskBacking) or full (moveChildMostDiskBacking), the
// record and the options in ExtraConfig in that order, the flavor's
// growth (ApplyGrowth, the reconfigure's rule), the guest customization (CustomizationSpecOf), tools
// after power on, powered on when req says. With req.Network the first
// card is edited and returned for its backing to be set; no card then is
// an error.
func CloneSpecOf(req vctypes.Clone, devices object.VirtualDeviceList) (*types.VirtualMachineCloneSpec, *types.VirtualEthernetCard, error) {
	cards := devices.SelectByType((*types.VirtualEthernetCard)(nil))
	config := &types.VirtualMachineConfigSpec{Tools: &types.ToolsConfigInfo{AfterPowerOn: types.NewBool(true)}}
	var card *types.VirtualEthernetCard
	if req.Network != nil {
		if len(cards) == 0 {
			return nil, nil, errors.New("the template has no network card: a worker template needs one")
		}
		first, ok := cards[0].(types.BaseVirtualEthernetCard)
		if !ok {
			return nil, nil, errors.New("the template's first network card is not an ethernet card")
		}
		card = first.GetVirtualEthernetCard()
		config.DeviceChange = append(config.DeviceChange,
			&types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationEdit, Device: cards[0]})
	}
	if req.Record.Notes != "" || len(req.Record.Options) > 0 {
		ApplyRecord(config, req.Record)
	}
	config.ExtraConfig = append(config.ExtraConfig, OptionValues(req.Options)...)
	if err := ApplyGrowth(config, req.Growth, devices); err != nil {
		return nil, nil, err
	}
	spec := &types.VirtualMachineCloneSpec{Config: config, PowerOn: req.PowerOn}
	if req.Customization != nil {
		custom, err := CustomizationSpecOf(*req.Customization, len(cards))
		if err != nil {
			return nil, nil, err
		}
		spec.Customization = custom
	}
	spec.Location.DiskMoveType = string(types.VirtualMachineRelocateDiskMoveOptionsMoveChildMostDiskBacking)
	if !req.Snapshot.IsZero() {
		snap := MORef(req.Snapshot)
		spec.Snapshot = &snap
		spec.Location.DiskMoveType = string(types.VirtualMachineRelocateDiskMoveOptionsCreateNewChildDiskBacking)
	}
	if !req.Pool.IsZero() {
		pool := MORef(req.Pool)
		spec.Location.Pool = &pool
	}
	if !req.Datastore.IsZero() {
		ds := MORef(req.Datastore)
		spec.Location.Datastore = &ds
	}
	return spec, card, nil
}

// CustomizationSpecOf is vCenter's guest customization of c for a
// template of nics network cards: LinuxPrep with the hostname, or, for
// Windows, sysprep with the computer name, a workgroup, a new SID and a
// reboot; one adapter mapping per card (vSphere refuses a mismatch), a
// static address with its mask, gateway and DNS or DHCP, the first static
// card's DNS global too.
func CustomizationSpecOf(c vctypes.Customization, nics int) (*types.CustomizationSpec, error) {
	if nics < 1 {
		return nil, fmt.Errorf("vm %q: no network card to customize", c.Name)
	}
	if len(c.NICs) != nics {
		return nil, fmt.Errorf("vm %q: customization maps %d network cards, the template has %d", c.Name, len(c.NICs), nics)
	}
	maps := make([]types.CustomizationAdapterMapping, nics)
	var global types.CustomizationGlobalIPSettings
	for i, a := range c.NICs {
		if a.IP == "" {
			maps[i].Adapter.Ip = &types.CustomizationDhcpIpGenerator{}
			continue
		}
		maps[i].Adapter = types.CustomizationIPSettings{
			Ip:            &types.CustomizationFixedIp{IpAddress: a.IP},
			SubnetMask:    a.SubnetMask,
			DnsServerList: a.DNS,
		}
		if a.Gateway != "" {
			maps[i].Adapter.Gateway = []string{a.Gateway}
		}
		if global.DnsServerList == nil {
			global.DnsServerList = a.DNS
		}
	}
	spec := &types.CustomizationSpec{
		Identity:         &types.CustomizationLinuxPrep{HostName: &types.CustomizationFixedName{Name: c.Name}},
		GlobalIPSettings: global,
		NicSettingMap:    maps,
	}
	if c.Windows {
		spec.Identity = sysprepIdentity(c.Name)
		spec.Options = windowsOptions()
	}
	return spec, nil
}

// TemplateOf is what a clone needs of the template o (read with
// config.hardware.device and snapshot, LoadTemplate) in the project's
// terms: its network cards counted, its disks' sizes and datastores, its
// snapshots depth first and the current one.
func TemplateOf(ref types.ManagedObjectReference, o mo.VirtualMachine) vctypes.Template {
	t := vctypes.Template{Ref: RefOf(ref)}
	if o.Config != nil {
		devices := object.VirtualDeviceList(o.Config.Hardware.Device)
		t.NICs = len(devices.SelectByType((*types.VirtualEthernetCard)(nil)))
		for _, d := range devices.SelectByType((*types.VirtualDisk)(nil)) {
			if disk, ok := d.(*types.VirtualDisk); ok {
				t.Disks = append(t.Disks, diskOf(disk))
			}
		}
	}
	if o.Snapshot == nil {
		return t
	}
	if o.Snapshot.CurrentSnapshot != nil {
		t.CurrentSnapshot = RefOf(*o.Snapshot.CurrentSnapshot)
	}
	var walk func([]types.VirtualMachineSnapshotTree)
	walk = func(nodes []types.VirtualMachineSnapshotTree) {
		for _, n := range nodes {
			t.Snapshots = append(t.Snapshots, vctypes.Snapshot{Name: n.Name, Ref: RefOf(n.Snapshot)})
			walk(n.ChildSnapshotList)
		}
	}
	walk(o.Snapshot.RootSnapshotList)
	return t
}

// diskOf is a virtual disk's size (capacityInBytes, else capacityInKB)
// and the datastore of its backing file.
func diskOf(disk *types.VirtualDisk) vctypes.Disk {
	d := vctypes.Disk{CapacityBytes: disk.CapacityInBytes}
	if d.CapacityBytes <= 0 {
		d.CapacityBytes = disk.CapacityInKB * 1024
	}
	if fb, ok := disk.Backing.(types.BaseVirtualDeviceFileBackingInfo); ok {
		if ds := fb.GetVirtualDeviceFileBackingInfo().Datastore; ds != nil {
			d.Datastore = RefOf(*ds)
		}
	}
	return d
}

// sysprepIdentity is the Windows customization of a worker: the computer
// name, a workgroup, a new SID. It sets no product key (the template's
// licence stays) and no password: the Administrator account is left as
// sysprep leaves it, the hatchery signs in with the model's guest account
// (docs/windows.md), so the clone specification holds no secret.
func sysprepIdentity(computerName string) *types.CustomizationSysprep {
	return &types.CustomizationSysprep{
		GuiUnattended: types.CustomizationGuiUnattended{
			// 85: (GMT) Greenwich Mean Time, the Windows time zone index
			// vSphere documents for CustomizationGuiUnattended.TimeZone.
			TimeZone:       85,
			AutoLogon:      false,
			AutoLogonCount: 1,
		},
		UserData: types.CustomizationUserData{
			FullName:     "CDS worker",
			OrgName:      "CDS",
			ComputerName: &types.CustomizationFixedName{Name: computerName},
		},
		Identification: types.CustomizationIdentification{JoinWorkgroup: "WORKGROUP"},
	}
}

// windowsOptions are sysprep's options: a new SID, the guest rebooted
// into its new identity, no account deleted.
func windowsOptions() *types.CustomizationWinOptions {
	return &types.CustomizationWinOptions{
		ChangeSID:      true,
		DeleteAccounts: false,
		Reboot:         types.CustomizationSysprepRebootOptionReboot,
	}
}
