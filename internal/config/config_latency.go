package config

import "time"

// SlowStartThresholdDuration is slowStartThreshold (seconds); 0 disables
// the slow-start spawn info.
func (c *Config) SlowStartThresholdDuration() time.Duration {
	return time.Duration(c.SlowStartThreshold) * time.Second
}

// validateLatency checks slowStartThreshold.
func (c *Config) validateLatency(es *Errors) {
	if c.SlowStartThreshold < 0 {
		es.add("slowStartThreshold", "%d: must be >= 0 (seconds; 0 never reports a slow start)", c.SlowStartThreshold)
	}
}
