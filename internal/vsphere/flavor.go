package vsphere

import (
	"fmt"
	"strings"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// UnknownFlavorError is returned when a job or model asks for a flavor the
// hatchery configuration does not define. It is a spawn error reported to
// the job (docs/design.md#flavor-resolution): there is never a silent fallback to another size.
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

// resolveFlavor returns the flavor a worker gets (docs/design.md#flavor-resolution), nil for
// none (template resources). An unknown flavor name is an
// *UnknownFlavorError that names it. The result is a copy: callers may not
// change the configuration through it.
func (h *HatcheryVSphere) resolveFlavor(model sdk.WorkerStarterWorkerModel, reqs []sdk.Requirement) (*config.Flavor, error) {
	return lookupFlavor(h.cfg.Flavors, model.GetFlavor(reqs, h.cfg.DefaultFlavor))
}

// lookupFlavor finds name (case-insensitive) among flavors; "" is no flavor.
func lookupFlavor(flavors []config.Flavor, name string) (*config.Flavor, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return nil, nil
	}
	for _, f := range flavors {
		if strings.EqualFold(f.Name, name) {
			c := f
			return &c, nil
		}
	}
	e := &UnknownFlavorError{Name: name}
	for _, f := range flavors {
		e.Defined = append(e.Defined, f.Name)
	}
	return nil, e
}
