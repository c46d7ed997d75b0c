package admission

import (
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/modelref"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// Plan is a job's plan: everything its spawn builds that the configuration
// decides, resolved once from one configuration snapshot — by the
// admission (AllocateResources), which hands it to the spawn with the
// reservation (PlanOf), else by the spawn itself when it comes without one
// (a registration, a hatchery without the framework's admission). The
// spawn reads the plan, never the configuration: a reload in the middle of
// a spawn changes the next job's plan, not this one's
// (docs/architecture.md, "Goroutines").
type Plan struct {
	// Key is the model's key (modelref.KeyOf): what its configuration
	// entry, its warm pool and its quarantine record name it by.
	Key modelref.Key
	// Template is the template the worker is cloned from (modelref.Of).
	Template modelref.Template
	// QuarantineKey is the quarantine book's key of the template
	// (modelref.Key.QuarantineKey).
	QuarantineKey string
	// Flavor is the flavor the worker gets (config.Config.ResolveFlavor;
	// nil: the template's hardware), FlavorErr the error resolving it (an
	// unknown flavor, reported to the job by the spawn).
	Flavor    *config.Flavor
	FlavorErr error
	// Model is what the model's entry says: the entry itself (guest
	// account, preStartScript), the bootstrap, the OS and the clone mode.
	Model config.ModelSettings
	// Placements are the placements a clone may go to
	// (config.Config.EffectivePlacements) with [[placements]], nil
	// without; Placement and Datastore are the ones the admission's
	// decision chose ("": none chosen, e.g. no admission).
	Placements []config.Placement
	Placement  string
	Datastore  string
	// Folder is folderString: the folder of a clone whose placement names
	// none.
	Folder string
	// WorkerTTL is workerTTL, written in the worker's script.
	WorkerTTL time.Duration
	// Windows are the Windows readiness bounds, read when Model.OS is
	// windows.
	Windows config.WindowsReadiness
	// KeepFailedWorkers and KeepFailedFor are the debug hold of a failed
	// spawn's VM (keepFailedWorkers, keepFailedWorkersFor); 0: none.
	KeepFailedWorkers int
	KeepFailedFor     time.Duration
	// SlowStart is slowStartThreshold, past which a start is reported.
	SlowStart time.Duration
}

// NewPlan resolves the plan of a worker of model for a job with reqs from
// cfg alone: no placement is chosen (the admission adds its decision's).
func NewPlan(cfg *config.Config, model sdk.WorkerStarterWorkerModel, reqs []sdk.Requirement) Plan {
	f, err := cfg.ResolveFlavor(model, reqs)
	return newPlan(cfg, model, f, err)
}

// newPlan is NewPlan with the flavor resolved already.
func newPlan(cfg *config.Config, model sdk.WorkerStarterWorkerModel, flavor *config.Flavor, flavorErr error) Plan {
	key := modelref.KeyOf(model)
	p := Plan{
		Key: key, Template: modelref.Of(model), QuarantineKey: key.QuarantineKey(),
		Flavor: flavor, FlavorErr: flavorErr,
		Model:     cfg.SettingsOf(model),
		Folder:    cfg.FolderString,
		WorkerTTL: cfg.WorkerTTLDuration(),
		Windows:   cfg.WindowsReadinessTimeouts(),

		KeepFailedWorkers: cfg.KeepFailedWorkers,
		KeepFailedFor:     cfg.KeepFailedWorkersForDuration(),
		SlowStart:         cfg.SlowStartThresholdDuration(),
	}
	if len(cfg.Placements) > 0 {
		p.Placements = cfg.EffectivePlacements()
	}
	return p
}

// IsWindows tells whether the plan's workers run Windows.
func (p Plan) IsWindows() bool { return p.Model.OS == config.OSWindows }

// CloudInit tells whether the plan's workers start through cloud-init's
// guestinfo.
func (p Plan) CloudInit() bool { return p.Model.Bootstrap == config.BootstrapCloudInit }

// Instant tells whether the plan's workers are instant clones of a
// running parent.
func (p Plan) Instant() bool { return p.Model.CloneMode == config.CloneModeInstant }

// PlanOf is the plan AllocateResources resolved for the job res was
// returned for (its flavor a copy); ok is false when res is not one of
// AllocateResources' (nil: a spawn without admission).
func PlanOf(res spawn.Reservation) (p Plan, ok bool) {
	h, ok := res.(*heldReservation)
	if !ok || h == nil {
		return Plan{}, false
	}
	p = h.plan
	if p.Flavor != nil {
		c := *p.Flavor
		p.Flavor = &c
	}
	return p, true
}
