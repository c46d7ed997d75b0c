package config

import (
	"github.com/cds-contrib/hatchery-vsphere/internal/config/upstream"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// Config is [hatchery.vsphere] (docs/configuration.md lists every
// key). Defaults live in Default, checks in Validate; fields
// in seconds or minutes are read through the Duration accessors.
type Config struct {
	// upstream is what the loader did with the file's upstream forms,
	// workerLog the workers' log configuration and osArch the V2 queue's
	// os/arch read from them (config_upstream.go); unexported: no key of
	// their own.
	upstream  *upstream.Report
	workerLog spawn.WorkerLogConfig
	osArch    []string

	CommonConfiguration hatchery.CommonConfiguration `mapstructure:"commonConfiguration" toml:"commonConfiguration" json:"commonConfiguration"`

	// vCenter connection. Password is a secret: never logged or shown.
	User     string `mapstructure:"user" toml:"user" json:"user"`
	Endpoint string `mapstructure:"endpoint" toml:"endpoint" json:"endpoint"`
	Password string `mapstructure:"password" toml:"password" json:"-"`
	// Insecure switches TLS verification of vCenter off (opt-in).
	Insecure bool `mapstructure:"insecure" toml:"insecure" json:"insecure"`
	// CAFile is a PEM bundle trusted for vCenter's certificate.
	CAFile string `mapstructure:"caFile" toml:"caFile" json:"caFile"`

	// Placement.
	DatacenterString   string `mapstructure:"datacenterString" toml:"datacenterString" json:"datacenterString"`
	DatastoreString    string `mapstructure:"datastoreString" toml:"datastoreString" json:"datastoreString"`
	NetworkString      string `mapstructure:"networkString" toml:"networkString" json:"networkString"`
	ResourcePoolString string `mapstructure:"resourcePoolString" toml:"resourcePoolString" json:"resourcePoolString"`
	FolderString       string `mapstructure:"folderString" toml:"folderString" json:"folderString"`
	CardName           string `mapstructure:"cardName" toml:"cardName" json:"cardName"`
	// TemplateFolders are the VM folders (inventory paths) where templates
	// are looked for, subtrees included: with the hatchery's own folder
	// (folderString), the inventory's scope (config_scope.go,
	// docs/inventory-watch.md). Empty: derived, the VM folder's top level
	// and the folder of each template found by name.
	TemplateFolders []string `mapstructure:"templateFolders" toml:"templateFolders" json:"templateFolders"`
	// Placements are where clones may go, each chosen by headroom
	// (config_placements.go, docs/configuration.md "Placements"); empty:
	// the keys above are one placement (EffectivePlacements).
	Placements []Placement `mapstructure:"placements" toml:"placements" json:"placements"`
	// DatastoreFloorGB is the free space, in GB, below which a datastore
	// takes no clone (0: no floor); a placement may set its own.
	DatastoreFloorGB int64 `mapstructure:"datastoreFloorGB" toml:"datastoreFloorGB" json:"datastoreFloorGB"`

	// Static IPs: iprange/gateway/dns/subnetMask (one range set), or several
	// [[networks]] each with its own gateway and mask.
	IPRange    string    `mapstructure:"iprange" toml:"iprange" json:"iprange"`
	Gateway    string    `mapstructure:"gateway" toml:"gateway" json:"gateway"`
	DNS        string    `mapstructure:"dns" toml:"dns" json:"dns"`
	SubnetMask string    `mapstructure:"subnetMask" toml:"subnetMask" json:"subnetMask"`
	Networks   []Network `mapstructure:"networks" toml:"networks" json:"networks"`

	// Lifetimes and loops.
	// WorkerTTL is in minutes.
	WorkerTTL int `mapstructure:"workerTTL" toml:"workerTTL" json:"workerTTL"`
	// WorkerRegistrationTTL is in minutes.
	WorkerRegistrationTTL int `mapstructure:"workerRegistrationTTL" toml:"workerRegistrationTTL" json:"workerRegistrationTTL"`
	// WorkerProvisioningInterval is in seconds.
	WorkerProvisioningInterval int                  `mapstructure:"workerProvisioningInterval" toml:"workerProvisioningInterval" json:"workerProvisioningInterval"`
	WorkerProvisioningPoolSize int                  `mapstructure:"workerProvisioningPoolSize" toml:"workerProvisioningPoolSize" json:"workerProvisioningPoolSize"`
	WorkerProvisioning         []WorkerProvisioning `mapstructure:"workerProvisioning" toml:"workerProvisioning" json:"workerProvisioning"`
	// KillAwolServersInterval is in seconds.
	KillAwolServersInterval int `mapstructure:"killAwolServersInterval" toml:"killAwolServersInterval" json:"killAwolServersInterval"`
	// KillDisabledWorkersInterval is in seconds.
	KillDisabledWorkersInterval int `mapstructure:"killDisabledWorkersInterval" toml:"killDisabledWorkersInterval" json:"killDisabledWorkersInterval"`

	// Guest credentials per model; "models" is accepted as an alias.
	GuestCredentials      []GuestCredential       `mapstructure:"guestCredentials" toml:"guestCredentials" json:"guestCredentials"`
	Models                []GuestCredential       `mapstructure:"models" toml:"models" json:"models"`
	DefaultWorkerModelsV2 []DefaultWorkerModelsV2 `mapstructure:"defaultWorkerModelsV2" toml:"defaultWorkerModelsV2" json:"defaultWorkerModelsV2"`

	// Guest commands of V2 models (config_v2commands.go): Go templates
	// rendered with spawn.ModelTemplateData; a guestCredentials/models
	// entry of a V2 template may set its own.
	V2PreCmd  string `mapstructure:"v2PreCmd" toml:"v2PreCmd" json:"v2PreCmd"`
	V2Cmd     string `mapstructure:"v2Cmd" toml:"v2Cmd" json:"v2Cmd"`
	V2PostCmd string `mapstructure:"v2PostCmd" toml:"v2PostCmd" json:"v2PostCmd"`

	// V2TemplateNames are the templates a V2 model's spec.image may name
	// (config_v2templates.go): path.Match patterns matched against the
	// template's name; empty allows any template, as before the key.
	V2TemplateNames []string `mapstructure:"v2TemplateNames" toml:"v2TemplateNames" json:"v2TemplateNames"`

	// Resource-based capacity (docs/design.md#capacity-degradation); 0 = no static limit.
	MaxCPUs     int   `mapstructure:"maxCpus" toml:"maxCpus" json:"maxCpus"`
	MaxMemoryMB int64 `mapstructure:"maxMemoryMB" toml:"maxMemoryMB" json:"maxMemoryMB"`

	// Flavors (docs/design.md#flavor-configuration). Both TOML forms are accepted by the
	// loader ([[hatchery.vsphere.flavors]] name=… and
	// [hatchery.vsphere.flavors.NAME]); after loading Flavors holds one entry
	// per flavor with a lower-cased Name.
	Flavors                  []Flavor `mapstructure:"-" toml:"-" json:"flavors"`
	DefaultFlavor            string   `mapstructure:"defaultFlavor" toml:"defaultFlavor" json:"defaultFlavor"`
	CountSmallerFlavorToKeep int      `mapstructure:"countSmallerFlavorToKeep" toml:"countSmallerFlavorToKeep" json:"countSmallerFlavorToKeep"`

	// vCenter load (docs/inventory-watch.md). InventoryMode is "watch" (one inventory of
	// leaf properties kept current by a change watch), "shared" (the same
	// inventory refreshed by full listings) or "listing" (list on every
	// read).
	InventoryMode string `mapstructure:"inventoryMode" toml:"inventoryMode" json:"inventoryMode"`
	// InventoryRefreshInterval is in seconds.
	InventoryRefreshInterval int `mapstructure:"inventoryRefreshInterval" toml:"inventoryRefreshInterval" json:"inventoryRefreshInterval"`
	// MaxConcurrentTasks bounds vCenter tasks in flight (clone, power, destroy…).
	MaxConcurrentTasks int `mapstructure:"maxConcurrentTasks" toml:"maxConcurrentTasks" json:"maxConcurrentTasks"`

	// Bootstrap and upstream keys (config_bootstrap.go). DefaultBootstrap
	// is the bootstrap mode of models without their own ("guestops" or
	// "cloud-init").
	DefaultBootstrap string `mapstructure:"defaultBootstrap" toml:"defaultBootstrap" json:"defaultBootstrap"`
	// FinishedWorkerGracePeriod is in seconds: how long the VM of a
	// finished worker is kept before it is destroyed.
	FinishedWorkerGracePeriod int `mapstructure:"finishedWorkerGracePeriod" toml:"finishedWorkerGracePeriod" json:"finishedWorkerGracePeriod"`
	// DisableV2QueuePolling reads the V2 queue from websocket events only.
	DisableV2QueuePolling bool `mapstructure:"disableV2QueuePolling" toml:"disableV2QueuePolling" json:"disableV2QueuePolling"`
	// SlowStartThreshold is in seconds: a job whose worker is launched
	// later than this after the job was queued gets a spawn info saying
	// where the time went (docs/metrics.md). 0: never.
	SlowStartThreshold int `mapstructure:"slowStartThreshold" toml:"slowStartThreshold" json:"slowStartThreshold"`
	// LinkedCloneSnapshot names the snapshot of the templates that linked
	// clones are made from; empty: each template's current snapshot. A
	// template without it is cloned in full (docs/flavors-and-capacity.md).
	LinkedCloneSnapshot string `mapstructure:"linkedCloneSnapshot" toml:"linkedCloneSnapshot" json:"linkedCloneSnapshot"`

	// Quarantine of a broken template (docs/design.md#quarantine).
	// QuarantineThreshold is the number of consecutive spawn failures
	// pointing at a template (or V1 model) that quarantine it.
	QuarantineThreshold int `mapstructure:"quarantineThreshold" toml:"quarantineThreshold" json:"quarantineThreshold"`
	// QuarantineBackoff is in seconds: the first quarantine period.
	QuarantineBackoff int `mapstructure:"quarantineBackoff" toml:"quarantineBackoff" json:"quarantineBackoff"`
	// QuarantineBackoffMax is in seconds: the period doubles after each
	// failed probe up to this.
	QuarantineBackoffMax int `mapstructure:"quarantineBackoffMax" toml:"quarantineBackoffMax" json:"quarantineBackoffMax"`

	// Debug hold of failed spawns (docs/design.md#debug-hold).
	// KeepFailedWorkers is how many VMs of failed spawns are kept powered
	// on for inspection at a time; 0 (the default) deletes them at once.
	KeepFailedWorkers int `mapstructure:"keepFailedWorkers" toml:"keepFailedWorkers" json:"keepFailedWorkers"`
	// KeepFailedWorkersFor is in seconds: how long a VM stays held.
	KeepFailedWorkersFor int `mapstructure:"keepFailedWorkersFor" toml:"keepFailedWorkersFor" json:"keepFailedWorkersFor"`

	// Readiness bounds of Windows guests (config_guestos.go,
	// docs/windows.md), in seconds: guest operations ready, the IP, the
	// first program started.
	WindowsGuestOpsTimeout int `mapstructure:"windowsGuestOpsTimeout" toml:"windowsGuestOpsTimeout" json:"windowsGuestOpsTimeout"`
	WindowsIPTimeout       int `mapstructure:"windowsIPTimeout" toml:"windowsIPTimeout" json:"windowsIPTimeout"`
	WindowsEnvTimeout      int `mapstructure:"windowsEnvTimeout" toml:"windowsEnvTimeout" json:"windowsEnvTimeout"`

	// Operations (config_operations.go, docs/operations.md).
	// DrainTimeout is in seconds: how long a stop (SIGTERM) drains, waiting
	// for the spawns in flight, before the shutdown; 0: no drain.
	DrainTimeout int `mapstructure:"drainTimeout" toml:"drainTimeout" json:"drainTimeout"`
	// CtlSocket is the unix socket `hatchery-vsphere ctl` talks to; empty:
	// ctl.sock in $RUNTIME_DIRECTORY, none without it.
	CtlSocket string `mapstructure:"ctlSocket" toml:"ctlSocket" json:"ctlSocket"`
	// LogLevel is the daemon's log level (debug, info, warn, error); empty:
	// the --log-level flag's. Set, it wins over the flag, and a reload
	// applies it (config_operations.go).
	LogLevel string `mapstructure:"logLevel" toml:"logLevel" json:"logLevel"`
}

// Network is one static IP range with its own gateway, mask and DNS.
type Network struct {
	IPRange    string `mapstructure:"iprange" toml:"iprange" json:"iprange"`
	Gateway    string `mapstructure:"gateway" toml:"gateway" json:"gateway"`
	DNS        string `mapstructure:"dns" toml:"dns" json:"dns"`
	SubnetMask string `mapstructure:"subnetMask" toml:"subnetMask" json:"subnetMask"`
}

// WorkerProvisioning is one warm-pool entry (docs/design.md#provisioned-vms).
type WorkerProvisioning struct {
	// ModelPath is a V1 model path ("group/model").
	ModelPath string `mapstructure:"modelPath" toml:"modelPath" json:"modelPath"`
	// ModelVMWare is a V2 template name ("debian12").
	ModelVMWare string `mapstructure:"modelVMWare" toml:"modelVMWare" json:"modelVMWare"`
	Number      int    `mapstructure:"number" toml:"number" json:"number"`
	// Flavor pre-sizes the pool's VMs; "" keeps them neutral (template size).
	Flavor string `mapstructure:"flavor" toml:"flavor" json:"flavor"`
	// IdleState is the state the pool's VMs wait in: IdleStatePoweredOff
	// ("" too), IdleStateSuspended or IdleStatePoweredOn
	// (docs/configuration.md, "Warm pool"). A suspended or powered-on pool needs Flavor.
	IdleState string `mapstructure:"idleState" toml:"idleState" json:"idleState"`
	// Min, Max, WarmShare, IdleMinutes, AheadMinutes, TimeZone and
	// Schedules make the pool follow demand instead of keeping Number
	// (config_pools.go, docs/warm-pools.md).
	Min          int            `mapstructure:"min" toml:"min" json:"min"`
	Max          int            `mapstructure:"max" toml:"max" json:"max"`
	WarmShare    float64        `mapstructure:"warmShare" toml:"warmShare" json:"warmShare"`
	IdleMinutes  int            `mapstructure:"idleMinutes" toml:"idleMinutes" json:"idleMinutes"`
	AheadMinutes int            `mapstructure:"aheadMinutes" toml:"aheadMinutes" json:"aheadMinutes"`
	TimeZone     string         `mapstructure:"timeZone" toml:"timeZone" json:"timeZone"`
	Schedules    []PoolSchedule `mapstructure:"schedules" toml:"schedules" json:"schedules"`
}

// The idle states of a warm-pool entry (WorkerProvisioning.IdleState).
const (
	// IdleStatePoweredOff: cloned, booted once for its IP, powered off; a
	// claim boots it (the default).
	IdleStatePoweredOff = "poweredOff"
	// IdleStateSuspended: booted once, then suspended; a claim resumes it.
	IdleStateSuspended = "suspended"
	// IdleStatePoweredOn: booted and running idle; it counts against
	// maxCpus/maxMemoryMB.
	IdleStatePoweredOn = "poweredOn"
)

// State is the entry's idle state, IdleStatePoweredOff when unset.
func (w WorkerProvisioning) State() string {
	if w.IdleState == "" {
		return IdleStatePoweredOff
	}
	return w.IdleState
}

// Hot tells whether the entry's VMs wait booted (suspended or powered on).
func (w WorkerProvisioning) Hot() bool {
	s := w.State()
	return s == IdleStateSuspended || s == IdleStatePoweredOn
}

// GuestCredential gives the guest OS account for a model (docs/configuration.md).
// Password is a secret.
type GuestCredential struct {
	ModelPath      string `mapstructure:"modelPath" toml:"modelPath" json:"modelPath"`
	ModelVMWare    string `mapstructure:"modelVMWare" toml:"modelVMWare" json:"modelVMWare"`
	Username       string `mapstructure:"username" toml:"username" json:"username"`
	Password       string `mapstructure:"password" toml:"password" json:"-"`
	PreStartScript string `mapstructure:"preStartScript" toml:"preStartScript" json:"preStartScript"`
	// Bootstrap is how the model's workers start: "guestops", "cloud-init"
	// or empty for defaultBootstrap. A cloud-init entry needs no username.
	Bootstrap string `mapstructure:"bootstrap" toml:"bootstrap" json:"bootstrap"`
	// V2PreCmd, V2Cmd and V2PostCmd are the guest commands of the V2
	// template's workers (modelVMWare entries only); an entry setting any
	// of them replaces the three defaults (v2PreCmd, v2Cmd, v2PostCmd).
	V2PreCmd  string `mapstructure:"v2PreCmd" toml:"v2PreCmd" json:"v2PreCmd"`
	V2Cmd     string `mapstructure:"v2Cmd" toml:"v2Cmd" json:"v2Cmd"`
	V2PostCmd string `mapstructure:"v2PostCmd" toml:"v2PostCmd" json:"v2PostCmd"`
	// OS is the guest OS of the model's template: "linux" (or empty) or
	// "windows" (docs/windows.md): it chooses the customization, the
	// launch and the guestinfo bootstrap's documents.
	OS string `mapstructure:"os" toml:"os" json:"os"`
	// CloneMode is how the model's workers are cloned: "" or "linked"
	// (a linked clone, full without a snapshot) or "instant" (an instant
	// clone of a running parent, docs/instant-clones.md).
	CloneMode string `mapstructure:"cloneMode" toml:"cloneMode" json:"cloneMode"`
}

// DefaultWorkerModelsV2 maps V1 jobs to a V2 model by binary requirement (docs/configuration.md).
type DefaultWorkerModelsV2 struct {
	WorkerModelV2 string   `mapstructure:"workerModelV2" toml:"workerModelV2" json:"workerModelV2"`
	Binaries      []string `mapstructure:"binaries" toml:"binaries" json:"binaries"`
}

// Flavor is one flavor: CPU and RAM applied at clone or claim time,
// and an optional disk size that may only grow the template's first disk.
type Flavor struct {
	Name       string `mapstructure:"name" toml:"name" json:"name"`
	CPUs       int32  `mapstructure:"cpus" toml:"cpus" json:"cpus"`
	MemoryMB   int64  `mapstructure:"memoryMB" toml:"memoryMB" json:"memoryMB"`
	DiskSizeGB int64  `mapstructure:"diskSizeGB" toml:"diskSizeGB" json:"diskSizeGB,omitempty"`
}

// Growth is the flavor as a reconfigure's or a clone's growth of a VM's
// hardware (vctypes.Growth: CPUs, memory, the first disk's size); nil for
// a nil flavor.
func (f *Flavor) Growth() *vctypes.Growth {
	if f == nil {
		return nil
	}
	return &vctypes.Growth{Flavor: f.Name, CPUs: f.CPUs, MemoryMB: f.MemoryMB, DiskSizeGB: f.DiskSizeGB}
}

// Inventory modes (inventoryMode).
const (
	// InventoryWatch (the default): one shared inventory kept current by a
	// change watch, reading only what moved (inventory.NewWatch).
	InventoryWatch = "watch"
	// InventoryShared: one shared inventory refreshed by a full leaf
	// listing every interval (inventory.NewShared).
	InventoryShared = "shared"
	// InventoryListing: no inventory, a listing on every read (the plainest
	// design, docs/inventory-watch.md compares the modes).
	InventoryListing = "listing"
)

// InventoryModes lists the allowed inventoryMode values.
var InventoryModes = []string{InventoryWatch, InventoryShared, InventoryListing}
