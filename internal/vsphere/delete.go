package vsphere

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/vim25/types"
)

// errDeleteInProgress means another loop is deleting the same VM now.
var errDeleteInProgress = errors.New("deletion already in progress")

// markToDelete records that the VM named name (ours) must be destroyed; the
// next cleanup pass powers it off and destroys it, retrying until it is gone
// or until it has been missing from the inventory for deleteMarkAbsentTTL.
func (h *HatcheryVSphere) markToDelete(name string) { h.toDelete.Add(name) }

// deleteMarkAbsentTTL is how long a delete mark survives while its VM is
// missing from every inventory the cleanup reads: a clone that failed with
// a fault marks its name although no VM may exist. Longer than the clone
// task timeout (10 min), so a clone whose outcome was unknown has had time
// to show its VM; a VM appearing later still carries our annotation with
// no worker start, and the awol rules remove it after the registration TTL.
const deleteMarkAbsentTTL = 15 * time.Minute

// absentMarks remembers since when each VM marked for deletion has been
// missing from the inventory. Only the awol cleanup pass uses it.
type absentMarks struct {
	mu    sync.Mutex
	since map[string]time.Time
}

func newAbsentMarks() *absentMarks { return &absentMarks{since: map[string]time.Time{}} }

// dropAbsentDeleteMarks forgets the delete marks of names that vms (a
// fresh listing) and the listings before it have not shown for
// deleteMarkAbsentTTL. A name being cloned, provisioned, claimed or
// deleted now is never dropped: its VM may not be listed yet.
func (h *HatcheryVSphere) dropAbsentDeleteMarks(vms []VM) {
	listed := make(map[string]bool, len(vms))
	for _, v := range vms {
		listed[v.Name] = true
	}
	now := h.now()
	m := h.markAbsent
	m.mu.Lock()
	defer m.mu.Unlock()
	marked := map[string]bool{}
	for _, name := range h.toDelete.List() {
		marked[name] = true
		busy := h.cloning.Has(name) || h.provPending.Has(name) || h.provUsing.Has(name) ||
			h.prov.preparing.Has(name) || h.prov.deleting.Has(name)
		if listed[name] || busy {
			delete(m.since, name)
			continue
		}
		first, ok := m.since[name]
		if !ok {
			m.since[name] = now
			continue
		}
		if d := now.Sub(first); d >= deleteMarkAbsentTTL {
			h.toDelete.Remove(name)
			delete(m.since, name)
			h.log.Info("delete mark dropped", logkey.VM, name, logkey.Detail, fmt.Sprintf("no such vm in the inventory for %s", d.Round(time.Second)))
		}
	}
	for name := range m.since {
		if !marked[name] {
			delete(m.since, name)
		}
	}
}

// deleteServer powers off and destroys one VM of ours (docs/design.md#ownership). It
// refuses a VM that does not carry this hatchery's ownership record and any
// template but this hatchery's own model template. For a registration VM
// (register- prefix or RegisterOnly record) whose registration did not
// succeed, it reports the spawn error to the API first. The VM stays marked for deletion until the destroy succeeds, so a
// failure is retried by the next cleanup pass.
func (h *HatcheryVSphere) deleteServer(ctx context.Context, vm VM) error {
	if !vm.OwnedBy(h.Name()) {
		h.log.Error("refusing to delete vm", logkey.VM, vm.Name, logkey.Detail, "not owned by this hatchery")
		return fmt.Errorf("delete vm %q: not owned by hatchery %q", vm.Name, h.Name())
	}
	if vm.Template && !vm.Annotation.Model {
		h.log.Error("refusing to delete vm", logkey.VM, vm.Name, logkey.Detail, "template that is not our model template")
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

	obj := vm.Ref
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
		// The address is free again: drop the reservation its clone made
		// (if still its own), which would otherwise hold it until
		// ipReservationTTL.
		h.ips.release(ip, vm.Name)
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
		h.log.Warn("registration outcome unknown", logkey.VM, vm.Name, logkey.Model, path, logkey.Err, err)
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
	h.log.Info("reporting registration failure", logkey.VM, vm.Name, logkey.Model, path, logkey.Detail, "model still needs registration")
	if err := h.cds.WorkerModelSpawnError(ctx, group, name, form); err != nil {
		h.log.Warn("registration failure not reported", logkey.VM, vm.Name, logkey.Model, path, logkey.Err, err)
	}
}
