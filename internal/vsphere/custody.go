package vsphere

import (
	"context"

	"github.com/cds-contrib/hatchery-vsphere/internal/custody"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/internal/warmpool"
)

// The hatchery's writes on its VMs are internal/custody's, shared with the
// warm pool; the methods below are the hatchery's calls of it with the
// references (vctypes.Ref) the spawn path holds.

// The custody's and the warm pool's port is vctypes.Port itself.
var (
	_ custody.Port  = vctypes.Port(nil)
	_ warmpool.Port = vctypes.Port(nil)
)

// markToDelete marks the VM named name for deletion
// (custody.Custody.MarkToDelete); it reports whether the mark is new.
func (h *HatcheryVSphere) markToDelete(name string) bool { return h.custody.MarkToDelete(name) }

// deleteServer destroys one VM of ours, refusing any other; p says whether
// a running VM is powered off first (custody.Custody.Delete,
// docs/design.md#ownership).
func (h *HatcheryVSphere) deleteServer(ctx context.Context, vm inventory.VM, p custody.Power) error {
	return h.custody.Delete(ctx, vm, p)
}

// writeAnnotation writes annot (Notes and mirror) on vm, a VM of ours
// (custody.Custody.WriteRecord).
func (h *HatcheryVSphere) writeAnnotation(ctx context.Context, vm vctypes.Ref, annot *inventory.Annotation) error {
	return h.custody.WriteRecord(ctx, vm, annot)
}

// scrubUserdata removes the userdata (and the worker token in it) from vm,
// a VM of ours named name (custody.Custody.ScrubUserdata); why says what
// triggered it, for the log.
func (h *HatcheryVSphere) scrubUserdata(ctx context.Context, vm vctypes.Ref, name, why string) {
	h.custody.ScrubUserdata(ctx, vm, name, why)
}
