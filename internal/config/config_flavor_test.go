package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/stretchr/testify/require"
)

// TestNormalizeIsTheLoadersForm: a configuration made in code and
// Normalized holds the flavor names the loader gives the same TOML.
func TestNormalizeIsTheLoadersForm(t *testing.T) {
	t.Parallel()
	c := Config{
		Flavors:            []Flavor{{Name: " Large ", CPUs: 8, MemoryMB: 16384}, {Name: "small", CPUs: 2, MemoryMB: 4096}},
		DefaultFlavor:      "LARGE",
		WorkerProvisioning: []WorkerProvisioning{{ModelVMWare: "debian12", Number: 1, Flavor: "Small"}, {ModelVMWare: "debian12", Number: 1}},
	}
	c.Normalize()
	require.Equal(t, []string{"large", "small"}, []string{c.Flavors[0].Name, c.Flavors[1].Name})
	require.Equal(t, "large", c.DefaultFlavor)
	require.Equal(t, []string{"small", ""}, []string{c.WorkerProvisioning[0].Flavor, c.WorkerProvisioning[1].Flavor})

	for _, name := range []string{" Large ", "LARGE", "large"} {
		require.Equal(t, "large", FlavorName(name))
	}
	// The loader's decoding (without Validate: a partial document).
	loaded, _, err := decodeConfig(strings.NewReader(`[hatchery.vsphere]
defaultFlavor = "LARGE"
[[hatchery.vsphere.flavors]]
name = "Large"
cpus = 8
memoryMB = 16384
[[hatchery.vsphere.workerProvisioning]]
modelVMWare = "debian12"
number = 1
flavor = "Small"
`), LoadOptions{})
	require.NoError(t, err)
	require.Equal(t, c.Flavors[0].Name, loaded.Flavors[0].Name)
	require.Equal(t, c.DefaultFlavor, loaded.DefaultFlavor)
	require.Equal(t, c.WorkerProvisioning[0].Flavor, loaded.WorkerProvisioning[0].Flavor)
}

// TestValidateAndLookupAgreeOnFlavorNames: a flavor reference Validate
// accepts is the one FlavorNamed and ResolveFlavor find at run time, and
// one it refuses is found by neither. It fails if Validate or the lookup
// normalised names their own way.
func TestValidateAndLookupAgreeOnFlavorNames(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"large", "LARGE", " Large ", "lar ge", "larg", "large2"} {
		c := validConfig()
		c.Normalize()
		c.DefaultFlavor = name
		var es Errors
		accepted := !errors.As(c.Validate(), &es) || !hasKey(es, "defaultFlavor")
		found := c.FlavorNamed(name) != nil
		require.Equal(t, accepted, found, "name %q: validate accepts %v, lookup finds %v", name, accepted, found)
		f, err := c.ResolveFlavor(sdk.WorkerStarterWorkerModel{ModelV2: &sdk.V2WorkerModel{}}, nil)
		require.Equal(t, found, err == nil && f != nil, "name %q: resolved %v, %v", name, f, err)
	}
}

func hasKey(es Errors, key string) bool {
	for _, e := range es {
		if e.Key == key || strings.HasSuffix(e.Key, "."+key) {
			return true
		}
	}
	return false
}
