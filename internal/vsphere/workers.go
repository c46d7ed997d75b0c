package vsphere

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/modelref"
	"github.com/cds-contrib/hatchery-vsphere/internal/warmpool"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// notReady returns an error wrapping hatchery.ErrNotReady while vCenter has
// not been reached for the first time (Options.Ready still open), nil once
// it has: a daemon starting before vCenter answers waits quietly instead of
// failing every call and warning about it.
func (h *HatcheryVSphere) notReady() error {
	if h.ready == nil {
		return nil
	}
	select {
	case <-h.ready:
		return nil
	default:
		return fmt.Errorf("%w: waiting for the first vcenter connection", hatchery.ErrNotReady)
	}
}

// WorkersStarted returns the names of our VMs that are workers
// (docs/design.md#workers-started): non-template VMs carrying this hatchery's ownership record, except
// the idle pre-provisioned ones (warmpool-*, and provision-* of earlier versions) and the
// instant-clone parents (docs/instant-clones.md: they count in capacity, not against maxWorker). VMs of other hatcheries and
// unannotated VMs never count against maxWorker.
func (h *HatcheryVSphere) WorkersStarted(ctx context.Context) ([]string, error) {
	if err := h.notReady(); err != nil {
		return nil, fmt.Errorf("list workers started: %w", err)
	}
	vms, err := h.inv.VMs(ctx)
	if err != nil {
		return nil, fmt.Errorf("list workers started: %w", err)
	}
	var out []string
	shown := make(map[string]bool, len(vms))
	for _, v := range vms {
		shown[v.Name] = true
		if v.Template || !v.OwnedBy(h.Name()) || warmpool.HasPoolName(v) || v.Annotation.InstantParent {
			continue
		}
		name := v.Name
		if v.Annotation.RegisterOnly && v.Annotation.WorkerName != "" {
			// A registration VM is "<model>-tmp" but its worker registers
			// with the API under the spawn's name ("register-…"): report
			// that name, so the framework counts it as registering and
			// matches it with the API's worker.
			name = v.Annotation.WorkerName
		}
		shown[name] = true
		out = append(out, name)
	}
	// Workers created since the inventory's last listing.
	recent := h.missingWorkers(shown, h.now())
	sort.Strings(recent)
	return append(out, recent...), nil
}

// modelLastModified is the model's user last modification as the unix
// seconds string kept in the template's annotation.
func modelLastModified(m *sdk.Model) string {
	return strconv.FormatInt(m.UserLastModified.Unix(), 10)
}

// findModelTemplate returns our template of a V1 model
// (modelref.OfV1): a template named after the model whose annotation is
// ours with Model set. Templates of other hatcheries or without annotation
// are never returned.
func (h *HatcheryVSphere) findModelTemplate(vms []inventory.VM, m *sdk.Model) (inventory.VM, bool) {
	return inventory.FindTemplate(vms, h.Name(), modelref.OfV1(m))
}

// NeedRegistration tells whether a V1 model's template must be (re)built
// (docs/design.md#v1-models): the model is flagged for registration, we have no template for
// it, or the template was built from an older version of the model. When
// the VMs cannot be listed it answers false: a registration started blind
// could not check for a template being built.
func (h *HatcheryVSphere) NeedRegistration(ctx context.Context, model *sdk.Model) bool {
	if model == nil {
		return false
	}
	log := h.log.With(logkey.Model, model.Path())
	if err := h.notReady(); err != nil {
		log.Info("model registration check deferred", logkey.Err, err)
		return false
	}
	if model.NeedRegistration {
		log.Info("model needs registration", logkey.Detail, "flagged by the api")
		return true
	}
	vms, err := h.inv.VMs(ctx)
	if err != nil {
		log.Warn("cannot check model registration", logkey.Err, err)
		return false
	}
	tmpl, ok := h.findModelTemplate(vms, model)
	if !ok {
		log.Info("model needs registration", logkey.Detail, "no template")
		return true
	}
	if got, want := tmpl.Annotation.WorkerModelLastModified, modelLastModified(model); got != want {
		log.Info("model needs registration", logkey.Detail, fmt.Sprintf("template built from version %s, model is %s", got, want))
		return true
	}
	return false
}
