package sdk

// Requirement types of CDS jobs (V1 action requirements).
const (
	BinaryRequirement   = "binary"
	ModelRequirement    = "model"
	HostnameRequirement = "hostname"
	PluginRequirement   = "plugin"
	ServiceRequirement  = "service"
	MemoryRequirement   = "memory"
	OSArchRequirement   = "os-architecture"
	RegionRequirement   = "region"
	SecretRequirement   = "secret"
	FlavorRequirement   = "flavor"
)

// Requirement is one prerequisite of a job.
type Requirement struct {
	ID       int64  `json:"id"`
	ActionID int64  `json:"action_id"`
	Name     string `json:"name"`
	Type     string `json:"type"`
	Value    string `json:"value"`
}

// RequirementList is a list of requirements.
type RequirementList []Requirement

// Values returns the values of every requirement of type t, in order.
func (l RequirementList) Values(t string) []string {
	var out []string
	for _, r := range l {
		if r.Type == t {
			out = append(out, r.Value)
		}
	}
	return out
}

// First returns the value of the first requirement of type t, or "".
func (l RequirementList) First(t string) string {
	for _, r := range l {
		if r.Type == t {
			return r.Value
		}
	}
	return ""
}
