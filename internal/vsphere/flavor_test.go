package vsphere

import (
	"errors"
	"testing"

	"github.com/cds-contrib/hatchery-vsphere/internal/admission"
	"github.com/cds-contrib/hatchery-vsphere/internal/capacity"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/stretchr/testify/require"
)

func TestResolveFlavor(t *testing.T) {
	t.Parallel()
	three := []config.Flavor{
		{Name: "small", CPUs: 2, MemoryMB: 4096},
		{Name: "medium", CPUs: 4, MemoryMB: 8192},
		{Name: "large", CPUs: 8, MemoryMB: 16384},
	}
	v1 := func(flavor string) sdk.WorkerStarterWorkerModel {
		return sdk.WorkerStarterWorkerModel{ModelV1: &sdk.Model{Name: "debian", Type: sdk.VSphere,
			ModelVirtualMachine: sdk.ModelVirtualMachine{Image: "debian12", Flavor: flavor}}}
	}
	v2 := func(jobFlavor, specFlavor string) sdk.WorkerStarterWorkerModel {
		m := capV2(jobFlavor)
		m.VSphereSpec.Flavor = specFlavor
		return m
	}
	flavorReq := []sdk.Requirement{{Type: sdk.BinaryRequirement, Value: "git"}, {Type: sdk.FlavorRequirement, Value: "medium"}}
	cases := []struct {
		name          string
		flavors       []config.Flavor
		defaultFlavor string
		model         sdk.WorkerStarterWorkerModel
		reqs          []sdk.Requirement
		want          string // "" = nil flavor
		wantErr       string
	}{
		{name: "job runs-on flavor wins over all", model: v2("large", "small"), reqs: flavorReq, defaultFlavor: "small", want: "large"},
		{name: "flavor requirement wins over model and default", model: v1("small"), reqs: flavorReq, defaultFlavor: "large", want: "medium"},
		{name: "v2 spec flavor wins over default", model: v2("", "large"), defaultFlavor: "small", want: "large"},
		{name: "v1 model flavor wins over default", model: v1("large"), defaultFlavor: "small", want: "large"},
		{name: "default flavor", model: v2("", ""), defaultFlavor: "medium", want: "medium"},
		{name: "none: template resources", model: v1(""), want: ""},
		{name: "case-insensitive", model: v2("LaRgE", ""), want: "large"},
		{name: "unknown job flavor is an error, no fallback to default", model: v2("huge", ""), defaultFlavor: "small",
			wantErr: `flavor "huge" is not defined in hatchery configuration (defined: small, medium, large)`},
		{name: "unknown with no flavors configured", flavors: []config.Flavor{}, model: v1("large"),
			wantErr: `flavor "large" is not defined in hatchery configuration (defined: none)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			flavors := three
			if tc.flavors != nil {
				flavors = tc.flavors
			}
			h := &HatcheryVSphere{}
			h.cfg.Store(&config.Config{Flavors: flavors, DefaultFlavor: tc.defaultFlavor})
			got, err := h.resolveFlavor(tc.model, tc.reqs)
			if tc.wantErr != "" {
				require.EqualError(t, err, tc.wantErr)
				var unknown *UnknownFlavorError
				require.True(t, errors.As(err, &unknown))
				require.Nil(t, got)
				return
			}
			require.NoError(t, err)
			if tc.want == "" {
				require.Nil(t, got)
				return
			}
			require.NotNil(t, got)
			require.Equal(t, tc.want, got.Name)
			got.CPUs = 999 // a copy: the configuration is unchanged
			for _, f := range flavors {
				require.NotEqual(t, int32(999), f.CPUs)
			}
		})
	}
}

func TestSmallestSmallerFlavor(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		flavors []config.Flavor
		of      string
		want    string // "" = none
	}{
		{name: "large keeps small", flavors: capFlavors(), of: "large", want: "small"},
		{name: "xlarge keeps small, not medium", flavors: capFlavors(), of: "xlarge", want: "small"},
		{name: "smallest has no reserve", flavors: capFlavors(), of: "small", want: ""},
		{name: "declaration order does not matter", of: "big", want: "tiny", flavors: []config.Flavor{
			{Name: "big", CPUs: 8, MemoryMB: 8192}, {Name: "mid", CPUs: 4, MemoryMB: 4096}, {Name: "tiny", CPUs: 1, MemoryMB: 1024}}},
		{name: "cpu tie broken by less memory", of: "big", want: "lean", flavors: []config.Flavor{
			{Name: "fat", CPUs: 2, MemoryMB: 8192}, {Name: "lean", CPUs: 2, MemoryMB: 2048}, {Name: "big", CPUs: 8, MemoryMB: 8192}}},
		{name: "same cpus, less memory is not smaller", of: "wide", want: "", flavors: []config.Flavor{
			{Name: "narrow", CPUs: 4, MemoryMB: 2048}, {Name: "wide", CPUs: 4, MemoryMB: 16384}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := (&config.Config{Flavors: tc.flavors}).FlavorNamed(tc.of)
			require.NotNil(t, f)
			// The reserve the capacity decisions keep, with the
			// configuration's flavors as admission hands them over.
			got, ok := capacity.SmallestSmaller(admission.CapacityFlavors(tc.flavors), *admission.CapacityFlavor(f))
			if tc.want == "" {
				require.False(t, ok)
				return
			}
			require.True(t, ok)
			require.Equal(t, tc.want, got.Name)
		})
	}
}
