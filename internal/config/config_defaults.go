package config

import "github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"

// Default values of the settings that have one. Default is the
// only place they are applied; docs/configuration.md and
// configs/hatchery.toml show the same values.
const (
	DefaultCardName                    = "e1000"
	DefaultSubnetMask                  = "255.255.255.0"
	DefaultWorkerTTL                   = 120 // minutes
	DefaultWorkerRegistrationTTL       = 10  // minutes
	DefaultWorkerProvisioningInterval  = 120 // seconds
	DefaultWorkerProvisioningPoolSize  = 1
	DefaultPoolWarmShare               = 0.9 // share of a demand-driven pool's jobs that find a ready VM
	DefaultPoolIdleMinutes             = 30  // minutes a demand-driven pool keeps VMs the demand no longer needs
	DefaultPoolTimeZone                = "UTC"
	DefaultKillAwolServersInterval     = 120 // seconds
	DefaultKillDisabledWorkersInterval = 120 // seconds
	DefaultInventoryRefreshInterval    = 60  // seconds; the hatchery's own writes refresh sooner
	DefaultMaxConcurrentTasks          = 8
	DefaultSlowStartThreshold          = 300  // seconds, queued to worker launched
	DefaultQuarantineThreshold         = 3    // consecutive template failures
	DefaultQuarantineBackoff           = 120  // seconds: the first quarantine period
	DefaultQuarantineBackoffMax        = 1800 // seconds: the longest quarantine period
	DefaultKeepFailedWorkers           = 0    // VMs of failed spawns held: off
	DefaultKeepFailedWorkersFor        = 3600 // seconds: how long one is held

	DefaultHTTPAddr                       = "127.0.0.1"
	DefaultHTTPPort                       = 8086
	DefaultAPIRequestTimeout              = 10 // seconds
	DefaultAPIMaxHeartbeatFailures        = 10
	DefaultMaxWorker                      = 10
	DefaultMaxConcurrentProvisioning      = 10
	DefaultMaxConcurrentRegistering       = 2
	DefaultRegisterFrequency              = 60 // seconds
	DefaultMaxAttemptsNumberBeforeFailure = 5
)

// Default returns the configuration every loaded file starts
// from: the defaults of the upstream CDS hatchery (vSphere keys and the common provision block)
// plus this project's own (inventory, vCenter task bound, /mon listener on
// 127.0.0.1:8086, the port CDS hatcheries use by default). Keys without a
// default (name, endpoint, credentials…) are left empty; Validate reports the
// required ones.
func Default() Config {
	return Config{
		CommonConfiguration: hatchery.CommonConfiguration{
			HTTP: hatchery.HTTPConfig{
				Addr: DefaultHTTPAddr,
				Port: DefaultHTTPPort,
			},
			API: hatchery.APIConfig{
				RequestTimeout:       DefaultAPIRequestTimeout,
				MaxHeartbeatFailures: DefaultAPIMaxHeartbeatFailures,
			},
			Provision: hatchery.ProvisionConfig{
				MaxWorker:                      DefaultMaxWorker,
				MaxConcurrentProvisioning:      DefaultMaxConcurrentProvisioning,
				MaxConcurrentRegistering:       DefaultMaxConcurrentRegistering,
				RegisterFrequency:              DefaultRegisterFrequency,
				MaxAttemptsNumberBeforeFailure: DefaultMaxAttemptsNumberBeforeFailure,
			},
		},
		CardName:                    DefaultCardName,
		SubnetMask:                  DefaultSubnetMask,
		WorkerTTL:                   DefaultWorkerTTL,
		WorkerRegistrationTTL:       DefaultWorkerRegistrationTTL,
		WorkerProvisioningInterval:  DefaultWorkerProvisioningInterval,
		WorkerProvisioningPoolSize:  DefaultWorkerProvisioningPoolSize,
		KillAwolServersInterval:     DefaultKillAwolServersInterval,
		KillDisabledWorkersInterval: DefaultKillDisabledWorkersInterval,
		InventoryMode:               InventoryWatch,
		InventoryRefreshInterval:    DefaultInventoryRefreshInterval,
		MaxConcurrentTasks:          DefaultMaxConcurrentTasks,
		DefaultBootstrap:            BootstrapGuestOps,
		V2PreCmd:                    hatchery.DefaultV2Commands().PreCmd,
		V2Cmd:                       hatchery.DefaultV2Commands().Cmd,
		V2PostCmd:                   hatchery.DefaultV2Commands().PostCmd,
		SlowStartThreshold:          DefaultSlowStartThreshold,
		QuarantineThreshold:         DefaultQuarantineThreshold,
		QuarantineBackoff:           DefaultQuarantineBackoff,
		QuarantineBackoffMax:        DefaultQuarantineBackoffMax,
		KeepFailedWorkers:           DefaultKeepFailedWorkers,
		KeepFailedWorkersFor:        DefaultKeepFailedWorkersFor,
		WindowsGuestOpsTimeout:      DefaultWindowsGuestOpsTimeout,
		WindowsIPTimeout:            DefaultWindowsIPTimeout,
		WindowsEnvTimeout:           DefaultWindowsEnvTimeout,
		DrainTimeout:                DefaultDrainTimeout,
	}
}
