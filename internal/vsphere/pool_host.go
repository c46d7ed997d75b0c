package vsphere

import (
	"context"
	"log/slog"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/quarantine"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/vmware/govmomi/vim25/types"
)

// poolHost is the hatchery as the warm pool sees it (warmpool.Host): the
// steps the hatchery owns for every VM, pool or not.
type poolHost struct{ h *HatcheryVSphere }

func (p poolHost) MarkToDelete(name string) bool { return p.h.markToDelete(name) }

func (p poolHost) DeleteServer(ctx context.Context, vm inventory.VM) error {
	return p.h.deleteServer(ctx, vm)
}

func (p poolHost) WriteAnnotation(ctx context.Context, vm types.ManagedObjectReference, annot *inventory.Annotation) error {
	return p.h.writeAnnotation(ctx, vm, annot)
}

func (p poolHost) ScrubUserdata(ctx context.Context, vm types.ManagedObjectReference, name, why string) {
	p.h.scrubUserdata(ctx, vm, name, why)
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
