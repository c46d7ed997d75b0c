package capacity

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCount(t *testing.T) {
	t.Parallel()
	vms := []VMUsage{
		{Name: "a", JobID: "j-a", CPUs: 2, MemoryMB: 4096, PoweredOn: true, Owned: true},
		{Name: "b", JobID: "j-b", CPUs: 4, MemoryMB: 8192, PoweredOn: true, Owned: true},
		{Name: "off", JobID: "j-off", CPUs: 8, MemoryMB: 8192, Owned: true},
		{Name: "foreign", JobID: "j-f", CPUs: 8, MemoryMB: 8192, PoweredOn: true},
		{Name: "tmpl", CPUs: 4, MemoryMB: 4096, PoweredOn: true, Owned: true, Template: true},
		{Name: "prov", CPUs: 1, MemoryMB: 1024, PoweredOn: true, Owned: true, Provisioning: true},
	}
	u := Count(vms)
	require.Equal(t, Footprint{CPUs: 7, MemoryMB: 13312}, u.Footprint)
	require.Equal(t, 3, u.VMs)
	require.Equal(t, map[string]bool{"j-a": true, "j-b": true, ProvisionKey("prov"): true}, u.Keys)
}

func TestTemplateFootprint(t *testing.T) {
	t.Parallel()
	vms := []VMUsage{
		{Name: "debian12", CPUs: 2, MemoryMB: 2048},
		{Name: "debian12", CPUs: 6, MemoryMB: 4096, Template: true},
		{Name: "nohw", Template: true},
		{Name: "base", CPUs: 3, MemoryMB: 1024, Template: true},
	}
	fp, ok := TemplateFootprint(vms, []string{"debian12"})
	require.True(t, ok)
	require.Equal(t, Footprint{CPUs: 6, MemoryMB: 4096}, fp, "a template is preferred over a VM of the same name")
	fp, ok = TemplateFootprint(vms, []string{"missing", "nohw", "base"})
	require.True(t, ok)
	require.Equal(t, Footprint{CPUs: 3, MemoryMB: 1024}, fp, "the first name with known hardware")
	_, ok = TemplateFootprint(vms, []string{"missing", "nohw"})
	require.False(t, ok)
}

func TestStarvationReserve(t *testing.T) {
	t.Parallel()
	flavors := testFlavors()
	f := func(name string) *Flavor {
		for i := range flavors {
			if flavors[i].Name == name {
				return &flavors[i]
			}
		}
		t.Fatalf("no flavor %q", name)
		return nil
	}
	fp, s := StarvationReserve(flavors, f("xlarge"), 2)
	require.Equal(t, Footprint{CPUs: 4, MemoryMB: 8192}, fp, "2 × small, not medium")
	require.Equal(t, "small", s.Name)
	fp, s = StarvationReserve(flavors, f("small"), 2)
	require.Zero(t, fp, "the smallest flavor keeps no reserve")
	require.Nil(t, s)
	fp, s = StarvationReserve(flavors, f("large"), 0)
	require.Zero(t, fp)
	require.Nil(t, s)
	fp, s = StarvationReserve(flavors, nil, 2)
	require.Zero(t, fp, "template resources keep no reserve")
	require.Nil(t, s)

	lean, ok := SmallestSmaller([]Flavor{{Name: "fat", CPUs: 2, MemoryMB: 8192}, {Name: "lean", CPUs: 2, MemoryMB: 2048}, {Name: "big", CPUs: 8, MemoryMB: 8192}},
		Flavor{Name: "big", CPUs: 8, MemoryMB: 8192})
	require.True(t, ok)
	require.Equal(t, "lean", lean.Name, "cpu tie broken by less memory")
	a, ok := SmallestSmaller([]Flavor{{Name: "b", CPUs: 2, MemoryMB: 2048}, {Name: "a", CPUs: 2, MemoryMB: 2048}}, Flavor{CPUs: 4})
	require.True(t, ok)
	require.Equal(t, "a", a.Name, "full tie broken by name")
}
