// Package vsphere is the vSphere hatchery: it decides which CDS jobs it can
// serve, clones or claims worker VMs, launches the worker through guest
// operations, keeps a warm pool, cleans up, checks capacity and flavors and
// exports metrics. It reaches vCenter only through vctypes.Port. The
// writes on its VMs that the warm pool shares (deletion marks, deletions,
// records, userdata scrubs, the quarantine's attempts) are
// internal/custody's, which it builds and hands to the pool.
package vsphere

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/admission"
	"github.com/cds-contrib/hatchery-vsphere/internal/clonespec"
	"github.com/cds-contrib/hatchery-vsphere/internal/collector"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/custody"
	"github.com/cds-contrib/hatchery-vsphere/internal/instantparent"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/ippool"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/internal/placement"
	"github.com/cds-contrib/hatchery-vsphere/internal/quarantine"
	"github.com/cds-contrib/hatchery-vsphere/internal/spawntiming"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/internal/warmpool"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// HatcheryVSphere is the vSphere hatchery. Create it with New; it is safe
// for concurrent use by the framework's spawners and its own loops.
type HatcheryVSphere struct {
	// cfg is the running configuration, an immutable snapshot replaced as
	// a whole by Reconfigure; each decision reads it once (conf).
	cfg   atomic.Pointer[config.Config]
	ready <-chan struct{}
	vs    vctypes.Port
	cds   cdsclient.Interface
	inv   inventory.Inventory
	log   *slog.Logger
	now   func() time.Time
	// parentsEvery is the instant-parents loop's period
	// (Options.InstantParentsInterval).
	parentsEvery time.Duration
	// metrics counts capacity refusals; nil: not counted.
	metrics *metrics.Metrics
	// collector computes the gauges (internal/collector).
	collector *collector.Collector
	// started is when this process built the hatchery: a VM created
	// earlier was created by an earlier run, whose in-memory bookkeeping
	// (spawns in flight, deletion marks) is gone.
	started time.Time
	// instance names this process in the records of the workers it
	// spawns (inventory.Annotation.SpawnedBy): random, drawn in New.
	instance string
	// othersFinished holds, by VM reference, when the awol cleanup first
	// found a VM another process spawned ready to delete (finished.go),
	// under othersMu.
	othersMu       sync.Mutex
	othersFinished map[string]time.Time

	// Local bookkeeping (docs/design.md#annotation): accelerators covering the window before
	// the inventory sees the hatchery's own writes; rebuilt from
	// annotations after a restart.
	life *lifecycle.Table // each VM this run works on: its phase (docs/lifecycle.md)

	// onTimed, when set (benchmarks), receives every successful spawn's
	// timing. Set before the first spawn, never changed afterwards.
	onTimed func(spawn.Arguments, spawntiming.Timing)

	ips      *ippool.Pool       // static IPs (internal/ippool)
	capacity *admission.State   // in-flight footprints (internal/admission)
	pool     *warmpool.Pool     // warm pool (internal/warmpool)
	clones   *clonespec.Builder // clone specs and template devices (internal/clonespec)
	// custody makes the writes on this hatchery's VMs (deletion marks,
	// deletions, records, userdata scrubs) and keeps the quarantine book
	// and the cloud-init VMs holding a token (internal/custody); the warm
	// pool holds the same one.
	custody *custody.Custody
	// placements chooses each clone's placement and keeps their states
	// (internal/placement); Placements hands it to the operators' side.
	placements placement.Set
	// parents are the instant-clone parents' state between passes of the
	// instant-parents loop (internal/instantparent, instant_parents.go);
	// parentsBlanked the parents whose Notes and guestinfo this run
	// blanked, by name.
	parents        *instantparent.State
	parentsBlanked sync.Map
	// parentsWaiting holds the parent keys waiting for capacity (logged
	// once when the wait starts).
	parentsWaiting sync.Map

	// loopMoved maps a loop's name (Run) to when it started or last ended
	// a pass, in Unix nanoseconds (*atomic.Int64): LoopProgress.
	loopMoved sync.Map
}

// Options are what New needs. Inventory defaults to an inventory.Listing
// over Client; Logger to slog.Default(); Now to time.Now.
type Options struct {
	Config    *config.Config
	Client    vctypes.Port
	CDS       cdsclient.Interface
	Inventory inventory.Inventory
	Logger    *slog.Logger
	Now       func() time.Time
	// Metrics, when set, counts the jobs refused for lack of room
	// (capacity_refusals).
	Metrics *metrics.Metrics
	// Ready, when set, is closed once vCenter work can start (the first
	// connection, and the inventory's first listing); until then the
	// methods the framework calls answer "not ready" instead of failing on
	// vCenter (see notReady). Nil: ready at once.
	Ready <-chan struct{}
	// InstantParentsInterval is the period of the instant-parents loop
	// (0: instantParentsInterval, 10 s). The demo shortens it as it
	// shortens its other loops: a parent built in a pass serves children
	// from the next pass on.
	InstantParentsInterval time.Duration
}

// New builds the hatchery from a validated configuration, whose flavor
// names it normalises in place (config.Config.Normalize) when they are not
// yet.
func New(o Options) (*HatcheryVSphere, error) {
	if o.Config == nil || o.Client == nil {
		return nil, errors.New("new vsphere hatchery: config and client are required")
	}
	// The flavor names are compared as config.FlavorName leaves them.
	o.Config.Normalize()
	h := &HatcheryVSphere{
		vs:      o.Client,
		cds:     o.CDS,
		inv:     o.Inventory,
		log:     o.Logger,
		now:     o.Now,
		metrics: o.Metrics,
		ready:   o.Ready,

		instance:       newInstanceID(),
		othersFinished: map[string]time.Time{},
	}
	h.parentsEvery = o.InstantParentsInterval
	if h.parentsEvery <= 0 {
		h.parentsEvery = instantParentsInterval
	}
	h.cfg.Store(o.Config)
	if h.inv == nil {
		h.inv = inventory.Listing{Client: o.Client}
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	if h.now == nil {
		h.now = time.Now
	}
	h.started = h.now()
	h.collector = collector.New(collector.Options{Hatchery: h.Name(), Config: o.Config, Live: h.conf, Inventory: h.inv,
		Port: o.Client, PoolRuntime: func() *vctypes.PoolRuntime { return h.admission().InventoryPoolRuntime() },
		Placements: h.ShownPlacements, WarmPools: h.warmPoolGauges, Log: h.log})
	h.life = lifecycle.New(func() time.Time { return h.now() })
	h.life.OnBug(func(err error) { h.log.Error("lifecycle move refused", logkey.Err, err) })
	ips, err := ippool.New(o.Config)
	if err != nil {
		return nil, err
	}
	if ips.Enabled() {
		// Two instances of one hatchery take each address through a lock
		// vCenter keeps unique (docs/high-availability.md, "Static IPs").
		ips.UseLocks(o.Client, o.Config.CommonConfiguration.Name, h.log)
	}
	h.ips = ips
	h.capacity = admission.NewState()
	h.parents = instantparent.NewState()
	h.capacity.Book = newPlacementBook(o.Config, h.log, func() time.Time { return h.now() })
	h.placements = h.capacity.Book
	h.clones = clonespec.New(clonespec.Options{Port: o.Client, Config: o.Config, Live: h.conf, IPs: ips, Now: func() time.Time { return h.now() }})
	h.custody = &custody.Custody{
		Hatchery: h.Name(), Port: o.Client, Inventory: h.inv, Life: h.life, IPs: ips,
		Quarantine: quarantine.New(quarantinePolicy(o.Config), h.now), Metrics: h.metrics, Log: h.log,
		ReportRegistration: h.reportRegistrationFailure,
	}
	h.pool = &warmpool.Pool{
		Hatchery: h.Name(), Config: o.Config, Live: h.conf, Port: o.Client,
		Inventory: h.inv, Life: h.life, CDS: o.CDS, IPs: ips, Admission: h.admission, Clone: poolClone(h.cloneVM),
		CloudInit: h.clones.CloudInitOptions,
		Custody:   h.custody, Host: poolHost{h}, Demand: warmpool.NewDemand(),
		DemandStore: o.Client, Log: h.log, Now: func() time.Time { return h.now() },
	}
	return h, nil
}

// Name is the hatchery's name, written in every VM it owns.
func (h *HatcheryVSphere) Name() string { return h.conf().CommonConfiguration.Name }

// ModelType is "vsphere".
func (h *HatcheryVSphere) ModelType() string { return "vsphere" }

// Config returns the hatchery's running configuration (read-only by
// convention): the snapshot of the last Reconfigure, else the one New was
// given. A caller deciding something reads it once and decides from that
// snapshot.
func (h *HatcheryVSphere) Config() *config.Config { return h.cfg.Load() }

// conf is Config: the snapshot a decision reads.
func (h *HatcheryVSphere) conf() *config.Config { return h.cfg.Load() }

// Reconfigure makes cfg, a validated configuration that differs from the
// running one only in keys config.LiveKey accepts (internal/daemon's
// reload checks it), the running configuration: it normalises cfg's
// flavor names, sets the quarantine's policy and swaps the snapshot. A
// spawn in flight keeps its plan (admission.Plan, resolved from the
// snapshot its admission read); the decisions and plans that start after
// it read cfg. cfg must not be modified afterwards.
func (h *HatcheryVSphere) Reconfigure(cfg *config.Config) {
	cfg.Normalize()
	h.custody.Quarantine.SetPolicy(quarantinePolicy(cfg))
	h.cfg.Store(cfg)
}

// Run starts the hatchery's own loops (provisioning, awol cleanup, disabled
// workers cleanup) and blocks until ctx ends and all of them have returned.
func (h *HatcheryVSphere) Run(ctx context.Context) {
	var wg sync.WaitGroup
	loop := func(name string, every time.Duration, fn func(context.Context)) {
		if every <= 0 {
			return
		}
		moved := &atomic.Int64{}
		moved.Store(h.now().UnixNano())
		h.loopMoved.Store(name, moved)
		wg.Add(1)
		go func() {
			defer wg.Done()
			runEvery(ctx, h.log, name, every, func(ctx context.Context) {
				fn(ctx)
				moved.Store(h.now().UnixNano())
			})
		}()
	}
	// Started even without pools: a reload may add some (Reconfigure).
	loop("provisioning", h.conf().WorkerProvisioningIntervalDuration(), func(ctx context.Context) {
		if len(h.conf().WorkerProvisioning) > 0 {
			h.pool.Provision(ctx)
		}
	})
	loop("kill-awol-servers", h.conf().KillAwolServersIntervalDuration(), h.killAwolServers)
	loop("kill-disabled-workers", h.conf().KillDisabledWorkersIntervalDuration(), h.killDisabledWorkers)
	// Started even without instant models: a reload may add some, and
	// the parents of a model no longer instant are destroyed.
	loop("instant-parents", h.parentsEvery, h.tendInstantParents)
	wg.Wait()
	// A clean stop writes what the demand pools learnt since their last
	// hourly write; vCenter is closed only after Run returned
	// (internal/daemon).
	saveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), demandSaveAtStop)
	defer cancel()
	h.pool.SaveDemand(saveCtx)
}

// demandSaveAtStop bounds the demand pools' write at a clean stop: one
// small attribute write per demand pool, which a healthy vCenter answers
// in well under a second; a vCenter that does not answer must not hold
// the shutdown (internal/daemon's ShutdownTimeout), and the hourly write
// before it keeps all but the last hour.
const demandSaveAtStop = 5 * time.Second

// LoopProgress tells when the loop named name (Run: "provisioning",
// "kill-awol-servers", "kill-disabled-workers", "instant-parents") started or last ended a
// pass, for a watchdog; zero when it has not started.
func (h *HatcheryVSphere) LoopProgress(name string) time.Time {
	if v, ok := h.loopMoved.Load(name); ok {
		return time.Unix(0, v.(*atomic.Int64).Load())
	}
	return time.Time{}
}

// runEvery runs fn at once, then every interval, until ctx ends. A run
// never overlaps the next: a slow pass delays the following tick.
func runEvery(ctx context.Context, log *slog.Logger, name string, every time.Duration, fn func(context.Context)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		fn(ctx)
		select {
		case <-ctx.Done():
			log.Debug("loop stopped", "loop", name)
			return
		case <-t.C:
		}
	}
}

// indexOf returns the index of vms: the inventory's own when vms is its
// current snapshot, else one built now.
func (h *HatcheryVSphere) indexOf(vms []inventory.VM) *inventory.Index {
	return inventory.IndexOf(h.inv, vms)
}
