package modelref

import (
	"testing"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/stretchr/testify/require"
)

// TestOfEntryAgreesWithOf: a warm-pool entry naming a model resolves the
// template a job of that model resolves; it fails if OfEntry kept its own
// rule (the path itself, the base image).
func TestOfEntryAgreesWithOf(t *testing.T) {
	t.Parallel()
	m := sdk.Model{Name: "mymodel", Group: &sdk.Group{Name: "shared.infra"}, ModelVirtualMachine: sdk.ModelVirtualMachine{Image: "debian12"}}
	v1 := sdk.WorkerStarterWorkerModel{ModelV1: &m}
	require.Equal(t, Template{Name: "mymodel", Built: true}, Of(v1))
	require.Equal(t, Of(v1), OfEntry(m.Path(), ""))
	require.Equal(t, Of(v1), OfV1(&m))
	require.Equal(t, Template{Name: "debian12"}, BaseOf(v1))

	v2 := sdk.WorkerStarterWorkerModel{ModelV2: &sdk.V2WorkerModel{Name: "x"}, VSphereSpec: sdk.V2WorkerModelVSphereSpec{Image: "ubuntu"}}
	require.Equal(t, Template{Name: "ubuntu"}, Of(v2))
	require.Equal(t, Of(v2), OfEntry("", "ubuntu"))
	require.Zero(t, BaseOf(v2))
	require.Zero(t, OfEntry("", ""))
}

// TestTemplateIs: a V1 model's template is only this hatchery's recorded
// model template; a V2 template is any template of its name; a VM is
// never a template.
func TestTemplateIs(t *testing.T) {
	t.Parallel()
	built, v2 := Template{Name: "m", Built: true}, Template{Name: "m"}
	cases := []struct {
		c             Candidate
		isBuilt, isV2 bool
	}{
		{Candidate{Name: "m", IsTemplate: true, Ours: true, ModelTemplate: true}, true, true},
		{Candidate{Name: "m", IsTemplate: true, Ours: false, ModelTemplate: true}, false, true},
		{Candidate{Name: "m", IsTemplate: true, Ours: true}, false, true},
		{Candidate{Name: "m", Ours: true, ModelTemplate: true}, false, false},
		{Candidate{Name: "other", IsTemplate: true, Ours: true, ModelTemplate: true}, false, false},
	}
	for _, tc := range cases {
		require.Equal(t, tc.isBuilt, built.Is(tc.c), "%+v", tc.c)
		require.Equal(t, tc.isV2, v2.Is(tc.c), "%+v", tc.c)
	}
	require.False(t, Template{}.Is(Candidate{IsTemplate: true}), "a model naming no template has none")
}

// TestKeyNamesOneModel: a model's key is its path for V1 and its template
// for V2, and an entry names it by that only: a V2 entry naming a V1
// model's image, or a V1 entry naming another group's model of the same
// name, does not.
func TestKeyNamesOneModel(t *testing.T) {
	t.Parallel()
	m := sdk.Model{Name: "mymodel", Group: &sdk.Group{Name: "shared.infra"}, ModelVirtualMachine: sdk.ModelVirtualMachine{Image: "debian12"}}
	v1 := KeyOf(sdk.WorkerStarterWorkerModel{ModelV1: &m})
	require.Equal(t, Key{V1: true, Model: "shared.infra/mymodel"}, v1)
	require.True(t, v1.NamedBy("shared.infra/mymodel", ""))
	require.False(t, v1.NamedBy("other/mymodel", ""))
	require.False(t, v1.NamedBy("", "debian12"), "a V1 model is not named by its base image")
	require.Equal(t, "model shared.infra/mymodel", v1.QuarantineKey())

	v2 := KeyOf(sdk.WorkerStarterWorkerModel{ModelV2: &sdk.V2WorkerModel{Name: "x"}, VSphereSpec: sdk.V2WorkerModelVSphereSpec{Image: "ubuntu"}})
	require.Equal(t, Key{Model: "ubuntu"}, v2)
	require.True(t, v2.NamedBy("", "ubuntu"))
	require.False(t, v2.NamedBy("ubuntu", ""))
	require.Equal(t, "template ubuntu", v2.QuarantineKey())

	none := KeyOf(sdk.WorkerStarterWorkerModel{ModelV2: &sdk.V2WorkerModel{Name: "x"}})
	require.False(t, none.NamedBy("", ""), "a model naming no template is named by no entry")
}
