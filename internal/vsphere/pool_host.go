package vsphere

import (
	"context"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/modelref"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/internal/warmpool"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// poolHost is the hatchery as the warm pool sees it (warmpool.Host): the
// registration of V1 models, the hatchery's alone. The pool's writes on
// its VMs go through the custody both hold (internal/custody, custody.go).
type poolHost struct{ h *HatcheryVSphere }

func (p poolHost) NeedRegistration(ctx context.Context, m *sdk.Model) bool {
	return p.h.NeedRegistration(ctx, m)
}

// poolClone is the hatchery's clone as the warm pool takes it
// (warmpool.CloneFunc): the new VM's reference in the project's
// vocabulary, the error's fault classified (vcenter.Classify).
func poolClone(clone func(ctx context.Context, template modelref.Template, vmName string, annot *inventory.Annotation, flavor *config.Flavor) (vctypes.Ref, error)) warmpool.CloneFunc {
	return func(ctx context.Context, template modelref.Template, vmName string, annot *inventory.Annotation, flavor *config.Flavor) (vctypes.Ref, error) {
		ref, err := clone(ctx, template, vmName, annot, flavor)
		return ref, vcenter.Classify(err)
	}
}
