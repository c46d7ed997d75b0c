package sdk

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Parameter is a job parameter (name/type/value).
type Parameter struct {
	ID    int64  `json:"id"`
	Name  string `json:"name"`
	Type  string `json:"type"`
	Value string `json:"value"`
}

// Action is the executed action of a V1 job; only what a hatchery reads.
type Action struct {
	ID           int64           `json:"id"`
	Name         string          `json:"name"`
	Type         string          `json:"type"`
	Requirements RequirementList `json:"requirements"`
}

// ExecutedJob is the job part of a V1 queued job.
type ExecutedJob struct {
	PipelineActionID int64  `json:"pipeline_action_id"`
	PipelineStageID  int64  `json:"pipeline_stage_id"`
	Enabled          bool   `json:"enabled"`
	Action           Action `json:"action"`
	WorkerName       string `json:"worker_name"`
	WorkerID         string `json:"worker_id"`
}

// SpawnInfoMessage is the message of a spawn info.
type SpawnInfoMessage struct {
	ID   string   `json:"id"`
	Args []string `json:"args"`
}

// SpawnInfo is one line of POST /queue/workflows/{id}/spawn/infos.
type SpawnInfo struct {
	RemoteTime  time.Time        `json:"remote_time"`
	Message     SpawnInfoMessage `json:"message"`
	UserMessage string           `json:"user_message,omitempty"`
}

// Header is the job header map (tracing headers in CDS).
type Header map[string]string

// WorkflowNodeJobRun is a V1 queued job (GET /queue/workflows).
type WorkflowNodeJobRun struct {
	ProjectID         int64       `json:"project_id"`
	ID                int64       `json:"id"`
	WorkflowNodeRunID int64       `json:"workflow_node_run_id"`
	Job               ExecutedJob `json:"job"`
	Parameters        []Parameter `json:"parameters"`
	Status            string      `json:"status"`
	Retry             int         `json:"retry"`
	Queued            time.Time   `json:"queued"`
	QueuedSeconds     int64       `json:"queued_seconds"`
	Start             time.Time   `json:"start"`
	Done              time.Time   `json:"done"`
	ModelType         string      `json:"model_type"`
	BookedBy          Service     `json:"bookedby"`
	SpawnInfos        []SpawnInfo `json:"spawninfos"`
	ExecGroups        []Group     `json:"exec_groups"`
	Header            Header      `json:"header,omitempty"`
}

// Service is a CDS service (hatchery) as the API describes it.
type Service struct {
	ID                    int64           `json:"id"`
	Name                  string          `json:"name"`
	Type                  string          `json:"type"`
	HTTPURL               string          `json:"http_url"`
	Config                any             `json:"config,omitempty"`
	PublicKey             []byte          `json:"public_key,omitempty"`
	Region                string          `json:"region,omitempty"`
	IgnoreJobWithNoRegion bool            `json:"ignore_job_with_no_region,omitempty"`
	LastHeartbeat         time.Time       `json:"last_heartbeat"`
	MonitoringStatus      json.RawMessage `json:"monitoring_status,omitempty"`
	Version               string          `json:"version,omitempty"`
	UpToDate              bool            `json:"up_to_date,omitempty"`
}

// BookedJob is the answer of POST /queue/workflows/{id}/book.
type BookedJob struct {
	ProjectKey   string `json:"project_key"`
	WorkflowName string `json:"workflow_name"`
	WorkflowID   int64  `json:"workflow_id"`
	RunID        int64  `json:"run_id"`
	NodeRunName  string `json:"node_run_name"`
	NodeRunID    int64  `json:"node_run_id"`
	JobName      string `json:"job_name"`
}

// V2JobRunsOn is the runs-on section of a V2 job. The API sends it in two
// forms: a plain string, the model, when the job sets no memory and no
// flavor (the usual case), and an object {"model", "memory", "flavor"}
// otherwise. It decodes both and encodes in the form the API uses
// (docs/architecture.md, "Meeting the CDS API").
type V2JobRunsOn struct {
	Model  string `json:"model"`
	Memory string `json:"memory"`
	Flavor string `json:"flavor"`
}

// v2JobRunsOnObject is the object form of V2JobRunsOn, without its methods.
type v2JobRunsOnObject V2JobRunsOn

// UnmarshalJSON reads runs-on as a string (the model) or as an object; null
// leaves it unchanged.
func (r *V2JobRunsOn) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var model string
		if err := json.Unmarshal(b, &model); err != nil {
			return fmt.Errorf("runs-on: %w", err)
		}
		*r = V2JobRunsOn{Model: model}
		return nil
	}
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	var o v2JobRunsOnObject
	if err := json.Unmarshal(b, &o); err != nil {
		return fmt.Errorf("runs-on: %w", err)
	}
	*r = V2JobRunsOn(o)
	return nil
}

// MarshalJSON writes runs-on as the API does: the model as a string when
// neither memory nor flavor is set, the object otherwise.
func (r V2JobRunsOn) MarshalJSON() ([]byte, error) {
	if r.Memory == "" && r.Flavor == "" {
		return json.Marshal(r.Model)
	}
	return json.Marshal(v2JobRunsOnObject(r))
}

// V2Job is the job definition of a V2 run job; only what a hatchery reads.
type V2Job struct {
	Name   string      `json:"name,omitempty"`
	RunsOn V2JobRunsOn `json:"runs-on"`
	Region string      `json:"region,omitempty"`
}

// V2WorkflowRunJob is a V2 queued job (GET /v2/queue/{region}).
type V2WorkflowRunJob struct {
	ID            string    `json:"id"`
	JobID         string    `json:"job_id"`
	WorkflowRunID string    `json:"workflow_run_id"`
	ProjectKey    string    `json:"project_key"`
	WorkflowName  string    `json:"workflow_name"`
	RunNumber     int64     `json:"run_number"`
	RunAttempt    int64     `json:"run_attempt"`
	Status        string    `json:"status"`
	Queued        time.Time `json:"queued"`
	Started       time.Time `json:"started,omitempty"`
	Region        string    `json:"region"`
	ModelType     string    `json:"model_type"`
	ModelOSArch   string    `json:"model_osarch,omitempty"`
	Job           V2Job     `json:"job"`
	HatcheryName  string    `json:"hatchery_name,omitempty"`
	WorkerName    string    `json:"worker_name,omitempty"`
}

// V2QueueJobInfo is the answer of GET /v2/queue/{region}/job/{id}.
type V2QueueJobInfo struct {
	RunJob V2WorkflowRunJob `json:"runjob"`
	Model  V2WorkerModel    `json:"model"`
}

// V2SendJobRunInfo is the body of POST /v2/queue/{region}/job/{id}/info.
type V2SendJobRunInfo struct {
	Level   string    `json:"level"`
	Message string    `json:"message"`
	Time    time.Time `json:"time"`
}

// Levels of V2 job run infos.
const (
	JobRunInfoLevelInfo    = "info"
	JobRunInfoLevelWarning = "warning"
	JobRunInfoLevelError   = "error"
)

// CDNConfig is the answer of GET /config/cdn and GET /v2/config/cdn.
type CDNConfig struct {
	TCPURL          string `json:"tcp_url"`
	TCPURLEnableTLS bool   `json:"tcp_url_enable_tls"`
	HTTPURL         string `json:"http_url"`
}
