package vcheck

import (
	"context"
	"fmt"
	"time"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/cloudinit"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/latencyfile"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// notifyPoll is how often the change watch is read while a change is
// awaited (VirtualMachineChanges never waits): the measured delay is
// that fine.
const notifyPoll = 50 * time.Millisecond

// cloneInto clones t into placement p (its pool and first datastore)
// after reading that datastore's space: two lines. It returns the clone.
// addr, for the clone the lifecycle runs on, is its guest's network: a
// guestops model's clone is customized as a spawn's, a cloud-init one's
// metadata carries the static address (nil: no customization, DHCP
// metadata). A placement naming a copy of the template (templateCopies)
// is cloned from its copy, as a spawn's clone is.
func (r *runner) cloneInto(ctx context.Context, t checkedTemplate, tref types.ManagedObjectReference, i int, p config.Placement, addr *address) (types.ManagedObjectReference, bool) {
	object := t.name + " -> " + p.Name
	start := time.Now()
	tref, from, ok := r.copyIn(ctx, t, tref, i, p, start)
	if !ok {
		return types.ManagedObjectReference{}, false
	}
	pool, err := r.vc.ResourcePoolAt(ctx, p.ResourcePool)
	if err != nil {
		r.outcome("clone", object, start, err, "").Needed = true
		return types.ManagedObjectReference{}, false
	}
	dsName := ""
	if len(p.Datastores) > 0 {
		dsName = p.Datastores[0]
	}
	ds, err := r.vc.LoadDatastore(ctx, dsName)
	if err != nil {
		r.outcome("clone", object, start, err, "").Needed = true
		return types.ManagedObjectReference{}, false
	}
	sstart := time.Now()
	space, err := r.vc.DatastoreSpace(ctx, ds)
	if err == nil && space.Name != "" {
		dsName = space.Name
	}
	if err != nil {
		r.outcome("datastore space", p.Name+" "+dsName, sstart, err, "grant System.Read on the datastore").Needed = true
	} else {
		res := r.add("datastore space", p.Name+" "+space.Name, sstart, Pass,
			fmt.Sprintf("free %.1f GB of %.1f GB", float64(space.FreeBytes)/(1<<30), float64(space.CapacityBytes)/(1<<30)))
		if !space.Accessible {
			res.Status, res.Fix = Fail, "the datastore is not accessible: bring it back or choose another"
			res.Needed = true
		}
	}
	start = time.Now()
	nonce := fmt.Sprintf("%s-%d", r.o.RunID, i)
	name := fmt.Sprintf("%s%s-%d-%s", FolderPrefix, r.o.RunID, i, t.name)
	var custom func([]types.BaseVirtualDevice) (*types.CustomizationSpec, error)
	if addr != nil && t.settings.Bootstrap == config.BootstrapGuestOps {
		custom = func(devices []types.BaseVirtualDevice) (*types.CustomizationSpec, error) {
			return customizationOf(devices, name, t, *addr)
		}
	}
	spec, mode, why, err := r.cloneSpec(ctx, tref, pool, ds, dsName, p.Name, nonce, custom)
	if err != nil {
		r.outcome("clone", object, start, err, "").Needed = true
		return types.ManagedObjectReference{}, false
	}
	if t.settings.Bootstrap == config.BootstrapCloudInit {
		var static *cloudinit.Address
		if addr != nil {
			static = cloudInitAddress(*addr)
		}
		opts, err := cloudInitOptions(name, t.settings.OS == config.OSWindows, static)
		if err != nil {
			r.outcome("clone", object, start, err, "").Needed = true
			return types.ManagedObjectReference{}, false
		}
		spec.Config.ExtraConfig = append(spec.Config.ExtraConfig, opts...)
	}
	vm, err := r.cloneVM(ctx, tref, name, spec)
	if err != nil {
		r.outcome("clone", object, start, err,
			"check that the placement's hosts reach the template's disks and the datastore has room").Needed = true
		return types.ManagedObjectReference{}, false
	}
	res := r.add("clone", object, start, Pass, from+why)
	r.measure(mode+" clone", res)
	return vm, true
}

// copyIn is the template a clone of t into placement p (the i-th) is
// made from: the copy p names in its templateCopies (config.Placement.
// CopyOf, the spawn's rule), else tref; from says which ("" for t
// itself). false: the copy is not found (a failed clone line naming its
// key).
func (r *runner) copyIn(ctx context.Context, t checkedTemplate, tref types.ManagedObjectReference, i int, p config.Placement, start time.Time) (types.ManagedObjectReference, string, bool) {
	c := p.CopyOf(t.name)
	if c == t.name {
		return tref, "", true
	}
	ref, err := r.vc.LoadVirtualMachine(ctx, c)
	if err != nil {
		key := fmt.Sprintf("%s.placements[%d].templateCopies", config.KeyPrefix, i)
		for j, tc := range p.TemplateCopies {
			if tc.Template == t.name {
				key = fmt.Sprintf("%s[%d].copy", key, j)
				break
			}
		}
		r.outcome("clone", t.name+" -> "+p.Name, start, err, "set "+key+" to a template of this vCenter (the copy of "+t.name+" on the placement's datastore)").Needed = true
		return types.ManagedObjectReference{}, "", false
	}
	return vcenter.MORef(ref), "from the placement's copy " + c + ": ", true
}

// lifecycle tries, on vm (a clone of t), what the hatchery does to a
// worker's VM, in its order; addr is the network its guest was given.
func (r *runner) lifecycle(ctx context.Context, t checkedTemplate, vm types.ManagedObjectReference, addr address) {
	r.guestinfo(ctx, t, vm)
	r.compareAndSwap(ctx, t, vm)
	start := time.Now()
	err := r.powerOn(ctx, vm)
	res := r.outcome("power on", t.name, start, err, "")
	res.Needed = true
	if err != nil {
		return
	}
	r.measure(latencyfile.OpPowerOn, res)
	ready := r.guest(ctx, t, vm, addr, start)
	if t.settings.CloneMode == config.CloneModeInstant {
		r.instant(ctx, t, vm, ready)
	}
	start = time.Now()
	err = r.suspend(ctx, vm)
	r.outcome("suspend", t.name, start, err, "grant VirtualMachine.Interact.Suspend on the hatchery's folder").Needed = len(r.cfg.WorkerProvisioning) > 0
	if err == nil {
		r.resume(ctx, t, vm, ready)
	}
	start = time.Now()
	r.outcome("power off", t.name, start, r.powerOff(ctx, vm), "grant VirtualMachine.Interact.PowerOff on the hatchery's folder").Needed = true
}

// resume powers the suspended vm on; when its guest was ready before,
// the resume passes once the guest is ready again (its time is the
// latency model's resume: power on of a suspended VM to guest ready).
func (r *runner) resume(ctx context.Context, t checkedTemplate, vm types.ManagedObjectReference, ready bool) {
	start := time.Now()
	needed := len(r.cfg.WorkerProvisioning) > 0
	err := r.powerOn(ctx, vm)
	if err == nil && ready {
		wctx, cancel := context.WithTimeout(ctx, r.o.GuestReadyTimeout)
		err = r.waitGuestReady(wctx, vm)
		cancel()
	}
	res := r.outcome("resume", t.name, start, err, "a suspended pool VM must resume: check the host's and the datastore's state")
	res.Needed = needed
	if err == nil && ready {
		res.Detail = "the guest is ready again"
		r.measure(latencyfile.OpResume, res)
	}
}

// guestinfo checks that the guestinfo value given at clone time is the
// VM's.
func (r *runner) guestinfo(ctx context.Context, t checkedTemplate, vm types.ManagedObjectReference) {
	start := time.Now()
	m, err := r.readVM(ctx, vm)
	if err != nil {
		r.outcome("guestinfo at clone", t.name, start, err, "").Needed = true
		return
	}
	got := extraConfig(m, guestinfoKey)
	if got == "" {
		res := r.add("guestinfo at clone", t.name, start, Fail, "the clone has no "+guestinfoKey+" (extraConfig) though the clone spec set it")
		res.Needed, res.Fix = true, "grant VirtualMachine.Config.AdvancedConfig on the hatchery's folder"
		return
	}
	r.add("guestinfo at clone", t.name, start, Pass, "read back through vCenter")
}

// compareAndSwap writes the VM's annotation with its changeVersion, sees
// the change through the session's change notifications (the delay is
// the line's detail), then writes again with the old changeVersion: a
// vCenter that refuses the second (ConcurrentAccess) arbitrates two
// writers, as a warm pool's claim needs.
func (r *runner) compareAndSwap(ctx context.Context, t checkedTemplate, vm types.ManagedObjectReference) {
	start := time.Now()
	m, err := r.readVM(ctx, vm)
	if err != nil {
		r.outcome("reconfigure", t.name, start, err, "").Needed = true
		return
	}
	old := m.ChangeVersion
	watching := r.watch(ctx, vm)
	start = time.Now()
	err = r.reconfigure(ctx, vm, recordOf(r.o.RunID)+" (reconfigured)", old)
	res := r.outcome("reconfigure", t.name, start, err, "grant VirtualMachine.Config.Annotation on the hatchery's folder")
	res.Needed = true
	if err != nil {
		return
	}
	r.measure(latencyfile.OpReconfigure, res)
	if watching {
		r.notified(ctx, t, vm, start)
	}
	start = time.Now()
	err = r.reconfigure(ctx, vm, recordOf(r.o.RunID)+" (stale writer)", old)
	needed := len(r.cfg.WorkerProvisioning) > 0
	switch {
	case err == nil:
		res := r.add("changeVersion swap", t.name, start, Unsupported, "vCenter accepted a reconfigure with a stale changeVersion")
		res.Needed, res.Fix = needed, "warm pools (workerProvisioning) need vCenter's changeVersion check: remove them"
	case vctypes.KindOf(err) == vctypes.FaultConcurrentAccess:
		r.add("changeVersion swap", t.name, start, Pass, "the stale writer was refused (ConcurrentAccess)")
	default:
		r.outcome("changeVersion swap", t.name, start, err, "").Needed = needed
	}
}

// watch starts the change watch on vm and reads its first report; false
// (with a line) when it cannot.
func (r *runner) watch(ctx context.Context, vm types.ManagedObjectReference) bool {
	start := time.Now()
	err := r.vc.ResetVirtualMachineWatch(ctx)
	if err == nil {
		err = r.vc.WatchVirtualMachines(ctx, []vctypes.Ref{vcenter.RefOf(vm)})
	}
	if err == nil {
		_, err = r.vc.VirtualMachineChanges(ctx)
	}
	if err != nil {
		r.outcome("change notification", "watch", start, vcenter.Classify(err), "").Needed = true
		return false
	}
	return true
}

// notified waits for the watch to report vm's changeVersion moved,
// since the write that started at since.
func (r *runner) notified(ctx context.Context, t checkedTemplate, vm types.ManagedObjectReference, since time.Time) {
	ctx, cancel := context.WithTimeout(ctx, r.o.NotifyTimeout)
	defer cancel()
	tick := time.NewTicker(notifyPoll)
	defer tick.Stop()
	for {
		ups, err := r.vc.VirtualMachineChanges(ctx)
		if err != nil {
			r.outcome("change notification", t.name, since, vcenter.Classify(err), "").Needed = true
			return
		}
		for _, u := range ups {
			if u.Ref != vcenter.RefOf(vm) {
				continue
			}
			for _, c := range u.Changes {
				if c.Name == "config.changeVersion" {
					r.add("change notification", t.name, since, Pass, fmt.Sprintf("config.changeVersion seen %s after the write began", time.Since(since).Round(time.Millisecond)))
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			res := r.add("change notification", t.name, since, Fail, fmt.Sprintf("no change notification within %s", r.o.NotifyTimeout))
			res.Needed, res.Fix = true, "the session's property collector does not report changes: check vCenter's health (vpxd) and any proxy between"
			return
		case <-tick.C:
		}
	}
}

// guest proves the guest side: VMware Tools' readiness for guest
// operations (learnt by trying: a template without Tools is unsupported),
// the guest's address (its customization's, or cloud-init's, addr) since
// its power on at poweredOn and, for a guestops model, a program started
// with its account.
func (r *runner) guest(ctx context.Context, t checkedTemplate, vm types.ManagedObjectReference, addr address, poweredOn time.Time) bool {
	start := time.Now()
	guestops := t.settings.Bootstrap == config.BootstrapGuestOps
	status, err := r.toolsStatus(ctx, vm)
	if err != nil {
		r.outcome("guest ready", t.name, start, err, "").Needed = guestops
		return false
	}
	if status == types.VirtualMachineToolsStatusToolsNotInstalled {
		res := r.add("guest ready", t.name, start, Unsupported, "the template's guest has no VMware Tools (guest.toolsStatus toolsNotInstalled)")
		res.Needed, res.Fix = true, "install open-vm-tools (or VMware Tools) in the template and start it at boot"
		if guestops {
			// vCenter customizes a guest, and learns its address, through
			// VMware Tools: without them neither can happen.
			res := r.add("customization", t.name, start, Unsupported, "not tried: the guest has no VMware Tools, through which vCenter customizes it and reads its address")
			res.Needed, res.Fix = true, "install open-vm-tools (or VMware Tools) in the template"
			res = r.add("guest program", t.name, start, Unsupported, "not tried: the guest has no VMware Tools")
			res.Needed, res.Fix = true, "install open-vm-tools in the template"
		}
		return false
	}
	wctx, cancel := context.WithTimeout(ctx, r.o.GuestReadyTimeout)
	err = r.waitGuestReady(wctx, vm)
	cancel()
	if err != nil {
		res := r.outcome("guest ready", t.name, start, err, "")
		res.Needed = true
		if ctx.Err() == nil {
			res.Detail = fmt.Sprintf("guest operations not ready within %s (tools %s): %v", r.o.GuestReadyTimeout, status, err)
			res.Fix = "make VMware Tools start at the template's boot (open-vm-tools enabled), and check the guest boots"
		}
		return false
	}
	measured := time.Since(start)
	if guestops {
		if err := r.waitEnv(ctx, vm, t.auth(), t.settings.OS == config.OSWindows); err != nil {
			res := r.outcome("guest ready", t.name, start, err,
				"guest operations are ready but start no program: check the model's guest account (username, password) and VMware Tools")
			res.Needed = true
			return false
		}
	}
	res := r.add("guest ready", t.name, start, Pass, "")
	r.measured[latencyfile.OpGuestReady] = append(r.measured[latencyfile.OpGuestReady], measured)
	if guestops {
		res.Detail = "guest operations ready and the spawn's probe started in the guest"
	}
	if t.settings.Bootstrap == config.BootstrapCloudInit {
		r.cloudInit(ctx, t, vm, addr)
	}
	if !guestops {
		return true
	}
	r.customization(ctx, t, vm, addr, poweredOn)
	r.program(ctx, t, vm)
	r.guestinfoInGuest(ctx, t, vm)
	r.apiFromGuest(ctx, t, vm)
	return true
}

// cloudInit waits for the guest of a cloud-init model, booted with the
// datasource's guestinfo (addr's static address in its network config,
// else DHCP), to report the address it took (guest.WaitIP, the spawn's
// wait): the metadata applied and the guest reporting back.
func (r *runner) cloudInit(ctx context.Context, t checkedTemplate, vm types.ManagedObjectReference, addr address) {
	start := time.Now()
	ip, err := r.waitIP(ctx, vm, addr.ip(), r.o.GuestReadyTimeout)
	if err != nil {
		res := r.outcome("cloud-init", t.name, start, err, "")
		res.Needed = true
		if ctx.Err() == nil {
			res.Fix = "install cloud-init with its VMware datasource (guestinfo) in the template, and a DHCP server on its network or iprange"
			if addr.lease != nil {
				res.Fix = "install cloud-init with its VMware datasource (guestinfo) in the template; iprange's gateway, mask and network must be the VMs' network's"
			}
		}
		return
	}
	r.add("cloud-init", t.name, start, Pass, "the guest applied the guestinfo metadata ("+addr.how()+") and reported "+ip)
}

// instant forks a child from the running vm and checks the child's own
// identity: its own name and its own guestinfo value.
func (r *runner) instant(ctx context.Context, t checkedTemplate, vm types.ManagedObjectReference, ready bool) {
	start := time.Now()
	name := FolderPrefix + r.o.RunID + "-instant-" + t.name
	nonce := r.o.RunID + "-instant"
	child, err := r.instantClone(ctx, vm, name, nonce)
	forked := time.Since(start)
	if err != nil {
		r.outcome("instant clone", t.name, start, err,
			"instant clones need vSphere 6.7+ and a template whose guest allows them: set the model's cloneMode to linked").Needed = true
		return
	}
	m, err := r.readVM(ctx, child)
	switch {
	case err != nil:
		r.outcome("instant clone", t.name, start, err, "").Needed = true
	case m.Name != name || extraConfig(m, guestinfoKey) != nonce:
		res := r.add("instant clone", t.name, start, Fail, fmt.Sprintf("the child %q does not carry its own name and guestinfo", m.Name))
		res.Needed = true
	case !ready:
		r.add("instant clone", t.name, start, Pass, "child "+name+" with its own guestinfo")
		r.measured[latencyfile.OpInstantCloneTask] = append(r.measured[latencyfile.OpInstantCloneTask], forked)
	default:
		// The parent's guest ran: the child's must take its own identity
		// and answer (its re-identification).
		wctx, cancel := context.WithTimeout(ctx, r.o.GuestReadyTimeout)
		err := r.waitGuestReady(wctx, child)
		cancel()
		if err != nil {
			res := r.outcome("instant clone", t.name, start, err, "the child's guest did not answer after the fork: check the template's guest customization for instant clones")
			res.Needed = true
			return
		}
		r.add("instant clone", t.name, start, Pass, "child "+name+" with its own guestinfo, its guest ready")
		r.measured[latencyfile.OpInstantCloneTask] = append(r.measured[latencyfile.OpInstantCloneTask], forked)
		r.measured[latencyfile.OpInstantReidentify] = append(r.measured[latencyfile.OpInstantReidentify], time.Since(start)-forked)
	}
}
