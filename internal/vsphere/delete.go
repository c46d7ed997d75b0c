package vsphere

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/vim25/types"
)

// errDeleteInProgress means another loop is deleting the same VM now.
var errDeleteInProgress = errors.New("deletion already in progress")

// markToDelete records that the VM named name (ours) must be destroyed; the
// next cleanup pass powers it off and destroys it, retrying until it is gone.
func (h *HatcheryVSphere) markToDelete(name string) { h.toDelete.Add(name) }

// deleteServer powers off and destroys one VM of ours (001 §8.3). It
// refuses a VM that does not carry this hatchery's ownership record and any
// template but this hatchery's own model template. For a registration VM
// (register- prefix or RegisterOnly record) whose registration did not
// succeed, it reports the spawn error to the API first. The VM stays marked for deletion until the destroy succeeds, so a
// failure is retried by the next cleanup pass.
func (h *HatcheryVSphere) deleteServer(ctx context.Context, vm VM) error {
	if !vm.OwnedBy(h.Name()) {
		h.log.Error("refusing to delete vm", "vm", vm.Name, "reason", "not owned by this hatchery")
		return fmt.Errorf("delete vm %q: not owned by hatchery %q", vm.Name, h.Name())
	}
	if vm.Template && !vm.Annotation.Model {
		h.log.Error("refusing to delete vm", "vm", vm.Name, "reason", "template that is not our model template")
		return fmt.Errorf("delete vm %q: a template that is not a model template of hatchery %q", vm.Name, h.Name())
	}
	if !h.prov.deleting.Add(vm.Name) {
		return fmt.Errorf("delete vm %q: %w", vm.Name, errDeleteInProgress)
	}
	defer h.prov.deleting.Remove(vm.Name)
	h.markToDelete(vm.Name) // until destroyed: a failure is retried

	if vm.HasPrefix(registerPrefix) || vm.Annotation.RegisterOnly {
		h.reportRegistrationFailure(ctx, vm)
	}

	obj := h.vs.NewVirtualMachine(vm.Ref)
	defer h.inv.Invalidate() // even a failed task may have changed the VM
	if vm.PowerState != types.VirtualMachinePowerStatePoweredOff {
		if err := h.vs.ShutdownVirtualMachine(ctx, obj); err != nil {
			return fmt.Errorf("delete vm %q: power off: %w", vm.Name, err)
		}
	}
	err := h.vs.DestroyVirtualMachine(ctx, obj)
	if err != nil && fault.Is(err, &types.InvalidPowerState{}) {
		// The listing was older than the VM's power state: power off, retry once.
		if serr := h.vs.ShutdownVirtualMachine(ctx, obj); serr != nil {
			return fmt.Errorf("delete vm %q: power off: %w", vm.Name, serr)
		}
		err = h.vs.DestroyVirtualMachine(ctx, obj)
	}
	if err != nil {
		return fmt.Errorf("delete vm %q: destroy: %w", vm.Name, err)
	}
	h.toDelete.Remove(vm.Name)
	h.unrecorded.remove(vm.Name)
	if ip := vm.Annotation.IPAddress; ip != "" {
		// The address is free again: drop the reservation its clone made,
		// which would otherwise hold it until ipReservationTTL.
		h.ips.release(ip)
	}
	return nil
}

// reportRegistrationFailure tells the API that the registration of a V1
// model failed when the register- VM goes away while the model still needs
// registration (or was last registered before this VM was created). Any
// API error is logged: it never blocks the deletion.
func (h *HatcheryVSphere) reportRegistrationFailure(ctx context.Context, vm VM) {
	path := vm.Annotation.WorkerModelPath
	if h.cds == nil || path == "" {
		return
	}
	ms, err := h.cds.WorkerModelsEnabled(ctx)
	if err != nil {
		h.log.Warn("registration outcome unknown", "vm", vm.Name, "model", path, "reason", err.Error())
		return
	}
	m, ok := findEnabledModel(ms, path)
	if !ok {
		return
	}
	if !m.NeedRegistration && !m.LastRegistration.Before(vm.Annotation.Created) {
		return
	}
	group, name, ok := strings.Cut(path, "/")
	if !ok {
		group, name = "", path
	}
	form := sdk.SpawnErrorForm{
		Error: fmt.Sprintf("worker model %s: registration vm %s was deleted before the registration ended", path, vm.Name),
	}
	h.log.Info("reporting registration failure", "vm", vm.Name, "model", path, "reason", "model still needs registration")
	if err := h.cds.WorkerModelSpawnError(ctx, group, name, form); err != nil {
		h.log.Warn("registration failure not reported", "vm", vm.Name, "model", path, "reason", err.Error())
	}
}
