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
