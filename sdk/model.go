package sdk

import (
	"encoding/json"
	"time"
)

// Worker model types known to CDS. This hatchery only serves VSphere.
const (
	VSphere   = "vsphere"
	Docker    = "docker"
	Openstack = "openstack"
	Swarm     = "swarm"
)

// Group is a CDS group; V1 worker models belong to one.
type Group struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

// ModelVirtualMachine is the VM part of a V1 worker model. Image names the
// vSphere template to clone; Password may be a secret placeholder
// ("{{.secrets.x}}") resolved through the model secrets endpoint.
type ModelVirtualMachine struct {
	Image    string `json:"image"`
	Flavor   string `json:"flavor,omitempty"`
	PreCmd   string `json:"pre_cmd,omitempty"`
	Cmd      string `json:"cmd"`
	PostCmd  string `json:"post_cmd,omitempty"`
	User     string `json:"user"`
	Password string `json:"password"`
}

// Model is a CDS worker model V1 as returned by GET /worker/model/enabled.
type Model struct {
	ID                int64     `json:"id"`
	Name              string    `json:"name"`
	Description       string    `json:"description"`
	Type              string    `json:"type"`
	Disabled          bool      `json:"disabled"`
	Restricted        bool      `json:"restricted"`
	RegisteredOS      *string   `json:"registered_os"`
	RegisteredArch    *string   `json:"registered_arch"`
	NeedRegistration  bool      `json:"need_registration"`
	LastRegistration  time.Time `json:"last_registration"`
	CheckRegistration bool      `json:"check_registration"`
	UserLastModified  time.Time `json:"user_last_modified"`
	// CreatedBy is the author as the API shows it; kept raw.
	CreatedBy           json.RawMessage     `json:"created_by,omitempty"`
	GroupID             int64               `json:"group_id"`
	NbSpawnErr          int64               `json:"nb_spawn_err"`
	LastSpawnErr        *string             `json:"last_spawn_err"`
	LastSpawnErrLogs    *string             `json:"last_spawn_err_log"`
	DateLastSpawnErr    *time.Time          `json:"date_last_spawn_err"`
	IsDeprecated        bool                `json:"is_deprecated"`
	ModelVirtualMachine ModelVirtualMachine `json:"model_virtual_machine"`
	// ModelDocker is the docker part, always {} for vsphere models; kept raw.
	ModelDocker            json.RawMessage `json:"model_docker,omitempty"`
	Group                  *Group          `json:"group,omitempty"`
	RegisteredCapabilities RequirementList `json:"registered_capabilities"`
	IsOfficial             bool            `json:"is_official"`
}

// Path returns "group/name", the key CDS and this hatchery use for a V1 model.
func (m Model) Path() string {
	if m.Group == nil {
		return m.Name
	}
	return m.Group.Name + "/" + m.Name
}

// FindModel returns the model of ms whose Path is path.
func FindModel(ms []Model, path string) (Model, bool) {
	for _, m := range ms {
		if m.Path() == path {
			return m, true
		}
	}
	return Model{}, false
}

// WorkerModelSecret is one secret of a V1 worker model
// (GET /worker/model/{group}/{name}/secret).
type WorkerModelSecret struct {
	// ID is a uuid (the API answers a string, see captures/v1-worker-model-secret.json).
	ID            string    `json:"id"`
	Created       time.Time `json:"created"`
	WorkerModelID int64     `json:"worker_model_id"`
	Name          string    `json:"name"`
	Value         string    `json:"value"`
}

// SpawnErrorForm is the body of PUT /worker/model/{group}/{name}/error.
// The recorded exchange (captures/v1-worker-model-spawn-error.json) sends
// lower-case keys {"error","logs"} and the API accepts them (Go's decoder
// matches keys case-insensitively, so the capitalised {"Error","Logs"} of
// CDS's own untagged struct is accepted too). Logs is base64 on the wire.
type SpawnErrorForm struct {
	Error string `json:"error"`
	Logs  []byte `json:"logs"`
}

// V2WorkerModel is a worker model V2 (as-code). Spec is type dependent; for
// vsphere it decodes into V2WorkerModelVSphereSpec.
type V2WorkerModel struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	OSArch      string          `json:"osarch"`
	Type        string          `json:"type"`
	Spec        json.RawMessage `json:"spec"`
}

// V2WorkerModelVSphereSpec is the spec of a vsphere worker model V2.
type V2WorkerModelVSphereSpec struct {
	Image    string `json:"image"`
	Flavor   string `json:"flavor,omitempty"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
}

// VSphereSpec decodes the model's spec as a vsphere spec.
func (m V2WorkerModel) VSphereSpec() (V2WorkerModelVSphereSpec, error) {
	var s V2WorkerModelVSphereSpec
	if len(m.Spec) == 0 {
		return s, nil
	}
	err := json.Unmarshal(m.Spec, &s)
	return s, err
}
