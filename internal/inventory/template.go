package inventory

import "github.com/cds-contrib/hatchery-vsphere/internal/modelref"

// Candidate is v as internal/modelref's rule reads it, for hatchery.
func (v VM) Candidate(hatchery string) modelref.Candidate {
	return modelref.Candidate{
		Name:          v.Name,
		IsTemplate:    v.Template,
		Ours:          v.OwnedBy(hatchery),
		ModelTemplate: v.Annotation != nil && v.Annotation.Model,
	}
}

// FindTemplate returns the first VM of vms that is t for hatchery
// (modelref.Template.Is); false when none is.
func FindTemplate(vms []VM, hatchery string, t modelref.Template) (VM, bool) {
	for _, v := range vms {
		if t.Is(v.Candidate(hatchery)) {
			return v, true
		}
	}
	return VM{}, false
}
