package vsphere

import (
	"context"
	"log/slog"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/modelref"
	"github.com/cds-contrib/hatchery-vsphere/internal/quarantine"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/internal/warmpool"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// poolHost is the hatchery as the warm pool sees it (warmpool.Host): the
// steps the hatchery owns for every VM, pool or not.
type poolHost struct{ h *HatcheryVSphere }

func (p poolHost) MarkToDelete(name string) bool { return p.h.markToDelete(name) }

func (p poolHost) DeleteServer(ctx context.Context, vm inventory.VM) error {
	return p.h.deleteServer(ctx, vm)
}

func (p poolHost) WriteAnnotation(ctx context.Context, vm vctypes.Ref, annot *inventory.Annotation) error {
	return p.h.writeAnnotation(ctx, vcenter.MORef(vm), annot)
}

func (p poolHost) ScrubUserdata(ctx context.Context, vm vctypes.Ref, name, why string) {
	p.h.scrubUserdata(ctx, vcenter.MORef(vm), name, why)
}

func (p poolHost) NeedRegistration(ctx context.Context, m *sdk.Model) bool {
	return p.h.NeedRegistration(ctx, m)
}

// BeginAttempt reads h.quar at each call: tests replace the book.
func (p poolHost) BeginAttempt(key string) (*quarantine.Attempt, string) {
	a, v := p.h.quar.Begin(key)
	if a == nil {
		return nil, refuseQuarantined(v).Detail
	}
	return a, ""
}

func (p poolHost) EndAttempt(ctx context.Context, a *quarantine.Attempt, log *slog.Logger, lifted string, err error) {
	_, _ = p.h.endAttempt(ctx, a, log, lifted, err)
}

// poolClone is the hatchery's clone as the warm pool takes it
// (warmpool.CloneFunc): the new VM's reference in the project's
// vocabulary, the error's fault classified (vcenter.Classify).
func poolClone(clone func(ctx context.Context, template modelref.Template, vmName string, annot *inventory.Annotation, flavor *config.Flavor) (types.ManagedObjectReference, error)) warmpool.CloneFunc {
	return func(ctx context.Context, template modelref.Template, vmName string, annot *inventory.Annotation, flavor *config.Flavor) (vctypes.Ref, error) {
		ref, err := clone(ctx, template, vmName, annot, flavor)
		return vcenter.RefOf(ref), vcenter.Classify(err)
	}
}
