package vcheck

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/clonespec"
	"github.com/cds-contrib/hatchery-vsphere/internal/cloudinit"
	"github.com/cds-contrib/hatchery-vsphere/internal/guest"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// The check's calls of the vCenter port's VM methods, in one file: the
// port moves these signatures to internal/vctypes (docs/architecture.md,
// "The port's layout"), and only this file follows. Every error
// leaves classified (vcenter.Classify).

// guestinfoKey is the guestinfo property a clone is given, read back to
// prove that guestinfo written at clone time reaches the VM.
const guestinfoKey = "guestinfo.hatchery-vsphere-check"

// cloneSpec is the clone request of template into the scratch folder at
// pool and datastore ds (named dsName) of placement (ds zero: the
// template's), powered off, linked when the template allows it and its
// disks are on ds (clonespec.PlacementCloneMode, the spawn's rule;
// TemplateCloneMode without a datastore), with the run's record and a
// guestinfo value; the mode and what to say of it. custom, when set,
// gives the clone's guest customization from the template's number of
// network cards. The adapter builds the specification
// (vctypes.Port.CloneVirtualMachine).
func (r *runner) cloneSpec(ctx context.Context, template vctypes.Ref, pool, ds vctypes.Ref, dsName, placement, nonce string,
	custom func(nics int) (*vctypes.Customization, error)) (vctypes.Clone, string, string, error) {
	t, err := r.vc.LoadTemplate(ctx, template)
	if err != nil {
		return vctypes.Clone{}, "", "", vcenter.Classify(err)
	}
	mode, snap, reason := clonespec.TemplateCloneMode(t, r.cfg.LinkedCloneSnapshot)
	if ds.Value != "" {
		mode, snap, reason = clonespec.PlacementCloneMode(t, r.cfg.LinkedCloneSnapshot, ds, dsName, placement)
	}
	req := vctypes.Clone{
		Template:  template,
		Folder:    r.scratch,
		Pool:      pool,
		Datastore: ds,
		Record:    vctypes.Record{Notes: recordOf(r.o.RunID)},
		Options: []vctypes.Option{
			{Key: guestinfoKey, Value: nonce},
			{Key: RecordKey, Value: recordOf(r.o.RunID)},
		},
	}
	if custom != nil {
		if req.Customization, err = custom(t.NICs); err != nil {
			return vctypes.Clone{}, "", "", err
		}
	}
	if mode == clonespec.ModeLinked {
		req.Snapshot = snap
		return req, mode, "linked clone", nil
	}
	return req, mode, reason, nil
}

// cloneVM clones req's template under name into the scratch folder.
func (r *runner) cloneVM(ctx context.Context, name string, req vctypes.Clone) (vctypes.Ref, error) {
	req.Name = name
	ref, err := r.vc.CloneVirtualMachine(ctx, req)
	if err != nil {
		return vctypes.Ref{}, vcenter.Classify(err)
	}
	r.vms = append(r.vms, vmRef{ref: ref, name: name})
	return ref, nil
}

// readVM reads the VM's properties (vim.VMProperties).
func (r *runner) readVM(ctx context.Context, vm vctypes.Ref) (vctypes.VMInfo, error) {
	vms, err := r.vc.RetrieveVirtualMachines(ctx, []vctypes.Ref{vm})
	if err != nil {
		return vctypes.VMInfo{}, vcenter.Classify(err)
	}
	if len(vms) == 0 {
		return vctypes.VMInfo{}, fmt.Errorf("vm %s: gone", vm.Value)
	}
	return vms[0], nil
}

// reconfigure writes the annotation with the compare-and-swap on
// changeVersion, a change in the project's terms (vctypes.ConfigChange):
// the compare-and-swap a warm pool's claim relies on.
func (r *runner) reconfigure(ctx context.Context, vm vctypes.Ref, annotation, changeVersion string) error {
	return r.vc.ReconfigureVirtualMachine(ctx, vm, vctypes.ConfigChange{ChangeVersion: changeVersion, Notes: &annotation})
}

// powerOn powers the VM on (or resumes it).
func (r *runner) powerOn(ctx context.Context, vm vctypes.Ref) error {
	return vcenter.Classify(r.vc.StartVirtualMachine(ctx, vm))
}

// suspend suspends the VM.
func (r *runner) suspend(ctx context.Context, vm vctypes.Ref) error {
	return vcenter.Classify(r.vc.SuspendVirtualMachine(ctx, vm))
}

// powerOff powers the VM off.
func (r *runner) powerOff(ctx context.Context, vm vctypes.Ref) error {
	return vcenter.Classify(r.vc.ShutdownVirtualMachine(ctx, vm))
}

// destroy powers off and destroys vm. The callers read vm's record
// first (removeFolder): the check destroys no VM without it.
func (r *runner) destroy(ctx context.Context, vm vctypes.Ref) error {
	if err := r.powerOff(ctx, vm); err != nil && vctypes.KindOf(err) != vctypes.FaultNotFound {
		return err
	}
	return vcenter.Classify(r.vc.DestroyVirtualMachine(ctx, vm))
}

// toolsStatus reads the guest's tools status.
func (r *runner) toolsStatus(ctx context.Context, vm vctypes.Ref) (vctypes.ToolsStatus, error) {
	return r.vc.GuestToolsStatus(ctx, vm)
}

// waitGuestReady waits for guest operations to be ready.
func (r *runner) waitGuestReady(ctx context.Context, vm vctypes.Ref) error {
	return vcenter.Classify(r.vc.WaitForGuestOperationsReady(ctx, vm))
}

// startProgram starts p in the guest with auth; its pid.
func (r *runner) startProgram(ctx context.Context, vm vctypes.Ref, auth *vctypes.GuestAuth, p vctypes.GuestProgram) (int64, error) {
	pid, err := r.vc.StartProgramInGuest(ctx, vm, auth, p)
	return pid, vcenter.Classify(err)
}

// waitEnv runs the spawn's own probe of process starts in the guest
// (guest.Starter.WaitEnv: `env`, PowerShell on Windows, retried until it
// starts; a refused login at once): the readiness rule of every spawn,
// the quarantine's probe spawn included.
func (r *runner) waitEnv(ctx context.Context, vm vctypes.Ref, auth *vctypes.GuestAuth, windows bool) error {
	to := guest.Readiness
	s := guest.Starter{Port: r.vc, Log: r.log, Windows: windows, Timeouts: &to}
	return s.WaitEnv(ctx, vm, guest.Access{Auth: auth})
}

// waitIP waits at most timeout for the guest to report an IPv4 address
// (expected when set), the spawn's own wait (guest.WaitIP).
func (r *runner) waitIP(ctx context.Context, vm vctypes.Ref, expected string, timeout time.Duration) (string, error) {
	ip, err := guest.WaitIP(ctx, r.vc, vm, expected, timeout)
	return ip, vcenter.Classify(err)
}

// usedAddresses are the addresses the inventory's VMs hold (recorded or
// reported by their guests: inventory.UsedBy, what a spawn's pick
// skips).
func (r *runner) usedAddresses(ctx context.Context) (map[netip.Addr]bool, error) {
	listed, err := r.vc.ListVirtualMachines(ctx)
	if err != nil {
		return nil, vcenter.Classify(err)
	}
	vms := make([]inventory.VM, 0, len(listed))
	for _, o := range listed {
		vms = append(vms, inventory.VMFromInfo(o))
	}
	return inventory.UsedBy(vms), nil
}

// cloudInitOptions are the guestinfo of cloud-init's VMware datasource
// (internal/cloudinit, the documents a worker's VM is given) for the VM
// name: its instance id and hostname, addr's static address (nil: DHCP),
// a userdata whose script does nothing.
func cloudInitOptions(name string, windows bool, addr *cloudinit.Address) ([]vctypes.Option, error) {
	return cloudinit.Options(name, name, addr, cloudinit.Boot{Script: "exit 0", Windows: windows})
}

// programExit reads whether the guest program pid ended and its exit
// code.
func (r *runner) programExit(ctx context.Context, vm vctypes.Ref, auth *vctypes.GuestAuth, pid int64) (int32, bool, error) {
	return r.vc.GuestProgramExit(ctx, vm, auth, pid)
}

// instantClone forks name from the running parent into the scratch
// folder with a guestinfo value of its own.
func (r *runner) instantClone(ctx context.Context, parent vctypes.Ref, name, nonce string) (vctypes.Ref, error) {
	req := vctypes.InstantClone{Name: name, Folder: r.scratch, Options: []vctypes.Option{
		{Key: guestinfoKey, Value: nonce},
		{Key: RecordKey, Value: recordOf(r.o.RunID)},
	}}
	ref, err := r.vc.InstantCloneVirtualMachine(ctx, parent, req)
	if err != nil {
		return vctypes.Ref{}, vcenter.Classify(err)
	}
	r.vms = append(r.vms, vmRef{ref: ref, name: name})
	return ref, nil
}

// extraConfig is the value of key in vm's extraConfig.
func extraConfig(vm vctypes.VMInfo, key string) string {
	s, _ := vctypes.OptionValue(vm.Options, key)
	return s
}

// maxOutput is the most of a guest file the check reads: its programs
// write one word.
const maxOutput = 4096

// readGuestFile reads the file path in vm's guest with auth, the way
// vCenter hands a guest's files out (vcenter.Client.ReadGuestFile:
// InitiateFileTransferFromGuest, then an HTTPS GET of the URL it gives),
// then deletes it (DeleteGuestFile; a failed deletion is logged: the file
// dies with the scratch VM). Both are bounded by the adapter.
func (r *runner) readGuestFile(ctx context.Context, vm vctypes.Ref, auth *vctypes.GuestAuth, path string) (string, error) {
	b, err := r.vc.ReadGuestFile(ctx, vm, auth, path, maxOutput)
	if derr := r.vc.DeleteGuestFile(context.WithoutCancel(ctx), vm, auth, path); derr != nil {
		r.log.Info("vcenter check could not delete a file in a scratch guest", logkey.VM, vm.Value, logkey.Detail, path, logkey.Err, derr)
	}
	return string(b), err
}
