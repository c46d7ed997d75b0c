package vsphere

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

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
