package hatchery

import (
	"fmt"
	"strings"
	"time"
)

// DefaultCommonConfiguration returns the defaults: at most 10
// workers, 10 provisioning and 2 registrations at once, models checked every
// 60 s, 5 spawn attempts per job, 10 s per API request and 10 heartbeat
// failures before the process stops.
func DefaultCommonConfiguration() CommonConfiguration {
	return CommonConfiguration{
		HTTP: HTTPConfig{Addr: "", Port: 8086},
		API: APIConfig{
			RequestTimeout:       10,
			MaxHeartbeatFailures: 10,
		},
		Provision: ProvisionConfig{
			MaxWorker:                      10,
			MaxConcurrentProvisioning:      10,
			MaxConcurrentRegistering:       2,
			RegisterFrequency:              60,
			MaxAttemptsNumberBeforeFailure: 5,
			WorkerBasedir:                  "/tmp",
		},
	}
}

// RequestTimeoutDuration is api.requestTimeout as a duration (10 s when unset).
func (c CommonConfiguration) RequestTimeoutDuration() time.Duration {
	return seconds(c.API.RequestTimeout, 10)
}

// RegisterFrequencyDuration is provision.registerFrequency as a duration
// (60 s when unset).
func (c CommonConfiguration) RegisterFrequencyDuration() time.Duration {
	return seconds(c.Provision.RegisterFrequency, 60)
}

// maxSeconds caps seconds: a year, far above any setting and far below the
// count that would overflow time.Duration into a negative value.
const maxSeconds = 365 * 24 * 3600

// seconds converts a count of seconds to a duration without overflow: def
// when n <= 0, at most maxSeconds.
func seconds(n, def int) time.Duration {
	if n <= 0 {
		n = def
	}
	return time.Duration(min(n, maxSeconds)) * time.Second
}

// V1QueueRegions are the region values of the V1 queue poll. The API
// matches each exactly and the empty value matches the jobs without a
// region: with provision.region R, "R" and "" (only "R" when
// ignoreJobWithNoRegion is set). Without a region the poll sends no region
// parameter and the API lists every job, as the upstream CDS hatchery
// client does; the framework then refuses, job by job, those that require a
// region (regionOK), so that such a job is logged, not silently invisible.
func (c CommonConfiguration) V1QueueRegions() []string {
	switch {
	case c.Provision.Region == "":
		return nil
	case c.Provision.IgnoreJobWithNoRegion:
		return []string{c.Provision.Region}
	default:
		return []string{c.Provision.Region, ""}
	}
}

// Validate returns every problem of the common configuration, each naming
// its key path. It does not parse the private key; New does.
func (c CommonConfiguration) Validate() []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if strings.TrimSpace(c.Name) == "" {
		add("commonConfiguration.name: must be set")
	}
	if c.API.HTTP.URL == "" {
		add("commonConfiguration.api.http.url: must be set")
	}
	if c.API.Token == "" && c.API.TokenV2 == "" {
		add("commonConfiguration.api: token or tokenV2 must be set")
	}
	if c.RSAPrivateKey == "" {
		add("commonConfiguration.rsaPrivateKey: must be set")
	}
	p := c.Provision
	if p.MaxWorker < 0 {
		add("commonConfiguration.provision.maxWorker: must be >= 0 (0 is unlimited), got %d", p.MaxWorker)
	}
	if p.MaxConcurrentProvisioning <= 0 {
		add("commonConfiguration.provision.maxConcurrentProvisioning: must be > 0, got %d", p.MaxConcurrentProvisioning)
	}
	if p.MaxConcurrentRegistering < -1 || p.MaxConcurrentRegistering == 0 {
		add("commonConfiguration.provision.maxConcurrentRegistering: must be > 0 or -1 (disabled), got %d", p.MaxConcurrentRegistering)
	}
	if p.MaxWorker > 0 {
		if p.MaxConcurrentProvisioning > p.MaxWorker {
			add("commonConfiguration.provision.maxConcurrentProvisioning: %d exceeds maxWorker %d", p.MaxConcurrentProvisioning, p.MaxWorker)
		}
		if p.MaxConcurrentRegistering > p.MaxWorker {
			add("commonConfiguration.provision.maxConcurrentRegistering: %d exceeds maxWorker %d", p.MaxConcurrentRegistering, p.MaxWorker)
		}
	}
	if p.MaxAttemptsNumberBeforeFailure < -1 || p.MaxAttemptsNumberBeforeFailure == 0 {
		add("commonConfiguration.provision.maxAttemptsNumberBeforeFailure: must be > 0 or -1 (disabled), got %d", p.MaxAttemptsNumberBeforeFailure)
	}
	for i, kv := range p.InjectEnvVars {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			add("commonConfiguration.provision.injectEnvVars[%d]: want KEY=VALUE", i)
		}
	}
	return errs
}
