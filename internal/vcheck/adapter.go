package vcheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"

	govguest "github.com/vmware/govmomi/guest"
	"github.com/vmware/govmomi/vim25/soap"

	"github.com/vmware/govmomi/vim25/types"

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
// "Where the port goes next"), and only this file follows. Every error
// leaves classified (vcenter.Classify).

// guestinfoKey is the guestinfo property a clone is given, read back to
// prove that guestinfo written at clone time reaches the VM.
const guestinfoKey = "guestinfo.hatchery-vsphere-check"

// cloneSpec is the clone of template into the scratch folder at pool and
// datastore ds (named dsName) of placement (ds zero: the template's),
// powered off, linked when the template allows it and its disks are on ds
// (clonespec.PlacementCloneMode, the spawn's rule; TemplateCloneMode
// without a datastore), with the run's record and a guestinfo value; the
// mode and what to say of it. custom, when set, gives the clone's guest
// customization from the template's devices.
func (r *runner) cloneSpec(ctx context.Context, template types.ManagedObjectReference, pool, ds vctypes.Ref, dsName, placement, nonce string,
	custom func([]types.BaseVirtualDevice) (*types.CustomizationSpec, error)) (*types.VirtualMachineCloneSpec, string, string, error) {
	t, err := r.vc.LoadTemplate(ctx, template)
	if err != nil {
		return nil, "", "", vcenter.Classify(err)
	}
	mode, snap, reason := clonespec.TemplateCloneMode(t, r.cfg.LinkedCloneSnapshot)
	if ds.Value != "" {
		mode, snap, reason = clonespec.PlacementCloneMode(t, r.cfg.LinkedCloneSnapshot, vcenter.MORef(ds), dsName, placement)
	}
	spec := &types.VirtualMachineCloneSpec{
		Location: types.VirtualMachineRelocateSpec{
			DiskMoveType: string(types.VirtualMachineRelocateDiskMoveOptionsMoveAllDiskBackingsAndDisallowSharing),
		},
		Config: &types.VirtualMachineConfigSpec{
			Annotation: recordOf(r.o.RunID),
			ExtraConfig: []types.BaseOptionValue{
				&types.OptionValue{Key: guestinfoKey, Value: nonce},
				&types.OptionValue{Key: RecordKey, Value: recordOf(r.o.RunID)},
			},
		},
	}
	if custom != nil && t.Config != nil {
		if spec.Customization, err = custom(t.Config.Hardware.Device); err != nil {
			return nil, "", "", err
		}
	}
	if pool.Value != "" {
		p := vcenter.MORef(pool)
		spec.Location.Pool = &p
	}
	if ds.Value != "" {
		d := vcenter.MORef(ds)
		spec.Location.Datastore = &d
	}
	if mode == clonespec.ModeLinked {
		spec.Snapshot = snap
		spec.Location.DiskMoveType = string(types.VirtualMachineRelocateDiskMoveOptionsCreateNewChildDiskBacking)
		return spec, mode, "linked clone", nil
	}
	return spec, mode, reason, nil
}

// cloneVM clones template under name into the scratch folder.
func (r *runner) cloneVM(ctx context.Context, template types.ManagedObjectReference, name string, spec *types.VirtualMachineCloneSpec) (types.ManagedObjectReference, error) {
	ref, err := r.vc.CloneVirtualMachine(ctx, template, vcenter.MORef(r.scratch), name, spec)
	if err != nil {
		return types.ManagedObjectReference{}, vcenter.Classify(err)
	}
	r.vms = append(r.vms, vmRef{ref: *ref, name: name})
	return *ref, nil
}

// readVM reads the VM's properties (vcenter.VMProperties).
func (r *runner) readVM(ctx context.Context, vm types.ManagedObjectReference) (vctypes.VMInfo, error) {
	vms, err := r.vc.RetrieveVirtualMachines(ctx, []vctypes.Ref{vcenter.RefOf(vm)})
	if err != nil {
		return vctypes.VMInfo{}, vcenter.Classify(err)
	}
	if len(vms) == 0 {
		return vctypes.VMInfo{}, fmt.Errorf("vm %s: gone", vm.Value)
	}
	return vms[0], nil
}

// reconfigure writes the annotation with the compare-and-swap on
// changeVersion.
func (r *runner) reconfigure(ctx context.Context, vm types.ManagedObjectReference, annotation, changeVersion string) error {
	return vcenter.Classify(r.vc.ReconfigureVirtualMachine(ctx, vm, types.VirtualMachineConfigSpec{Annotation: annotation, ChangeVersion: changeVersion}))
}

// powerOn powers the VM on (or resumes it).
func (r *runner) powerOn(ctx context.Context, vm types.ManagedObjectReference) error {
	return vcenter.Classify(r.vc.StartVirtualMachine(ctx, vcenter.RefOf(vm)))
}

// suspend suspends the VM.
func (r *runner) suspend(ctx context.Context, vm types.ManagedObjectReference) error {
	return vcenter.Classify(r.vc.SuspendVirtualMachine(ctx, vcenter.RefOf(vm)))
}

// powerOff powers the VM off.
func (r *runner) powerOff(ctx context.Context, vm types.ManagedObjectReference) error {
	return vcenter.Classify(r.vc.ShutdownVirtualMachine(ctx, vcenter.RefOf(vm)))
}

// destroy powers off and destroys vm. The callers read vm's record
// first (removeFolder): the check destroys no VM without it.
func (r *runner) destroy(ctx context.Context, vm types.ManagedObjectReference) error {
	if err := r.powerOff(ctx, vm); err != nil && vctypes.KindOf(err) != vctypes.FaultNotFound {
		return err
	}
	return vcenter.Classify(r.vc.DestroyVirtualMachine(ctx, vcenter.RefOf(vm)))
}

// toolsStatus reads the guest's tools status.
func (r *runner) toolsStatus(ctx context.Context, vm types.ManagedObjectReference) (types.VirtualMachineToolsStatus, error) {
	return r.vc.GuestToolsStatus(ctx, vm)
}

// waitGuestReady waits for guest operations to be ready.
func (r *runner) waitGuestReady(ctx context.Context, vm types.ManagedObjectReference) error {
	return vcenter.Classify(r.vc.WaitForGuestOperationsReady(ctx, vcenter.RefOf(vm)))
}

// startProgram starts p in the guest with auth; its pid.
func (r *runner) startProgram(ctx context.Context, vm types.ManagedObjectReference, auth *vctypes.GuestAuth, p vctypes.GuestProgram) (int64, error) {
	pid, err := r.vc.StartProgramInGuest(ctx, vcenter.RefOf(vm), auth, p)
	return pid, vcenter.Classify(err)
}

// waitEnv runs the spawn's own probe of process starts in the guest
// (guest.Starter.WaitEnv: `env`, PowerShell on Windows, retried until it
// starts; a refused login at once): the readiness rule of every spawn,
// the quarantine's probe spawn included.
func (r *runner) waitEnv(ctx context.Context, vm types.ManagedObjectReference, auth *vctypes.GuestAuth, windows bool) error {
	to := guest.Readiness
	s := guest.Starter{Port: r.vc, Log: r.log, Windows: windows, Timeouts: &to}
	return s.WaitEnv(ctx, vcenter.RefOf(vm), guest.Access{Auth: auth})
}

// waitIP waits at most timeout for the guest to report an IPv4 address
// (expected when set), the spawn's own wait (guest.WaitIP).
func (r *runner) waitIP(ctx context.Context, vm types.ManagedObjectReference, expected string, timeout time.Duration) (string, error) {
	ip, err := guest.WaitIP(ctx, r.vc, vcenter.RefOf(vm), expected, timeout)
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
func cloudInitOptions(name string, windows bool, addr *cloudinit.Address) ([]types.BaseOptionValue, error) {
	opts, err := cloudinit.Options(name, name, addr, cloudinit.Boot{Script: "exit 0", Windows: windows})
	return vcenter.OptionValues(opts), err
}

// programExit reads whether the guest program pid ended and its exit
// code.
func (r *runner) programExit(ctx context.Context, vm types.ManagedObjectReference, auth *vctypes.GuestAuth, pid int64) (int32, bool, error) {
	return r.vc.GuestProgramExit(ctx, vm, vcenter.GuestAuthOf(auth), pid)
}

// instantClone forks name from the running parent into the scratch
// folder with a guestinfo value of its own.
func (r *runner) instantClone(ctx context.Context, parent types.ManagedObjectReference, name, nonce string) (types.ManagedObjectReference, error) {
	req := vctypes.InstantClone{Name: name, Folder: r.scratch, Options: []vctypes.Option{
		{Key: guestinfoKey, Value: nonce},
		{Key: RecordKey, Value: recordOf(r.o.RunID)},
	}}
	ref, err := r.vc.InstantCloneVirtualMachine(ctx, vcenter.RefOf(parent), req)
	if err != nil {
		return types.ManagedObjectReference{}, vcenter.Classify(err)
	}
	r.vms = append(r.vms, vmRef{ref: vcenter.MORef(ref), name: name})
	return vcenter.MORef(ref), nil
}

// extraConfig is the value of key in vm's extraConfig.
func extraConfig(vm vctypes.VMInfo, key string) string {
	s, _ := vctypes.OptionValue(vm.Options, key)
	return s
}

// outputTimeout bounds the read of a guest program's output: a file
// transfer's URL (InitiateFileTransferFromGuest), the download of a few
// bytes from the VM's host, and the file's deletion.
const outputTimeout = 30 * time.Second

// maxOutput is the most of a guest file the check reads: its programs
// write one word.
const maxOutput = 4096

// readGuestFile reads the file path in vm's guest with auth, the way
// vCenter hands a guest's files out (InitiateFileTransferFromGuest, then
// an HTTPS GET of the URL it gives), and deletes it (DeleteFileInGuest;
// a failed deletion is logged: the file dies with the scratch VM). The
// port has no guest file methods: the session's govmomi client
// (vcenter.Client.Vim25) reads it here, in the one file of the check's
// vCenter calls.
func (r *runner) readGuestFile(ctx context.Context, vm types.ManagedObjectReference, auth *vctypes.GuestAuth, path string) (string, error) {
	vim := r.vc.Vim25()
	if vim == nil {
		return "", errors.New("read guest file: not connected")
	}
	ctx, cancel := context.WithTimeout(ctx, outputTimeout)
	defer cancel()
	fm, err := govguest.NewOperationsManager(vim, vm).FileManager(ctx)
	if err != nil {
		return "", vcenter.Classify(fmt.Errorf("find guest file manager of vm %s: %w", vm.Value, err))
	}
	a := vcenter.GuestAuthOf(auth)
	info, err := fm.InitiateFileTransferFromGuest(ctx, a, path)
	if err != nil {
		return "", vcenter.Classify(fmt.Errorf("transfer %s from the guest of vm %s: %w", path, vm.Value, err))
	}
	defer func() {
		if err := fm.DeleteFile(context.WithoutCancel(ctx), a, path); err != nil {
			r.log.Info("vcenter check left a file in a scratch guest", logkey.VM, vm.Value, logkey.Detail, path, logkey.Err, err)
		}
	}()
	u, err := fm.TransferURL(ctx, info.Url)
	if err != nil {
		return "", vcenter.Classify(fmt.Errorf("transfer %s from the guest of vm %s: %w", path, vm.Value, err))
	}
	body, _, err := vim.Download(ctx, u, &soap.DefaultDownload)
	if err != nil {
		return "", fmt.Errorf("download %s from the guest of vm %s: %w", path, vm.Value, err)
	}
	defer body.Close()
	b, err := io.ReadAll(io.LimitReader(body, maxOutput))
	if err != nil {
		return "", fmt.Errorf("download %s from the guest of vm %s: %w", path, vm.Value, err)
	}
	return string(b), nil
}
