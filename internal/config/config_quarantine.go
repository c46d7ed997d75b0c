package config

import "time"

// QuarantineBackoffDuration is quarantineBackoff (seconds): the first
// quarantine period of a broken template.
func (c *Config) QuarantineBackoffDuration() time.Duration {
	return c.duration("quarantineBackoff")
}

// QuarantineBackoffMaxDuration is quarantineBackoffMax (seconds): the
// longest quarantine period.
func (c *Config) QuarantineBackoffMaxDuration() time.Duration {
	return c.duration("quarantineBackoffMax")
}

// validateQuarantine checks quarantineThreshold (the ranges of the two
// back-off keys are checked with the other duration keys; a cap below the
// first period caps that one too).
func (c *Config) validateQuarantine(es *Errors) {
	if c.QuarantineThreshold <= 0 {
		es.add("quarantineThreshold", "%d: must be > 0 (consecutive spawn failures of a template before it is quarantined)", c.QuarantineThreshold)
	}
}

// MaxKeepFailedWorkers bounds keepFailedWorkers: every held VM keeps its
// CPU and memory, so a typo must not hold a datacenter's worth.
const MaxKeepFailedWorkers = 100

// KeepFailedWorkersForDuration is keepFailedWorkersFor (seconds): how long
// the VM of a failed spawn is held for inspection.
func (c *Config) KeepFailedWorkersForDuration() time.Duration {
	return c.duration("keepFailedWorkersFor")
}

// validateDebugHold checks keepFailedWorkers (the range of
// keepFailedWorkersFor is checked with the other duration keys).
func (c *Config) validateDebugHold(es *Errors) {
	if c.KeepFailedWorkers < 0 || c.KeepFailedWorkers > MaxKeepFailedWorkers {
		es.add("keepFailedWorkers", "%d: must be 0-%d (VMs of failed spawns kept powered on for inspection; 0: none)", c.KeepFailedWorkers, MaxKeepFailedWorkers)
	}
}
