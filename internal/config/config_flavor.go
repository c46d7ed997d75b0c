package config

import (
	"fmt"
	"strings"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// FlavorName is a flavor name as the hatchery keeps it, in a flavor's
// definition and wherever one is referred to: lower case, without
// surrounding spaces. It is the one normalisation of flavor names:
// Normalize applies it to the configuration once, and a name from
// elsewhere (a job's request, a VM's record) goes through it before it is
// compared with the configuration's.
func FlavorName(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

// Normalize puts the configuration's flavor names (the flavors,
// defaultFlavor, the warm-pool entries' flavors) in FlavorName's form.
// The loader calls it; so does a hatchery built from a configuration made
// in code. It writes only the names not yet in that form, so a normalised
// configuration is never written.
func (c *Config) Normalize() {
	norm := func(s *string) {
		if n := FlavorName(*s); n != *s {
			*s = n
		}
	}
	for i := range c.Flavors {
		norm(&c.Flavors[i].Name)
	}
	norm(&c.DefaultFlavor)
	for i := range c.WorkerProvisioning {
		norm(&c.WorkerProvisioning[i].Flavor)
	}
}

// FlavorNamed returns a copy of the configured flavor called name (any
// case: FlavorName), nil when none is. The configuration is Normalized.
func (c *Config) FlavorNamed(name string) *Flavor {
	name = FlavorName(name)
	if name == "" {
		return nil
	}
	for _, f := range c.Flavors {
		if f.Name == name {
			return &f
		}
	}
	return nil
}

// UnknownFlavorError is returned when a job or model asks for a flavor the
// configuration does not define. It is a spawn error reported to the job
// (docs/design.md#flavor-resolution): there is never a silent fallback to
// another size.
type UnknownFlavorError struct {
	// Name is the flavor as it was asked for.
	Name string
	// Defined lists the configured flavor names, in configuration order.
	Defined []string
}

// Error names the flavor and the flavors that exist.
func (e *UnknownFlavorError) Error() string {
	defined := "none"
	if len(e.Defined) > 0 {
		defined = strings.Join(e.Defined, ", ")
	}
	return fmt.Sprintf("flavor %q is not defined in hatchery configuration (defined: %s)", e.Name, defined)
}

// ResolveFlavor is the flavor a worker of model gets for a job with reqs
// (docs/design.md#flavor-resolution): the name model.GetFlavor picks
// (the job's request, the model's flavor, defaultFlavor), looked up among
// the flavors; nil for none (the template's own size). An unknown name is
// an *UnknownFlavorError naming it. The result is a copy. It is the one
// resolution of a job's flavor: the admission resolves it, and the spawn
// builds the worker of the flavor the admission reserved.
func (c *Config) ResolveFlavor(model sdk.WorkerStarterWorkerModel, reqs []sdk.Requirement) (*Flavor, error) {
	name := strings.TrimSpace(model.GetFlavor(reqs, c.DefaultFlavor))
	if name == "" {
		return nil, nil
	}
	if f := c.FlavorNamed(name); f != nil {
		return f, nil
	}
	e := &UnknownFlavorError{Name: name}
	for _, f := range c.Flavors {
		e.Defined = append(e.Defined, f.Name)
	}
	return nil, e
}
