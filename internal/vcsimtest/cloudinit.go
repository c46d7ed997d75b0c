package vcsimtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/cloudinit"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
)

// CloudInitBoot is one boot of a VM whose guestinfo carried cloud-init
// userdata, as FakeCloudInit played it.
type CloudInitBoot struct {
	VM         string
	InstanceID string
	Hostname   string
	// IP is the address the guest took: the metadata's static address, or
	// a fake DHCP lease.
	IP string
	// CDSConfig is the worker config the userdata wrote (the CDS_CONFIG
	// value).
	CDSConfig string
	// Metadata and Userdata are the decoded guestinfo values.
	Metadata, Userdata []byte
	// Err says why the boot could not use the guestinfo ("" when it could).
	Err string
	// Windows tells that the VM's guest family is Windows's: the boot
	// was played as cloudbase-init's (cloudbaseinit.go).
	Windows bool
	// Forked tells that the VM is the child of an instant clone
	// (instantclone.go): its guest took its identity from its own
	// guestinfo after the fork instead of booting.
	Forked bool
}

// FakeCloudInit plays cloud-init's VMware datasource, which the simulator
// lacks: when a VM powers on with guestinfo.userdata set, it decodes
// guestinfo.metadata and guestinfo.userdata (their .encoding keys), takes
// the static address of the metadata's network config (else a fake DHCP
// lease), reports it in guest.ipAddress and guest.net with the hostname,
// and records the boot with the CDS_CONFIG the userdata writes. A new
// instance id is a new boot; a power on with the same one (a reboot) only
// brings the network up again, as cloud-init does. Safe for concurrent use.
type FakeCloudInit struct {
	boots record[CloudInitBoot]

	mu       sync.Mutex
	seen     map[string]string // VM name -> last instance id
	ips      map[string]string // VM name -> address taken
	nextDHCP int
	runner   *GuestRunner // Options.Runner; nil: the userdata only is read
}

func newFakeCloudInit() *FakeCloudInit {
	return &FakeCloudInit{seen: map[string]string{}, ips: map[string]string{}}
}

// Boots returns every boot so far, oldest first.
func (f *FakeCloudInit) Boots() []CloudInitBoot { return f.boots.all() }

// WaitForBoots blocks until at least n boots happened or ctx ends; no
// polling.
func (f *FakeCloudInit) WaitForBoots(ctx context.Context, n int) ([]CloudInitBoot, error) {
	return f.boots.wait(ctx, n)
}

// powerOn plays the boot of vm (an instant clone's re-identification when
// forked); the caller holds vm's lock.
func (f *FakeCloudInit) powerOn(ctx *simulator.Context, vm *simulator.VirtualMachine, forked bool) {
	if vm.Config == nil {
		return
	}
	opts := cloudinit.Guestinfo(vim.OptionsOf(vm.Config.ExtraConfig))
	if opts[cloudinit.GuestinfoMetadata] == "" {
		return // no cloud-init datasource: nothing to play
	}
	b := CloudInitBoot{VM: vm.Name, Windows: vm.Guest != nil && vm.Guest.GuestFamily == WindowsGuestFamily, Forked: forked}
	ip, fresh := f.play(&b, opts)
	if ip != "" {
		if vm.Guest == nil {
			vm.Guest = &types.GuestInfo{}
		}
		vm.Guest.IpAddress = ip
		vm.Guest.HostName = b.Hostname
		vm.Guest.Net = []types.GuestNicInfo{{Network: NetworkName, IpAddress: []string{ip}, Connected: true}}
		ctx.Update(vm, []types.PropertyChange{
			{Name: "guest.ipAddress", Val: ip},
			{Name: "guest.hostName", Val: b.Hostname},
			{Name: "guest.net", Val: vm.Guest.Net},
			{Name: "summary.guest.ipAddress", Val: ip},
		})
	}
	if !fresh {
		return
	}
	f.boots.add(b)
	if b.Err == "" && !b.Windows { // the runner plays Linux guests only
		f.runnerBoot(ctx, vm, b.Userdata)
	}
}

// play decodes the guestinfo into b and returns the guest's address and
// whether this is a new instance (a boot to record).
func (f *FakeCloudInit) play(b *CloudInitBoot, opts map[string]string) (string, bool) {
	md, err := cloudinit.DecodeGuestinfo(opts[cloudinit.GuestinfoMetadata], opts[cloudinit.GuestinfoMetadataEncoding])
	if err != nil {
		b.Err = err.Error()
		return "", true
	}
	b.Metadata = md
	meta, err := cloudinit.ParseMetadata(md)
	if err != nil {
		b.Err = err.Error()
		return "", true
	}
	b.InstanceID, b.Hostname = meta.InstanceID, meta.LocalHostname

	f.mu.Lock()
	fresh := f.seen[b.VM] != meta.InstanceID
	f.seen[b.VM] = meta.InstanceID
	ip := f.ips[b.VM]
	if fresh || ip == "" {
		ip = staticAddress(meta)
		if b.Windows {
			ip = cloudbaseInitAddress(opts)
		}
		if ip == "" {
			f.nextDHCP++
			ip = fmt.Sprintf("10.254.%d.%d", f.nextDHCP/250, f.nextDHCP%250+2)
		}
		f.ips[b.VM] = ip
	}
	f.mu.Unlock()
	b.IP = ip
	if !fresh {
		return ip, false
	}

	if opts[cloudinit.GuestinfoUserdata] == "" {
		b.Err = "no userdata"
		return ip, true
	}
	ud, err := cloudinit.DecodeGuestinfo(opts[cloudinit.GuestinfoUserdata], opts[cloudinit.GuestinfoUserdataEncoding])
	if err != nil {
		b.Err = err.Error()
		return ip, true
	}
	b.Userdata = ud
	if b.Windows {
		cfg, err := playCloudbaseInit(ud)
		if err != nil {
			b.Err = err.Error()
		}
		b.CDSConfig = cfg
		return ip, true
	}
	cc, err := cloudinit.ParseCloudConfig(ud)
	if err != nil {
		b.Err = err.Error()
		return ip, true
	}
	for _, wf := range cc.WriteFiles {
		if wf.Path == cloudinit.ConfigPath {
			b.CDSConfig = wf.Content
		}
	}
	return ip, true
}

// staticAddress is the first address of the metadata's network config,
// without its prefix length; "" for DHCP.
func staticAddress(md cloudinit.Metadata) string {
	if md.Network == nil {
		return ""
	}
	names := make([]string, 0, len(md.Network.Ethernets))
	for n := range md.Network.Ethernets {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		for _, a := range md.Network.Ethernets[n].Addresses {
			ip, _, _ := strings.Cut(a, "/")
			return ip
		}
	}
	return ""
}
