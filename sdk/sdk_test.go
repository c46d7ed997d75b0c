package sdk_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

func v1Model(flavor string) *sdk.Model {
	return &sdk.Model{Name: "debian", Group: &sdk.Group{Name: "shared.infra"}, Type: sdk.VSphere,
		ModelVirtualMachine: sdk.ModelVirtualMachine{Image: "tpl-v1", Flavor: flavor, PreCmd: "pre1", Cmd: "cmd1", PostCmd: "post1", User: "u1", Password: "p1"}}
}

func v2Starter(jobFlavor, specFlavor string) sdk.WorkerStarterWorkerModel {
	return sdk.WorkerStarterWorkerModel{
		ModelV2:     &sdk.V2WorkerModel{Name: "debian-v2", Type: sdk.VSphere},
		VSphereSpec: sdk.V2WorkerModelVSphereSpec{Image: "tpl-v2", Flavor: specFlavor, Username: "u2", Password: "p2"},
		JobFlavor:   jobFlavor, PreCmd: "pre2", Cmd: "cmd2", PostCmd: "post2",
	}
}

func TestGetFlavor(t *testing.T) {
	flavorReq := sdk.RequirementList{{Type: sdk.BinaryRequirement, Value: "git"}, {Type: sdk.FlavorRequirement, Value: "req"}}
	emptyFlavorReq := sdk.RequirementList{{Type: sdk.FlavorRequirement, Value: ""}}
	cases := []struct {
		name  string
		model sdk.WorkerStarterWorkerModel
		reqs  sdk.RequirementList
		def   string
		want  string
	}{
		{"v2 job runs-on wins over all", v2Starter("job", "spec"), flavorReq, "def", "job"},
		{"requirement wins over model", sdk.WorkerStarterWorkerModel{ModelV1: v1Model("model")}, flavorReq, "def", "req"},
		{"requirement wins over v2 spec", v2Starter("", "spec"), flavorReq, "def", "req"},
		{"v1 model flavor", sdk.WorkerStarterWorkerModel{ModelV1: v1Model("model")}, nil, "def", "model"},
		{"v2 spec flavor", v2Starter("", "spec"), nil, "def", "spec"},
		{"empty requirement is ignored", v2Starter("", "spec"), emptyFlavorReq, "def", "spec"},
		{"default flavor", sdk.WorkerStarterWorkerModel{ModelV1: v1Model("")}, nil, "def", "def"},
		{"v2 default flavor", v2Starter("", ""), nil, "def", "def"},
		{"none", sdk.WorkerStarterWorkerModel{ModelV1: v1Model("")}, nil, "", ""},
		{"no model", sdk.WorkerStarterWorkerModel{}, nil, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.model.GetFlavor(tc.reqs, tc.def))
		})
	}
}

func ExampleWorkerStarterWorkerModel_GetFlavor() {
	m := sdk.WorkerStarterWorkerModel{ModelV1: &sdk.Model{ModelVirtualMachine: sdk.ModelVirtualMachine{Flavor: "medium"}}}
	fmt.Println(m.GetFlavor(nil, "small"))
	fmt.Println(m.GetFlavor(sdk.RequirementList{{Type: sdk.FlavorRequirement, Value: "large"}}, "small"))
	fmt.Println(sdk.WorkerStarterWorkerModel{ModelV1: &sdk.Model{}}.GetFlavor(nil, "small"))
	// Output:
	// medium
	// large
	// small
}

func TestStarterAccessors(t *testing.T) {
	type want struct{ name, typ, image, pre, cmd, post, user, pass string }
	cases := []struct {
		name  string
		model sdk.WorkerStarterWorkerModel
		want  want
		isV1  bool
	}{
		{"v1", sdk.WorkerStarterWorkerModel{ModelV1: v1Model("")}, want{"shared.infra/debian", sdk.VSphere, "tpl-v1", "pre1", "cmd1", "post1", "u1", "p1"}, true},
		{"v2", v2Starter("", ""), want{"debian-v2", sdk.VSphere, "tpl-v2", "pre2", "cmd2", "post2", "u2", "p2"}, false},
		{"empty", sdk.WorkerStarterWorkerModel{}, want{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.model
			got := want{m.GetName(), m.GetType(), m.GetVSphereImage(), m.GetPreCmd(), m.GetCmd(), m.GetPostCmd(), m.GetVSphereUsername(), m.GetVSpherePassword()}
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.isV1, m.IsV1())
		})
	}
}

func TestModelPath(t *testing.T) {
	for _, tc := range []struct {
		m    sdk.Model
		want string
	}{
		{sdk.Model{Name: "debian", Group: &sdk.Group{Name: "shared.infra"}}, "shared.infra/debian"},
		{sdk.Model{Name: "debian"}, "debian"},
	} {
		assert.Equal(t, tc.want, tc.m.Path())
	}
}

func TestRequirementList(t *testing.T) {
	l := sdk.RequirementList{
		{Type: sdk.BinaryRequirement, Value: "git"},
		{Type: sdk.ModelRequirement, Value: "shared.infra/debian"},
		{Type: sdk.BinaryRequirement, Value: "docker"},
	}
	for _, tc := range []struct {
		typ    string
		first  string
		values []string
	}{
		{sdk.BinaryRequirement, "git", []string{"git", "docker"}},
		{sdk.ModelRequirement, "shared.infra/debian", []string{"shared.infra/debian"}},
		{sdk.FlavorRequirement, "", nil},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			assert.Equal(t, tc.first, l.First(tc.typ))
			assert.Equal(t, tc.values, l.Values(tc.typ))
		})
	}
	assert.Empty(t, sdk.RequirementList(nil).First(sdk.BinaryRequirement))
}

func TestV2SpecDecode(t *testing.T) {
	for _, tc := range []struct {
		name    string
		spec    string
		want    sdk.V2WorkerModelVSphereSpec
		wantErr bool
	}{
		{"full", `{"image":"tpl","flavor":"large","username":"u","password":"p"}`, sdk.V2WorkerModelVSphereSpec{Image: "tpl", Flavor: "large", Username: "u", Password: "p"}, false},
		{"image only", `{"image":"tpl"}`, sdk.V2WorkerModelVSphereSpec{Image: "tpl"}, false},
		{"empty", ``, sdk.V2WorkerModelVSphereSpec{}, false},
		{"invalid", `[1]`, sdk.V2WorkerModelVSphereSpec{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := sdk.V2WorkerModel{Spec: json.RawMessage(tc.spec)}
			got, err := m.VSphereSpec()
			if tc.wantErr {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	// Through the job info JSON as the API sends it.
	var info sdk.V2QueueJobInfo
	require.NoError(t, json.Unmarshal([]byte(`{"runjob":{"id":"r1","job":{"runs-on":{"model":"m","memory":"4096","flavor":"large"}}},"model":{"name":"m","osarch":"linux/amd64","type":"vsphere","spec":{"image":"tpl","flavor":"small"}}}`), &info))
	assert.Equal(t, "large", info.RunJob.Job.RunsOn.Flavor)
	assert.Equal(t, "4096", info.RunJob.Job.RunsOn.Memory)
	spec, err := info.Model.VSphereSpec()
	require.NoError(t, err)
	assert.Equal(t, "small", spec.Flavor)
}

func TestSpawnErrorFormWire(t *testing.T) {
	b, err := json.Marshal(sdk.SpawnErrorForm{Error: "e", Logs: []byte("logs")})
	require.NoError(t, err)
	assert.JSONEq(t, `{"error":"e","logs":"bG9ncw=="}`, string(b))
	var f sdk.SpawnErrorForm // CDS's own capitalised keys decode too
	require.NoError(t, json.Unmarshal([]byte(`{"Error":"e","Logs":"bG9ncw=="}`), &f))
	assert.Equal(t, sdk.SpawnErrorForm{Error: "e", Logs: []byte("logs")}, f)
}

// TestFindModel: a model is found by its "group/name" path only.
func TestFindModel(t *testing.T) {
	ms := []sdk.Model{{Name: "debian", Group: &sdk.Group{Name: "shared.infra"}}, {Name: "alone"}}
	m, ok := sdk.FindModel(ms, "shared.infra/debian")
	require.True(t, ok)
	assert.Equal(t, "debian", m.Name)
	m, ok = sdk.FindModel(ms, "alone")
	require.True(t, ok)
	assert.Equal(t, "alone", m.Name)
	_, ok = sdk.FindModel(ms, "debian")
	assert.False(t, ok, "the name alone is not the path of a grouped model")
}
