package hatchery

import (
	"strings"

	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// workerConfigInput is what varies per worker in its configuration.
type workerConfigInput struct {
	Name     string
	Model    string
	JobID    int64
	RunJobID string
	Token    string
}

// workerCDN are the CDN addresses given to workers, resolved at start
// (Framework.resolveCDN): the HTTP URL and the TCP log address with its
// TLS flag; "" when unknown.
type workerCDN struct {
	HTTP       string
	TCP        string
	TCPWithTLS bool
}

// buildWorkerConfig fills a WorkerConfig from the common configuration:
// API endpoint from provision.workerApiHttp (else api.http), CDN endpoint
// and log address as resolved at start, env vars from
// provision.injectEnvVars.
func buildWorkerConfig(cfg CommonConfiguration, cdn workerCDN, logCfg spawn.WorkerLogConfig, in workerConfigInput) spawn.WorkerConfig {
	api := WorkerAPI(cfg)
	wc := spawn.WorkerConfig{
		Name:                     in.Name,
		Basedir:                  cfg.Provision.WorkerBasedir,
		HatcheryName:             cfg.Name,
		APIEndpoint:              api.URL,
		APIEndpointInsecure:      api.Insecure,
		APIToken:                 in.Token,
		CDNEndpoint:              cdn.HTTP,
		GelfServiceAddr:          cdn.TCP,
		GelfServiceAddrEnableTLS: cdn.TCPWithTLS,
		Model:                    in.Model,
		BookedJobID:              in.JobID,
		RunJobID:                 in.RunJobID,
		Region:                   cfg.Provision.Region,
		InjectEnvVars:            parseEnvVars(cfg.Provision.InjectEnvVars),
		Log:                      logCfg,
	}
	return wc
}

// parseEnvVars turns "K=V" entries into a map; entries without '=' or with
// an empty key are ignored (Validate reports them).
func parseEnvVars(kvs []string) map[string]string {
	if len(kvs) == 0 {
		return nil
	}
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		m[k] = v
	}
	return m
}

// WorkerAPI is the CDS API endpoint the workers are given: provision's
// workerApiHttp when set, else api.http (the hatchery's own).
func WorkerAPI(cfg CommonConfiguration) HTTPClientConfig {
	if cfg.Provision.WorkerAPIHTTP.URL != "" {
		return cfg.Provision.WorkerAPIHTTP
	}
	return cfg.API.HTTP
}
