// Package modelref owns the one rule that says which vSphere template the
// VMs of a worker model are cloned from (docs/design.md#which-template), and
// which template a model's template is built from. The spawn, the warm
// pool, the admission's footprint estimate and the V1 registration all ask
// it; none of them computes a template name on its own. It imports only
// the SDK's model types.
package modelref

import (
	"strings"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// Template is the template a VM is cloned from: its name and whether only
// the template this hatchery built for a V1 model (by registration) is it.
type Template struct {
	// Name is the template's name in vCenter; "" when the model names none.
	Name string
	// Built is true for a V1 model's template: only a template this
	// hatchery owns and records as a model template (annotation
	// model: true) with that name is it. A V2 template is any template of
	// that name: the hatchery does not own it.
	Built bool
}

// Of is the template a worker of model is cloned from (a job's spawn, a
// warm-pool VM of the model): a V2 model's spec.image; for a V1 model this
// hatchery's template of the model, named BuiltName.
func Of(model sdk.WorkerStarterWorkerModel) Template {
	if model.IsV1() {
		return OfV1(model.ModelV1)
	}
	return Template{Name: model.VSphereSpec.Image}
}

// OfV1 is Of for a V1 model.
func OfV1(m *sdk.Model) Template {
	if m == nil {
		return Template{}
	}
	return Template{Name: BuiltName(m), Built: true}
}

// OfEntry is Of for a configuration entry naming a model (a warm-pool
// entry: modelPath for V1, modelVMWare for V2), without asking the API for
// the model: a V1 model path is "group/name", its template is named
// after the name.
func OfEntry(modelPath, modelVMWare string) Template {
	if modelVMWare != "" {
		return Template{Name: modelVMWare}
	}
	if modelPath == "" {
		return Template{}
	}
	return Template{Name: modelPath[strings.LastIndex(modelPath, "/")+1:], Built: true}
}

// BuiltName is the name of the template this hatchery builds for a V1
// model: the model's name (without its group).
func BuiltName(m *sdk.Model) string { return m.Name }

// BaseOf is the template a V1 model's own template is built from, which its
// registration clones: the model's image. A V2 model has none (zero).
func BaseOf(model sdk.WorkerStarterWorkerModel) Template {
	if !model.IsV1() {
		return Template{}
	}
	return Template{Name: model.ModelV1.ModelVirtualMachine.Image}
}

// Candidate is what the rule reads of a VM of the inventory.
type Candidate struct {
	// Name is the VM's name.
	Name string
	// IsTemplate is true for a template.
	IsTemplate bool
	// Ours is true when the VM's record names this hatchery.
	Ours bool
	// ModelTemplate is true when the VM's record says it is a V1 model's
	// template (annotation model: true).
	ModelTemplate bool
}

// Is tells whether c is t.
func (t Template) Is(c Candidate) bool {
	if t.Name == "" || c.Name != t.Name || !c.IsTemplate {
		return false
	}
	return !t.Built || (c.Ours && c.ModelTemplate)
}

// Key is the one name a worker model goes by in this hatchery: in the
// configuration's entries (guestCredentials, models, workerProvisioning),
// the warm pools and the quarantine book. A V1 model is keyed by its path
// ("group/name"), which the configuration names it by; a V2 model by its
// template (Of: spec.image), which its entries name.
type Key struct {
	// V1 is true for a V1 model.
	V1 bool
	// Model is the V1 model's path or the V2 model's template; "" when a
	// V2 model names no template.
	Model string
}

// KeyOf is model's key.
func KeyOf(model sdk.WorkerStarterWorkerModel) Key {
	if model.IsV1() {
		return Key{V1: true, Model: model.ModelV1.Path()}
	}
	return Key{Model: Of(model).Name}
}

// NamedBy tells whether a configuration entry naming modelPath (a V1
// model) and modelVMWare (a V2 model's template) names the model of k.
// A key with no model is named by no entry.
func (k Key) NamedBy(modelPath, modelVMWare string) bool {
	switch {
	case k.Model == "":
		return false
	case k.V1:
		return modelPath == k.Model
	}
	return modelVMWare == k.Model
}

// QuarantineKey is the quarantine book's key of what the model's VMs are
// made from: its template for a V2 model, the model for a V1 model, whose
// template this hatchery builds. The spawns and the warm pool's
// provisionings of one model share it.
func (k Key) QuarantineKey() string {
	if k.V1 {
		return "model " + k.Model
	}
	return "template " + k.Model
}
