package sdk

import "time"

// Worker statuses as the CDS API reports them.
const (
	StatusWaiting     = "Waiting"
	StatusBuilding    = "Building"
	StatusChecking    = "Checking"
	StatusPending     = "Pending"
	StatusRegistering = "Registering"
	StatusDisabled    = "Disabled"
)

// Worker is a V1 worker (GET /worker).
type Worker struct {
	ID           string    `json:"id"`
	Name         string    `json:"name"`
	LastBeat     time.Time `json:"last_beat"`
	ModelID      *int64    `json:"model_id,omitempty"`
	JobRunID     *int64    `json:"job_run_id,omitempty"`
	Status       string    `json:"status"`
	HatcheryID   *int64    `json:"hatchery_id,omitempty"`
	HatcheryName string    `json:"hatchery_name"`
	Uptodate     bool      `json:"uptodate"`
	Version      string    `json:"version"`
	OS           string    `json:"os"`
	Arch         string    `json:"arch"`
}

// V2Worker is a V2 worker (GET /v2/worker; the API answers null for none).
type V2Worker struct {
	ID           string    `json:"id"`
	Name         string    `json:"name"`
	LastBeat     time.Time `json:"last_beat"`
	ModelName    string    `json:"model_name"`
	JobRunID     string    `json:"job_run_id"`
	HatcheryID   string    `json:"hatchery_id"`
	HatcheryName string    `json:"hatchery_name"`
	Status       string    `json:"status"`
	Version      string    `json:"version"`
	OS           string    `json:"os"`
	Arch         string    `json:"arch"`
}

// MonitoringStatusLine is one line of /mon/status and of heartbeats.
type MonitoringStatusLine struct {
	Status    string `json:"status"`
	Component string `json:"component"`
	Value     string `json:"value"`
	Type      string `json:"type"`
	Service   string `json:"service"`
	Hostname  string `json:"hostname"`
}

// Monitoring statuses.
const (
	MonitoringStatusOK    = "OK"
	MonitoringStatusWarn  = "WARN"
	MonitoringStatusAlert = "AL"
)

// MonitoringStatus is the body of /mon/status and of heartbeats.
type MonitoringStatus struct {
	Now   time.Time              `json:"now"`
	Lines []MonitoringStatusLine `json:"lines"`
}
