package config

import "time"

// Upper bounds of the duration keys. A value above its bound is refused by
// Validate; the bounds are far above any sensible setting and far below the
// point where a count of minutes or seconds overflows time.Duration (about
// 292 years), so that a mistyped or hostile value can never turn into a
// negative duration (a negative workerTTL would make every worker look
// expired). docs/configuration.md lists them.
const (
	MaxWorkerTTL                   = 7 * 24 * 60   // minutes: one week
	MaxWorkerRegistrationTTL       = 24 * 60       // minutes: one day
	MaxWorkerProvisioningInterval  = 24 * 3600     // seconds: one day
	MaxKillAwolServersInterval     = 24 * 3600     // seconds: one day
	MaxKillDisabledWorkersInterval = 24 * 3600     // seconds: one day
	MaxInventoryRefreshInterval    = 3600          // seconds: one hour
	MaxAPIRequestTimeout           = 600           // seconds: ten minutes
	MaxRegisterFrequency           = 24 * 3600     // seconds: one day
	MaxFinishedWorkerGracePeriod   = 24 * 3600     // seconds: one day (0 is allowed: no grace)
	MaxQuarantineBackoff           = 24 * 3600     // seconds: one day
	MaxKeepFailedWorkersFor        = 7 * 24 * 3600 // seconds: one week
)

// durationKey is one duration setting: its key (relative to KeyPrefix), its
// unit, its default and its upper bound, all in the unit.
type durationKey struct {
	key      string
	unit     time.Duration
	unitName string
	def, max int
	value    func(c *Config) int
}

// durationKeys lists every duration key, for Validate and the conversions.
var durationKeys = []durationKey{
	{"workerTTL", time.Minute, "minutes", DefaultWorkerTTL, MaxWorkerTTL, func(c *Config) int { return c.WorkerTTL }},
	{"workerRegistrationTTL", time.Minute, "minutes", DefaultWorkerRegistrationTTL, MaxWorkerRegistrationTTL, func(c *Config) int { return c.WorkerRegistrationTTL }},
	{"workerProvisioningInterval", time.Second, "seconds", DefaultWorkerProvisioningInterval, MaxWorkerProvisioningInterval, func(c *Config) int { return c.WorkerProvisioningInterval }},
	{"killAwolServersInterval", time.Second, "seconds", DefaultKillAwolServersInterval, MaxKillAwolServersInterval, func(c *Config) int { return c.KillAwolServersInterval }},
	{"killDisabledWorkersInterval", time.Second, "seconds", DefaultKillDisabledWorkersInterval, MaxKillDisabledWorkersInterval, func(c *Config) int { return c.KillDisabledWorkersInterval }},
	{"inventoryRefreshInterval", time.Second, "seconds", DefaultInventoryRefreshInterval, MaxInventoryRefreshInterval, func(c *Config) int { return c.InventoryRefreshInterval }},
	{"commonConfiguration.api.requestTimeout", time.Second, "seconds", DefaultAPIRequestTimeout, MaxAPIRequestTimeout, func(c *Config) int { return c.CommonConfiguration.API.RequestTimeout }},
	{"quarantineBackoff", time.Second, "seconds", DefaultQuarantineBackoff, MaxQuarantineBackoff, func(c *Config) int { return c.QuarantineBackoff }},
	{"quarantineBackoffMax", time.Second, "seconds", DefaultQuarantineBackoffMax, MaxQuarantineBackoff, func(c *Config) int { return c.QuarantineBackoffMax }},
	{"keepFailedWorkersFor", time.Second, "seconds", DefaultKeepFailedWorkersFor, MaxKeepFailedWorkersFor, func(c *Config) int { return c.KeepFailedWorkersFor }},
	{"commonConfiguration.provision.registerFrequency", time.Second, "seconds", DefaultRegisterFrequency, MaxRegisterFrequency, func(c *Config) int { return c.CommonConfiguration.Provision.RegisterFrequency }},
	{"windowsGuestOpsTimeout", time.Second, "seconds", DefaultWindowsGuestOpsTimeout, MaxWindowsReadinessTimeout, func(c *Config) int { return c.WindowsGuestOpsTimeout }},
	{"windowsIPTimeout", time.Second, "seconds", DefaultWindowsIPTimeout, MaxWindowsReadinessTimeout, func(c *Config) int { return c.WindowsIPTimeout }},
	{"windowsEnvTimeout", time.Second, "seconds", DefaultWindowsEnvTimeout, MaxWindowsReadinessTimeout, func(c *Config) int { return c.WindowsEnvTimeout }},
}

// boundedDuration converts n units to a duration without overflow: a value
// of 0 or less gives def units, a value above max gives max units. Validate
// refuses both, so a validated configuration converts exactly; the clamping
// keeps an unvalidated one from producing a negative or wrapped duration.
func boundedDuration(n int, unit time.Duration, def, max int) time.Duration {
	switch {
	case n <= 0:
		n = def
	case n > max:
		n = max
	}
	return time.Duration(n) * unit
}

// duration converts the key named key of c.
func (c *Config) duration(key string) time.Duration {
	for _, d := range durationKeys {
		if d.key == key {
			return boundedDuration(d.value(c), d.unit, d.def, d.max)
		}
	}
	panic("vsphere: unknown duration key " + key)
}

// WorkerTTLDuration is workerTTL (minutes) as a duration.
func (c *Config) WorkerTTLDuration() time.Duration { return c.duration("workerTTL") }

// WorkerRegistrationTTLDuration is workerRegistrationTTL (minutes) as a duration.
func (c *Config) WorkerRegistrationTTLDuration() time.Duration {
	return c.duration("workerRegistrationTTL")
}

// WorkerProvisioningIntervalDuration is workerProvisioningInterval (seconds).
func (c *Config) WorkerProvisioningIntervalDuration() time.Duration {
	return c.duration("workerProvisioningInterval")
}

// KillAwolServersIntervalDuration is killAwolServersInterval (seconds).
func (c *Config) KillAwolServersIntervalDuration() time.Duration {
	return c.duration("killAwolServersInterval")
}

// KillDisabledWorkersIntervalDuration is killDisabledWorkersInterval (seconds).
func (c *Config) KillDisabledWorkersIntervalDuration() time.Duration {
	return c.duration("killDisabledWorkersInterval")
}

// InventoryRefreshIntervalDuration is inventoryRefreshInterval (seconds).
func (c *Config) InventoryRefreshIntervalDuration() time.Duration {
	return c.duration("inventoryRefreshInterval")
}
