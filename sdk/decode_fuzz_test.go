package sdk_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// captureSeeds returns the response bodies of the recorded API exchanges,
// and each element of those that are lists.
func captureSeeds(f *testing.F) [][]byte {
	f.Helper()
	files, err := filepath.Glob(filepath.Join("cdsclient", "testdata", "captures", "*.json"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no captures: %v", err)
	}
	var out [][]byte
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		var c struct {
			ResponseBody json.RawMessage `json:"response_body"`
		}
		if err := json.Unmarshal(b, &c); err != nil {
			f.Fatalf("%s: %v", name, err)
		}
		out = append(out, c.ResponseBody)
		var list []json.RawMessage
		if json.Unmarshal(c.ResponseBody, &list) == nil {
			for _, e := range list {
				out = append(out, e)
			}
		}
	}
	return out
}

// handSeeds cover shapes the captures lack (V2 jobs, flavors, requirements).
var handSeeds = []string{
	`{"runjob":{"id":"3f1c","job_id":"build","status":"Waiting","queued":"2026-11-22T11:22:19Z","region":"default","model_type":"vsphere","job":{"runs-on":{"model":"shared/vsphere-debian","memory":"4096","flavor":"large"}}},"model":{"name":"vsphere-debian","osarch":"linux/amd64","type":"vsphere","spec":{"image":"tpl","flavor":"small","username":"u","password":"p"}}}`,
	`{"runjob":{"id":"7bdf","job_id":"build","status":"Waiting","region":"R","model_type":"vsphere","job":{"name":"build","region":"R","runs-on":"PROJ/github/ovh/demo/vsphere-v2@refs/heads/main"}}}`,
	`[{"job":{"runs-on":"m"}},{"job":{"runs-on":{"model":"m","memory":"","flavor":"large"}}},{"job":{"runs-on":null}},{"job":{"runs-on":1}}]`,
	`{"runjob":{},"model":{"spec":"not an object"}}`,
	`{"model":{"spec":null}}`,
	`{"model":{"spec":[1,2]}}`,
	`{"job":{"action":{"requirements":[{"type":"flavor","value":""},{"type":"flavor","value":"xl"},{"type":"model","value":"m"}]}}}`,
	`{"name":"m","group":null,"model_virtual_machine":{"flavor":"large"},"registered_capabilities":null}`,
	`[{"id":"w","model_id":null,"job_run_id":7,"hatchery_id":1}]`,
	`[null,{}]`,
	`null`, `{}`, `[]`, `"x"`, `1e999`, `{"id":1e3}`, `{"last_beat":"0000-01-01T00:00:00Z"}`,
	`{"queued":"9999-12-31T23:59:59.999999999-23:59"}`,
	`{"id":89,"message":"job already booked","request_id":"r","from":"x"}`,
}

// reencode checks that a decoded value encodes, and that encoding is a fixed
// point of decode+encode: what the hatchery reads it can also write back.
func reencode[T any](t *testing.T, v T) {
	t.Helper()
	b1, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encode decoded %T: %v", v, err)
	}
	var w T
	if err := json.Unmarshal(b1, &w); err != nil {
		t.Fatalf("decode own encoding %s of %T: %v", b1, v, err)
	}
	b2, err := json.Marshal(w)
	if err != nil || !bytes.Equal(b1, b2) {
		t.Fatalf("%T encoding not stable:\n%s\n%s (%v)", v, b1, b2, err)
	}
}

// checkRequirements asserts Values and First agree with the list.
func checkRequirements(t *testing.T, l sdk.RequirementList) {
	t.Helper()
	for _, typ := range []string{sdk.FlavorRequirement, sdk.ModelRequirement, ""} {
		vals := l.Values(typ)
		n := 0
		for _, r := range l {
			if r.Type == typ {
				if vals[n] != r.Value {
					t.Fatalf("Values(%q)[%d] = %q, want %q", typ, n, vals[n], r.Value)
				}
				n++
			}
		}
		if n != len(vals) {
			t.Fatalf("Values(%q) has %d entries, want %d", typ, len(vals), n)
		}
		if first := l.First(typ); n == 0 && first != "" || n > 0 && first != vals[0] {
			t.Fatalf("First(%q) = %q, Values %q", typ, first, vals)
		}
	}
}

// wantFlavor is docs/design.md#flavor-resolution written out independently of GetFlavor.
func wantFlavor(jobFlavor string, reqs sdk.RequirementList, modelFlavor, def string) string {
	if jobFlavor != "" {
		return jobFlavor
	}
	if i := slices.IndexFunc(reqs, func(r sdk.Requirement) bool {
		return r.Type == sdk.FlavorRequirement && r.Value != ""
	}); i >= 0 {
		return reqs[i].Value
	}
	if modelFlavor != "" {
		return modelFlavor
	}
	return def
}

// checkV1 calls every helper on a decoded V1 model.
func checkV1(t *testing.T, m sdk.Model, reqs sdk.RequirementList) {
	t.Helper()
	w := sdk.WorkerStarterWorkerModel{ModelV1: &m}
	want := m.Name
	if m.Group != nil {
		want = m.Group.Name + "/" + m.Name
	}
	vm := m.ModelVirtualMachine
	if m.Path() != want || w.GetName() != want || !w.IsV1() || w.GetType() != m.Type {
		t.Fatalf("V1 name/type: Path %q GetName %q want %q", m.Path(), w.GetName(), want)
	}
	if w.GetVSphereImage() != vm.Image || w.GetCmd() != vm.Cmd || w.GetPreCmd() != vm.PreCmd ||
		w.GetPostCmd() != vm.PostCmd || w.GetVSphereUsername() != vm.User || w.GetVSpherePassword() != vm.Password {
		t.Fatal("V1 getters do not return the model's virtual machine fields")
	}
	if got := w.GetFlavor(reqs, "dflt"); got != wantFlavor("", reqs, vm.Flavor, "dflt") {
		t.Fatalf("V1 GetFlavor = %q, want %q", got, wantFlavor("", reqs, vm.Flavor, "dflt"))
	}
	checkRequirements(t, m.RegisteredCapabilities)
}

// checkV2 calls every helper on a decoded V2 model and job.
func checkV2(t *testing.T, m sdk.V2WorkerModel, job sdk.V2WorkflowRunJob) {
	t.Helper()
	spec, err := m.VSphereSpec()
	if len(m.Spec) == 0 && (err != nil || spec != (sdk.V2WorkerModelVSphereSpec{})) {
		t.Fatalf("empty spec decoded to %+v, %v", spec, err)
	}
	if err != nil {
		return // the framework refuses the job; nothing more is read
	}
	w := sdk.WorkerStarterWorkerModel{ModelV2: &m, VSphereSpec: spec, JobFlavor: job.Job.RunsOn.Flavor, JobMemory: job.Job.RunsOn.Memory}
	if w.IsV1() || w.GetName() != m.Name || w.GetType() != m.Type || w.GetVSphereImage() != spec.Image ||
		w.GetVSphereUsername() != spec.Username || w.GetVSpherePassword() != spec.Password || w.GetCmd() != "" {
		t.Fatal("V2 getters do not return the spec's fields")
	}
	if got, want := w.GetFlavor(nil, "dflt"), wantFlavor(job.Job.RunsOn.Flavor, nil, spec.Flavor, "dflt"); got != want {
		t.Fatalf("V2 GetFlavor = %q, want %q", got, want)
	}
}

// FuzzDecode decodes arbitrary bytes as every API answer the hatchery reads
// and runs the helpers on what decodes.
func FuzzDecode(f *testing.F) {
	for _, b := range captureSeeds(f) {
		f.Add(b)
	}
	for _, s := range handSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var m sdk.Model
		if json.Unmarshal(data, &m) == nil {
			reencode(t, m)
			checkV1(t, m, m.RegisteredCapabilities)
		}
		var models []sdk.Model
		if json.Unmarshal(data, &models) == nil {
			for _, m := range models {
				checkV1(t, m, nil)
			}
		}
		var v2 sdk.V2WorkerModel
		if json.Unmarshal(data, &v2) == nil {
			reencode(t, v2)
			checkV2(t, v2, sdk.V2WorkflowRunJob{})
		}
		var job sdk.WorkflowNodeJobRun
		if json.Unmarshal(data, &job) == nil {
			reencode(t, job)
			reqs := job.Job.Action.Requirements
			checkRequirements(t, reqs)
			checkV1(t, sdk.Model{Name: "m"}, reqs)
		}
		var jobs []sdk.WorkflowNodeJobRun
		if json.Unmarshal(data, &jobs) == nil {
			for _, j := range jobs {
				checkRequirements(t, j.Job.Action.Requirements)
			}
		}
		var info sdk.V2QueueJobInfo
		if json.Unmarshal(data, &info) == nil {
			reencode(t, info)
			checkV2(t, info.Model, info.RunJob)
		}
		var v2jobs []sdk.V2WorkflowRunJob
		if json.Unmarshal(data, &v2jobs) == nil {
			for _, j := range v2jobs {
				checkV2(t, sdk.V2WorkerModel{}, j)
			}
		}
		var workers []sdk.Worker
		if json.Unmarshal(data, &workers) == nil {
			reencode(t, workers)
		}
		var v2workers []sdk.V2Worker
		if json.Unmarshal(data, &v2workers) == nil {
			reencode(t, v2workers)
		}
		var apiErr sdk.APIError
		if json.Unmarshal(data, &apiErr) == nil {
			reencode(t, apiErr)
		}
	})
}
