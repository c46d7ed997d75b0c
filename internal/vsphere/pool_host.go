package vsphere

import (
	"context"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/clonespec"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/custody"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/internal/warmpool"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// The custody's and the warm pool's port is the clone-spec builder's
// adapter of vcenter.Port.
var (
	_ custody.Port  = clonespec.VMPort{}
	_ warmpool.Port = clonespec.VMPort{}
)

// poolHost is the hatchery as the warm pool sees it (warmpool.Host): the
// registration of V1 models, the hatchery's alone. The pool's writes on
// its VMs go through the custody both hold (internal/custody).
type poolHost struct{ h *HatcheryVSphere }

func (p poolHost) NeedRegistration(ctx context.Context, m *sdk.Model) bool {
	return p.h.NeedRegistration(ctx, m)
}

func (p poolHost) ModelTemplate(vms []inventory.VM, m *sdk.Model) (inventory.VM, bool) {
	return p.h.findModelTemplate(vms, m)
}

// poolClone is the hatchery's clone as the warm pool takes it
// (warmpool.CloneFunc): the new VM's reference in the project's
// vocabulary, the error's fault classified (vcenter.Classify).
func poolClone(clone func(ctx context.Context, templateName, vmName string, annot *inventory.Annotation, flavor *config.Flavor) (types.ManagedObjectReference, error)) warmpool.CloneFunc {
	return func(ctx context.Context, templateName, vmName string, annot *inventory.Annotation, flavor *config.Flavor) (vctypes.Ref, error) {
		ref, err := clone(ctx, templateName, vmName, annot, flavor)
		return vcenter.RefOf(ref), vcenter.Classify(err)
	}
}

// markToDelete marks the VM named name for deletion
// (custody.Custody.MarkToDelete); it reports whether the mark is new.
func (h *HatcheryVSphere) markToDelete(name string) bool { return h.custody.MarkToDelete(name) }

// deleteServer powers off and destroys one VM of ours, refusing any other
// (custody.Custody.Delete, docs/design.md#ownership).
func (h *HatcheryVSphere) deleteServer(ctx context.Context, vm inventory.VM) error {
	return h.custody.Delete(ctx, vm)
}

// writeAnnotation writes annot (Notes and mirror) on vm, a VM of ours
// (custody.Custody.WriteRecord).
func (h *HatcheryVSphere) writeAnnotation(ctx context.Context, vm types.ManagedObjectReference, annot *inventory.Annotation) error {
	return h.custody.WriteRecord(ctx, vcenter.RefOf(vm), annot)
}

// scrubUserdata removes the userdata (and the worker token in it) from vm,
// a VM of ours named name (custody.Custody.ScrubUserdata); why says what
// triggered it, for the log.
func (h *HatcheryVSphere) scrubUserdata(ctx context.Context, vm types.ManagedObjectReference, name, why string) {
	h.custody.ScrubUserdata(ctx, vcenter.RefOf(vm), name, why)
}
