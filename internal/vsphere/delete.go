package vsphere

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/cds-contrib/hatchery-vsphere/sdk/workerpool"
	"github.com/vmware/govmomi/vim25/types"
)

// errDeleteInProgress means another loop is deleting the same VM now.
var errDeleteInProgress = errors.New("deletion already in progress")

// markToDelete records that the VM named name (ours) must be destroyed; the
// next cleanup pass powers it off and destroys it, retrying until it is gone
// or until it has been missing from the inventory for deleteMarkAbsentTTL.
// It reports whether the mark is new: a VM already marked or being deleted
// stays as it is.
func (h *HatcheryVSphere) markToDelete(name string) bool {
	_, err := h.life.MoveFrom(name, lifecycle.Markable(), lifecycle.Marked)
	return err == nil
}

// deleteMarkAbsentTTL is how long a delete mark survives while its VM is
// missing from every inventory the cleanup reads: a clone that failed with
// a fault marks its name although no VM may exist. Longer than the clone
// task timeout (10 min), so a clone whose outcome was unknown has had time
// to show its VM; a VM appearing later still carries our annotation with
// no worker start, and the awol rules remove it after the registration TTL.
const deleteMarkAbsentTTL = 15 * time.Minute

// dropAbsentDeleteMarks forgets the delete marks of names that vms (a
// fresh listing) and the listings before it have not shown for
// deleteMarkAbsentTTL, and the Destroyed entries of VMs vms no longer
// shows. Only a Marked entry is ever dropped: a name being
// cloned, provisioned, claimed, prepared or deleted now is in another
// phase, and its VM may not be listed yet.
func (h *HatcheryVSphere) dropAbsentDeleteMarks(vms []inventory.VM) {
	listed := make(map[string]bool, len(vms))
	for _, v := range vms {
		listed[v.Name] = true
	}
	now := h.now()
	listedRefs := make(map[string]bool, len(vms))
	for _, v := range vms {
		listedRefs[v.Ref.Value] = true
	}
	for _, e := range h.life.List(lifecycle.Destroyed) {
		if listedRefs[e.Ref] {
			continue
		}
		if err := h.life.Drop(e.Name, lifecycle.Destroyed, lifecycle.WithRef(e.Ref)); err != nil {
			// Deleted again since the listing (a stale snapshot): that
			// phase stands.
			h.log.Debug("destroyed entry kept", logkey.VM, e.Name, logkey.Err, err)
		}
	}
	for _, e := range h.life.List(lifecycle.Marked) {
		// A VM marked under one name may be listed under the other (a
		// claim whose rename's outcome was unknown): its reference counts.
		d := h.life.Absent(lifecycle.VM{Ref: e.Ref, Name: e.Name}, listed[e.Name] || (e.Ref != "" && listedRefs[e.Ref]), now)
		if d < deleteMarkAbsentTTL {
			continue
		}
		if h.life.Move(e.Name, lifecycle.Marked, lifecycle.Gone, lifecycle.WithRef(e.Ref)) == nil {
			h.log.Info("delete mark dropped", logkey.VM, e.Name, logkey.Detail, fmt.Sprintf("no such vm in the inventory for %s", d.Round(time.Second)))
		}
	}
}

// deleteServer powers off and destroys one VM of ours (docs/design.md#ownership). It
// refuses a VM that does not carry this hatchery's ownership record and any
// template but this hatchery's own model template. For a registration VM
// (register- prefix or RegisterOnly record) whose registration did not
// succeed, it reports the spawn error to the API first. The VM stays marked for deletion until the destroy succeeds, so a
// failure is retried by the next cleanup pass.
func (h *HatcheryVSphere) deleteServer(ctx context.Context, vm inventory.VM) error {
	if !vm.OwnedBy(h.Name()) {
		h.log.Error("refusing to delete vm", logkey.VM, vm.Name, logkey.Detail, "not owned by this hatchery")
		return fmt.Errorf("delete vm %q: not owned by hatchery %q", vm.Name, h.Name())
	}
	if vm.Template && !vm.Annotation.Model {
		h.log.Error("refusing to delete vm", logkey.VM, vm.Name, logkey.Detail, "template that is not our model template")
		return fmt.Errorf("delete vm %q: a template that is not a model template of hatchery %q", vm.Name, h.Name())
	}
	switch prev, err := h.life.MoveFrom(vm.Name, lifecycle.Deletable(), lifecycle.Deleting, lifecycle.WithRef(vm.Ref.Value)); {
	case prev == lifecycle.Deleting:
		return fmt.Errorf("delete vm %q: %w", vm.Name, errDeleteInProgress)
	case err != nil:
		return fmt.Errorf("delete vm %q: %w", vm.Name, err)
	}
	destroyed := false
	defer func() {
		if !destroyed {
			// Still marked: a failure is retried by the next cleanup pass.
			h.life.Must(vm.Name, lifecycle.Deleting, lifecycle.Marked, lifecycle.WithRef(vm.Ref.Value))
		}
	}()

	if vm.HasPrefix(workerpool.RegisterPrefix) || vm.Annotation.RegisterOnly {
		h.reportRegistrationFailure(ctx, vm)
	}

	obj := vm.Ref
	defer h.inv.Invalidate() // even a failed task may have changed the VM
	if vm.PowerState != types.VirtualMachinePowerStatePoweredOff {
		// A VM gone already (ManagedObjectNotFound: the other instance of
		// this hatchery destroyed it first) is not an error: the destroy
		// below answers it as done.
		if err := h.vs.ShutdownVirtualMachine(ctx, obj); err != nil && vcenter.FaultKindOf(err) != vctypes.FaultNotFound {
			return fmt.Errorf("delete vm %q: power off: %w", vm.Name, err)
		}
	}
	err := h.vs.DestroyVirtualMachine(ctx, obj)
	if err != nil && vcenter.FaultKindOf(err) == vctypes.FaultInvalidPowerState {
		// The listing was older than the VM's power state: power off, retry once.
		if serr := h.vs.ShutdownVirtualMachine(ctx, obj); serr != nil {
			return fmt.Errorf("delete vm %q: power off: %w", vm.Name, serr)
		}
		err = h.vs.DestroyVirtualMachine(ctx, obj)
	}
	if err != nil {
		return fmt.Errorf("delete vm %q: destroy: %w", vm.Name, err)
	}
	destroyed = true
	// A snapshot taken before may still show it: never offered again
	// until a listing no longer shows it (dropAbsentDeleteMarks).
	h.life.Must(vm.Name, lifecycle.Deleting, lifecycle.Destroyed, lifecycle.WithRef(vm.Ref.Value))
	if ip := vm.Annotation.IPAddress; ip != "" {
		// The address is free again: drop the reservation its clone made
		// (if still its own), which would otherwise hold it until
		// ippool.ReservationTTL.
		h.ips.Release(ip, vm.Name)
	}
	return nil
}

// reportRegistrationFailure tells the API that the registration of a V1
// model failed when the register- VM goes away while the model still needs
// registration (or was last registered before this VM was created). Any
// API error is logged: it never blocks the deletion.
func (h *HatcheryVSphere) reportRegistrationFailure(ctx context.Context, vm inventory.VM) {
	path := vm.Annotation.WorkerModelPath
	if h.cds == nil || path == "" {
		return
	}
	ms, err := h.cds.WorkerModelsEnabled(ctx)
	if err != nil {
		h.log.Warn("registration outcome unknown", logkey.VM, vm.Name, logkey.Model, path, logkey.Err, err)
		return
	}
	m, ok := sdk.FindModel(ms, path)
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
	h.log.Info("reporting registration failure", logkey.VM, vm.Name, logkey.Model, path, logkey.Detail, "model still needs registration")
	if err := h.cds.WorkerModelSpawnError(ctx, group, name, form); err != nil {
		h.log.Warn("registration failure not reported", logkey.VM, vm.Name, logkey.Model, path, logkey.Err, err)
	}
}
