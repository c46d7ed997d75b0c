package vsphere

import "time"

// WorkerTTLDuration is workerTTL (minutes) as a duration.
func (c *Configuration) WorkerTTLDuration() time.Duration {
	return time.Duration(c.WorkerTTL) * time.Minute
}

// WorkerRegistrationTTLDuration is workerRegistrationTTL (minutes) as a duration.
func (c *Configuration) WorkerRegistrationTTLDuration() time.Duration {
	return time.Duration(c.WorkerRegistrationTTL) * time.Minute
}

// WorkerProvisioningIntervalDuration is workerProvisioningInterval (seconds).
func (c *Configuration) WorkerProvisioningIntervalDuration() time.Duration {
	return time.Duration(c.WorkerProvisioningInterval) * time.Second
}

// KillAwolServersIntervalDuration is killAwolServersInterval (seconds).
func (c *Configuration) KillAwolServersIntervalDuration() time.Duration {
	return time.Duration(c.KillAwolServersInterval) * time.Second
}

// KillDisabledWorkersIntervalDuration is killDisabledWorkersInterval (seconds).
func (c *Configuration) KillDisabledWorkersIntervalDuration() time.Duration {
	return time.Duration(c.KillDisabledWorkersInterval) * time.Second
}

// InventoryRefreshIntervalDuration is inventoryRefreshInterval (seconds).
func (c *Configuration) InventoryRefreshIntervalDuration() time.Duration {
	return time.Duration(c.InventoryRefreshInterval) * time.Second
}
