package vcheck

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/clonespec"
	"github.com/cds-contrib/hatchery-vsphere/internal/cloudinit"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/ippool"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
)

// releaseTimeout bounds the release of the run's address locks at its
// end: one listing and a delete per lock, each bounded by the port's
// lock timeout; a minute is far past them.
const releaseTimeout = time.Minute

// address is the guest network a template's first clone is given: the
// static address taken from the configured ranges (lease nil: DHCP).
type address struct {
	lease *ippool.Lease
}

// ip is the static address ("" for DHCP).
func (a address) ip() string {
	if a.lease == nil {
		return ""
	}
	return a.lease.IP
}

// how says what the guest is asked to take.
func (a address) how() string {
	if a.lease == nil {
		return "DHCP"
	}
	return "static " + a.lease.IP
}

// takeAddress takes, for t's first clone, an address of the configured
// ranges (iprange, networks) the way a spawn does (ippool.Pool.Reserve:
// not used by a VM of the inventory, and taken through its lock, so that
// no hatchery instance hands it out meanwhile): one "static address"
// line. Without static IPs the clone uses DHCP and there is no line.
// false: no address could be taken (the line says why).
func (r *runner) takeAddress(ctx context.Context, t checkedTemplate) (address, bool) {
	if !r.staticIPs() {
		return address{}, true
	}
	start := time.Now()
	if r.ips == nil {
		pool, err := ippool.New(r.cfg)
		if err != nil {
			res := r.add("static address", t.name, start, Fail, err.Error())
			res.Needed, res.Fix = true, "correct iprange (or networks[].iprange): `config check` names the problem"
			return address{}, false
		}
		pool.UseLocks(r.vc, r.cfg.CommonConfiguration.Name, r.log)
		r.ips = pool
	}
	used, err := r.usedAddresses(ctx)
	if err != nil {
		r.outcome("static address", t.name, start, err, "").Needed = true
		return address{}, false
	}
	owner := FolderPrefix + r.o.RunID + "-" + t.name
	lease, err := r.ips.Reserve(ctx, used, owner)
	if err != nil {
		res := r.outcome("static address", t.name, start, err, "")
		res.Needed = true
		if errors.Is(err, ippool.ErrNoIPAvailable) {
			res.Fix = "every address of iprange is used by a VM or locked by a hatchery instance: run the check when one is free, or widen the range"
		}
		return address{}, false
	}
	r.owners = append(r.owners, owner)
	r.add("static address", t.name, start, Pass, "took "+lease.IP+" through its lock "+r.cfg.CommonConfiguration.Name+ippool.LockPrefix+lease.IP+", as a spawn does")
	return address{lease: &lease}, true
}

// releaseAddresses gives back the addresses the run took, once its VMs
// are powered off or destroyed: each reservation dropped, then its lock
// deleted (ippool.Pool.Reconcile deletes at once a lock this process
// holds for an address no reservation holds; another instance's locks it
// only marks). A failure is a "clean-up" line: a hatchery instance
// deletes the lock once no VM has used the address for
// ippool.ForeignLockGrace.
func (r *runner) releaseAddresses(ctx context.Context) {
	if r.ips == nil || len(r.owners) == 0 {
		return
	}
	start := time.Now()
	for _, ip := range r.ips.Reserved() {
		for _, o := range r.owners {
			r.ips.Release(ip, o)
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := r.ips.Reconcile(ctx, nil); err != nil {
		r.outcome("clean-up", "address locks", start, err,
			"a hatchery instance deletes the lock once the address is unused for ten minutes; or delete it by hand from "+vcenter.LockFolderName)
	}
}

// customization is the guest customization a spawn gives a guestops
// model's clone named name (clonespec.Customization: LinuxPrep or
// sysprep, addr's static address on the first card, else DHCP), for a
// template of devices.
func customizationOf(devices []types.BaseVirtualDevice, name string, t checkedTemplate, addr address) (*types.CustomizationSpec, error) {
	nics := len(object.VirtualDeviceList(devices).SelectByType((*types.VirtualEthernetCard)(nil)))
	return clonespec.Customization(name, nics, addr.lease, t.settings.OS == config.OSWindows)
}

// cloudInitAddress is addr as cloud-init's network config takes it (nil:
// DHCP).
func cloudInitAddress(addr address) *cloudinit.Address {
	l := addr.lease
	if l == nil {
		return nil
	}
	return &cloudinit.Address{IP: l.IP, Gateway: l.Gateway, SubnetMask: l.SubnetMask, DNS: l.DNS}
}

// customization waits for the guest of vm, a guestops model's clone
// customized as a spawn's (customize) and ready, to report its address
// (guest.WaitIP, the spawn's wait; the static one when addr has it): the
// customization applied and the guest on the network. since is the power
// on: the line's time is the boot's to an address.
func (r *runner) customization(ctx context.Context, t checkedTemplate, vm types.ManagedObjectReference, addr address, since time.Time) {
	kind := "LinuxPrep"
	if t.settings.OS == config.OSWindows {
		kind = "sysprep"
	}
	ip, err := r.waitIP(ctx, vm, addr.ip(), r.o.GuestReadyTimeout)
	if err != nil {
		res := r.outcome("customization", t.name, since, err, "")
		res.Needed = true
		if ctx.Err() == nil {
			res.Detail = fmt.Sprintf("%s with %s: the guest reported no address within %s: %v", kind, addr.how(), r.o.GuestReadyTimeout, err)
			res.Fix = "the template must allow guest customization (open-vm-tools, and perl for LinuxPrep; sysprep on Windows); " +
				"with DHCP, a DHCP server on the VMs' network (networkString, placements[].network), else set iprange; " +
				"with iprange, its gateway, mask and network must be the VMs' network's"
		}
		return
	}
	r.add("customization", t.name, since, Pass, fmt.Sprintf("%s with %s: the guest reported %s", kind, addr.how(), ip))
}
