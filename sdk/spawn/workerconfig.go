package spawn

import (
	"encoding/base64"
	"encoding/json"
)

// WorkerLogConfig tells the worker where to send its logs. The CDS
// worker reads this object with Go's default field names (its log
// configuration has no JSON tags), so the JSON names are the Go names.
// GraylogExtraValue may be a token: never log it.
type WorkerLogConfig struct {
	Level             string `json:"Level,omitempty"`
	GraylogProtocol   string `json:"GraylogProtocol,omitempty"`
	GraylogHost       string `json:"GraylogHost,omitempty"`
	GraylogPort       string `json:"GraylogPort,omitempty"`
	GraylogExtraKey   string `json:"GraylogExtraKey,omitempty"`
	GraylogExtraValue string `json:"GraylogExtraValue,omitempty"`
	SyslogHost        string `json:"SyslogHost,omitempty"`
	SyslogPort        string `json:"SyslogPort,omitempty"`
	SyslogProtocol    string `json:"SyslogProtocol,omitempty"`
	SyslogExtraTag    string `json:"SyslogExtraTag,omitempty"`
}

// WorkerConfig is the configuration given to a worker through the
// CDS_CONFIG environment variable (base64 of this JSON). APIToken is the
// worker's JWT: a secret, never logged.
type WorkerConfig struct {
	Name                string `json:"name"`
	Basedir             string `json:"basedir"`
	HatcheryName        string `json:"hatchery_name"`
	APIEndpoint         string `json:"api_endpoint"`
	APIEndpointInsecure bool   `json:"api_endpoint_insecure"`
	APIToken            string `json:"api_token"`
	CDNEndpoint         string `json:"cdn_endpoint"`
	// GelfServiceAddr is the CDN's TCP address (host:port) the worker
	// sends its step logs to; without it a V1 job never ends.
	GelfServiceAddr string `json:"gelf_service_addr"`
	// GelfServiceAddrEnableTLS makes the worker dial GelfServiceAddr
	// with TLS.
	GelfServiceAddrEnableTLS bool              `json:"gelf_service_addr_enable_tls,omitempty"`
	Model                    string            `json:"model"`
	BookedJobID              int64             `json:"booked_job_id,omitempty"`
	RunJobID                 string            `json:"run_job_id,omitempty"`
	Region                   string            `json:"region,omitempty"`
	InjectEnvVars            map[string]string `json:"inject_env_vars,omitempty"`
	Log                      WorkerLogConfig   `json:"log"`
}

// EncodeBase64 returns base64(JSON(c)), the value of CDS_CONFIG.
func (c WorkerConfig) EncodeBase64() string {
	b, _ := json.Marshal(c) // a struct of strings, bools and maps cannot fail
	return base64.StdEncoding.EncodeToString(b)
}

// DecodeWorkerConfig reverses EncodeBase64.
func DecodeWorkerConfig(s string) (WorkerConfig, error) {
	var c WorkerConfig
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return c, err
	}
	err = json.Unmarshal(b, &c)
	return c, err
}
