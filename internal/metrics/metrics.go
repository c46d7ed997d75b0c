package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	ocprom "contrib.go.opencensus.io/exporter/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.opencensus.io/metric/metricproducer"
	"go.opencensus.io/stats"
	"go.opencensus.io/stats/view"
	"go.opencensus.io/tag"
)

// Metrics of the vSphere hatchery (docs/metrics.md).
//
// Every Metrics owns its OpenCensus view.Meter, its views and a Prometheus
// registry: several hatcheries (or tests) in one process never see each
// other's series. The view names are those of docs/metrics.md,
// "cds/hatchery/vsphere/…"; the OpenCensus Prometheus exporter turns them
// into "cds_hatchery_vsphere_…" (no exporter namespace is needed: the
// prefix is part of the view name).
//
// Gauges are rebuilt by each collection pass (Collect, called by the
// hatchery's collector, vsphere.HatcheryVSphere.RunMetrics):
// a gauge whose source could not be read in the last pass is absent from
// the scrape rather than stale. Counters and the spawn histogram accumulate
// for the life of the Metrics.
//
// The hooks Headroom, SOAP and Logger are set once, before RunMetrics starts
// and before the spawn methods are called; they are not changed afterwards.
// The spawn methods are safe for concurrent use.
type Metrics struct {
	// Headroom, when set, tells how many more workers of each flavor would
	// pass the capacity check now (vsphere.HatcheryVSphere.FlavorHeadroom). nil: the
	// flavor_headroom gauge is not recorded.
	Headroom func(ctx context.Context) (map[string]int, error)
	// SOAP, when set, returns a snapshot of the cumulative SOAP counters of
	// the vCenter client, by SOAP method. nil: soap_requests and soap_bytes
	// are not recorded.
	SOAP func() map[string]SOAPCount
	// Health, when set, is read at every scrape (it must not block) for the
	// gauges that have to be current even while no collection pass can run,
	// vCenter being unreachable: vcenter_up, inventory_stale and
	// inventory_age_seconds. nil: those gauges are not recorded.
	Health func() Health
	// Logger receives the spawn methods' warnings; nil means slog.Default().
	// Collection passes log through the hatchery's logger.
	Logger *slog.Logger

	service string
	base    []tag.Mutator // service_name, service_type
	meter   view.Meter
	// cycle are the registered per-pass gauges, replaced by fresh views
	// every pass (guarded by cycleMu).
	cycle []*view.View

	exporter *ocprom.Exporter

	// cycleMu makes a collection pass's reset-and-record atomic for a
	// scrape: Gather never sees a half-rebuilt set of gauges. It is never
	// held across a vCenter round trip.
	cycleMu sync.Mutex

	// closeMu guards closed: nothing is sent to a stopped meter.
	closeMu sync.RWMutex
	closed  bool

	// stateMu guards the collector's memory between passes.
	stateMu  sync.Mutex
	soapPrev map[string]SOAPCount
	// clonesPrev are the clone totals of each placement at the previous
	// pass (placementDeltas).
	clonesPrev map[string]PlacementClones

	// seenMu guards models: the worker models whose spawn counters were
	// set to 0 for every label value (zeroModel).
	seenMu sync.Mutex
	models map[string]bool

	// heartbeatMu guards heartbeatFails, the consecutive failed heartbeats.
	heartbeatMu    sync.Mutex
	heartbeatFails int64
}

// Health is what the daemon knows at scrape time of its links: read by the
// Metrics.Health hook at every scrape.
type Health struct {
	// VCenterUp: connected to vCenter and its last request did not fail in
	// transport.
	VCenterUp bool
	// Inventory is false in listing mode (no shared inventory): the
	// inventory gauges are not recorded then.
	Inventory bool
	// InventoryStale: the shared inventory refuses its snapshot (too old,
	// or never read because every refresh failed).
	InventoryStale bool
	// InventoryAge is the time since the last successful refresh; negative
	// when none succeeded yet (inventory_age_seconds is then not recorded).
	InventoryAge time.Duration
}

// SOAPCount is the cumulative traffic of one SOAP method since the vCenter
// client started: requests sent and bytes exchanged (request and response
// bodies together). The Metrics turns successive snapshots into counters; a
// value that goes down is taken as a restart of the source.
type SOAPCount struct {
	Requests int64
	Bytes    int64
}

// ServiceType is the service_type tag of every series: CDS tags
// hatchery metrics with the service type "hatchery".
const ServiceType = "hatchery"

// Interval is the collection period: 30 s (docs/metrics.md).
const Interval = 30 * time.Second

// metricPrefix starts every view name.
const metricPrefix = "cds/hatchery/vsphere/"

// Tag keys: a fixed, small label set (docs/metrics.md lists it).
var (
	keyServiceName = tag.MustNewKey("service_name")
	keyServiceType = tag.MustNewKey("service_type")
	keyWorkerName  = tag.MustNewKey("worker_name")
	keyWorkerModel = tag.MustNewKey("worker_model")
	keyFlavor      = tag.MustNewKey("flavor")
	keyReason      = tag.MustNewKey("reason")
	keyMethod      = tag.MustNewKey("method")
	keySource      = tag.MustNewKey("source")
	keyResource    = tag.MustNewKey("resource")
	keyStage       = tag.MustNewKey("stage")
	keyState       = tag.MustNewKey("state")
	keyPlacement   = tag.MustNewKey("placement")
	keyDatastore   = tag.MustNewKey("datastore")
)

// Measures. OpenCensus keeps measures in a process-wide registry by name;
// they hold no data, so sharing them between Metrics instances is safe.
var (
	mWorkerVCPUs    = stats.Int64(metricPrefix+"worker_vcpus", "Number of vCPUs of a worker VM of this hatchery", "1")
	mWorkerMemoryMB = stats.Int64(metricPrefix+"worker_memory_mb", "Memory of a worker VM of this hatchery, in MB", "MBy")

	mAllocatedVCPUs     = stats.Int64(metricPrefix+"allocated_vcpus", "vCPUs of this hatchery's powered-on VMs (templates excluded)", "1")
	mAllocatedMemoryMB  = stats.Int64(metricPrefix+"allocated_memory_mb", "Memory of this hatchery's powered-on VMs (templates excluded), in MB", "MBy")
	mVMCount            = stats.Int64(metricPrefix+"vm_count", "VMs of this hatchery, workers and pre-provisioned, any power state (templates excluded)", "1")
	mProvisionedVMCount = stats.Int64(metricPrefix+"provisioned_vm_count", "Pre-provisioned (idle) VMs of this hatchery, by power state", "1")
	mTemplateVCPUs      = stats.Int64(metricPrefix+"template_vcpus", "vCPUs defined by this hatchery's model templates (annotation model=true)", "1")
	mTemplateMemoryMB   = stats.Int64(metricPrefix+"template_memory_mb", "Memory defined by this hatchery's model templates, in MB", "MBy")
	mTemplateCount      = stats.Int64(metricPrefix+"template_count", "Model templates of this hatchery", "1")

	mPoolTotalVCPUs    = stats.Int64(metricPrefix+"pool_total_vcpus", "vCPUs of every powered-on VM of the datacenter (templates excluded)", "1")
	mPoolTotalMemoryMB = stats.Int64(metricPrefix+"pool_total_memory_mb", "Memory of every powered-on VM of the datacenter (templates excluded), in MB", "MBy")
	mPoolTotalVMCount  = stats.Int64(metricPrefix+"pool_total_vm_count", "VMs of the datacenter, any owner, any power state (templates excluded)", "1")

	mRPCPUMaxMHz          = stats.Int64(metricPrefix+"resource_pool_cpu_max_mhz", "Resource pool maximum CPU capacity (runtime.cpu.maxUsage), in MHz", "MHz")
	mRPCPUUsageMHz        = stats.Int64(metricPrefix+"resource_pool_cpu_usage_mhz", "Resource pool current CPU usage (runtime.cpu.overallUsage), in MHz", "MHz")
	mRPCPUUnreservedMHz   = stats.Int64(metricPrefix+"resource_pool_cpu_unreserved_mhz", "Resource pool CPU unreserved for VMs (runtime.cpu.unreservedForVm), in MHz", "MHz")
	mRPMemMaxBytes        = stats.Int64(metricPrefix+"resource_pool_memory_max_bytes", "Resource pool maximum memory capacity (runtime.memory.maxUsage), in bytes", stats.UnitBytes)
	mRPMemUsageBytes      = stats.Int64(metricPrefix+"resource_pool_memory_usage_bytes", "Resource pool current memory usage (runtime.memory.overallUsage), in bytes", stats.UnitBytes)
	mRPMemUnreservedBytes = stats.Int64(metricPrefix+"resource_pool_memory_unreserved_bytes", "Resource pool memory unreserved for VMs (runtime.memory.unreservedForVm), in bytes", stats.UnitBytes)

	mIPUsedCount  = stats.Int64(metricPrefix+"ip_used_count", "Addresses of the configured IP ranges in use by a VM (annotation or guest)", "1")
	mIPTotalCount = stats.Int64(metricPrefix+"ip_total_count", "Addresses in the configured IP ranges", "1")

	mFlavorHeadroom = stats.Int64(metricPrefix+"flavor_headroom", "How many more workers of the flavor would pass the capacity check now", "1")

	mSpawnsStarted   = stats.Int64(metricPrefix+"spawns_started", "Worker spawns started", "1")
	mSpawnsSucceeded = stats.Int64(metricPrefix+"spawns_succeeded", "Worker spawns that launched the worker", "1")
	mSpawnsFailed    = stats.Int64(metricPrefix+"spawns_failed", "Worker spawns that failed, by reason", "1")
	mSpawnDuration   = stats.Float64(metricPrefix+"spawn_duration_seconds", "Time from job taken to worker launched in the guest, successful spawns, in seconds", stats.UnitSeconds)

	mSpawnStage = stats.Float64(metricPrefix+"spawn_stage_seconds", "Duration of one stage of a successful spawn, by stage, in seconds", stats.UnitSeconds)
	mJobStart   = stats.Float64(metricPrefix+"job_start_seconds", "Time from the job queued in CDS to its worker launched, successful spawns, in seconds", stats.UnitSeconds)

	mSOAPRequests = stats.Int64(metricPrefix+"soap_requests", "SOAP requests sent to vCenter, by method", "1")
	mSOAPBytes    = stats.Int64(metricPrefix+"soap_bytes", "SOAP bytes exchanged with vCenter (request and response bodies), by method", stats.UnitBytes)

	mCollectionErrors = stats.Int64(metricPrefix+"collection_errors", "Collection passes in which a source could not be read, by source", "1")

	mCapacityRefusals    = stats.Int64(metricPrefix+"capacity_refusals", "Jobs waiting that the hatchery refused for lack of room, by exhausted resource", "1")
	mProvisionedVMTarget = stats.Int64(metricPrefix+"provisioned_vm_target", "Pre-provisioned (idle) VMs the warm pools are filled to, all pools", "1")
	mWarmPoolTarget      = stats.Int64(metricPrefix+"warm_pool_target", "VMs one warm pool is filled to, by model, flavor and the reason of its target", "1")
	mWarmPoolHitRatio    = stats.Float64(metricPrefix+"warm_pool_hit_ratio", "Share of one warm pool's job starts that took a ready VM since the process started", "1")
	mHeartbeatFailures   = stats.Int64(metricPrefix+"heartbeat_failures", "Consecutive failed heartbeats to the CDS API (0 after a success)", "1")
	mVCenterUp           = stats.Int64(metricPrefix+"vcenter_up", "1 when connected to vCenter and its last request did not fail in transport, else 0", "1")
	mInventoryStale      = stats.Int64(metricPrefix+"inventory_stale", "1 when the shared VM inventory refuses its snapshot as stale, else 0", "1")
	mQuarantined         = stats.Int64(metricPrefix+"quarantined_templates", "Templates (or V1 models) quarantined after consecutive spawn failures, probing included", "1")
	mHeldVMs             = stats.Int64(metricPrefix+"held_vm_count", "VMs of failed spawns held powered on for inspection (keepFailedWorkers)", "1")
	mInventoryAge        = stats.Float64(metricPrefix+"inventory_age_seconds", "Time since the shared VM inventory last refreshed successfully, in seconds", stats.UnitSeconds)

	mPlacementVMCount          = stats.Int64(metricPrefix+"placement_vm_count", "VMs of this hatchery in the placement", "1")
	mPlacementVCPUs            = stats.Int64(metricPrefix+"placement_vcpus", "vCPUs this hatchery's VMs use in the placement", "1")
	mPlacementMemoryMB         = stats.Int64(metricPrefix+"placement_memory_mb", "Memory this hatchery's VMs use in the placement, in MB", "MBy")
	mPlacementHeadroomVCPUs    = stats.Int64(metricPrefix+"placement_headroom_vcpus", "vCPUs a clone may still take in the placement (absent when nothing limits it)", "1")
	mPlacementHeadroomMemoryMB = stats.Int64(metricPrefix+"placement_headroom_memory_mb", "Memory a clone may still take in the placement, in MB (absent when nothing limits it)", "MBy")
	mPlacementTasksInFlight    = stats.Int64(metricPrefix+"placement_tasks_in_flight", "Clones in flight to the placement", "1")
	mPlacementState            = stats.Int64(metricPrefix+"placement_state", "1 for the placement's current state, 0 for the others", "1")
	mPlacementClones           = stats.Int64(metricPrefix+"placement_clones", "Clones sent to the placement", "1")
	mPlacementCloneFailures    = stats.Int64(metricPrefix+"placement_clone_failures", "Clones to the placement that failed", "1")
	mDatastoreFreeBytes        = stats.Int64(metricPrefix+"datastore_free_bytes", "Free space of a datastore of a placement, in bytes", stats.UnitBytes)
	mDatastoreCapacityBytes    = stats.Int64(metricPrefix+"datastore_capacity_bytes", "Capacity of a datastore of a placement, in bytes", stats.UnitBytes)
	mDatastoreFloorBytes       = stats.Int64(metricPrefix+"datastore_floor_bytes", "Free space below which a datastore of a placement takes no clone, in bytes", stats.UnitBytes)
	mDatastoreAccessible       = stats.Int64(metricPrefix+"datastore_accessible", "1 when a datastore of a placement is accessible, else 0", "1")
)

// spawnDurationBuckets are the spawn_duration_seconds bucket bounds: a
// clone plus boot takes from tens of seconds to several minutes; a claim of
// a pre-provisioned VM a few seconds.
var spawnDurationBuckets = []float64{5, 10, 20, 30, 45, 60, 90, 120, 180, 240, 300, 450, 600, 900, 1200}

// spawnStageBuckets are the spawn_stage_seconds bucket bounds: from the
// hatchery's own sub-second work to a clone of several minutes.
var spawnStageBuckets = []float64{0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 600}

// jobStartBuckets are the job_start_seconds bucket bounds: a claimed warm
// VM starts in seconds, a clone in one to three minutes, a job waiting for
// room much longer.
var jobStartBuckets = []float64{5, 10, 20, 30, 45, 60, 90, 120, 180, 240, 300, 450, 600, 900, 1800, 3600}

// viewDef describes one view; views are built per Metrics from these.
type viewDef struct {
	measure stats.Measure
	agg     func() *view.Aggregation
	keys    []tag.Key // beyond service_name and service_type
	// cycle: a gauge rebuilt (unregistered, re-registered, recorded) by
	// every collection pass.
	cycle bool
}

// Counters are Sum views of measurements of 1 rather than Count views: a
// Sum view takes a measurement of 0, which is how a counter with a known
// label set is exported at 0 before its first event (zeroCounters).
//
// OpenCensus returns one shared *Aggregation for LastValue and Sum,
// and registering a view writes to its aggregation (canonicalize): each
// view gets its own copy, or two meters registering at once would race.
func lastValue() *view.Aggregation { a := *view.LastValue(); return &a }
func sum() *view.Aggregation       { a := *view.Sum(); return &a }
func spawnDistribution() *view.Aggregation {
	return view.Distribution(append([]float64(nil), spawnDurationBuckets...)...)
}
func stageDistribution() *view.Aggregation {
	return view.Distribution(append([]float64(nil), spawnStageBuckets...)...)
}
func jobStartDistribution() *view.Aggregation {
	return view.Distribution(append([]float64(nil), jobStartBuckets...)...)
}

// newView builds a view of d, tagged with the service tags and d's keys.
func (d viewDef) newView() *view.View {
	return &view.View{
		Name:        d.measure.Name(),
		Description: d.measure.Description(),
		Measure:     d.measure,
		Aggregation: d.agg(),
		TagKeys:     append([]tag.Key{keyServiceName, keyServiceType}, d.keys...),
	}
}

// viewDefs are every view of the hatchery, in documentation order.
var viewDefs = []viewDef{
	{mWorkerVCPUs, lastValue, []tag.Key{keyWorkerName, keyWorkerModel}, true},
	{mWorkerMemoryMB, lastValue, []tag.Key{keyWorkerName, keyWorkerModel}, true},
	{mAllocatedVCPUs, lastValue, nil, true},
	{mAllocatedMemoryMB, lastValue, nil, true},
	{mVMCount, lastValue, nil, true},
	{mProvisionedVMCount, lastValue, []tag.Key{keyState}, true},
	{mTemplateVCPUs, lastValue, nil, true},
	{mTemplateMemoryMB, lastValue, nil, true},
	{mTemplateCount, lastValue, nil, true},
	{mPoolTotalVCPUs, lastValue, nil, true},
	{mPoolTotalMemoryMB, lastValue, nil, true},
	{mPoolTotalVMCount, lastValue, nil, true},
	{mRPCPUMaxMHz, lastValue, nil, true},
	{mRPCPUUsageMHz, lastValue, nil, true},
	{mRPCPUUnreservedMHz, lastValue, nil, true},
	{mRPMemMaxBytes, lastValue, nil, true},
	{mRPMemUsageBytes, lastValue, nil, true},
	{mRPMemUnreservedBytes, lastValue, nil, true},
	{mIPUsedCount, lastValue, nil, true},
	{mIPTotalCount, lastValue, nil, true},
	{mFlavorHeadroom, lastValue, []tag.Key{keyFlavor}, true},
	{mSpawnsStarted, sum, []tag.Key{keyWorkerModel}, false},
	{mSpawnsSucceeded, sum, []tag.Key{keyWorkerModel}, false},
	{mSpawnsFailed, sum, []tag.Key{keyWorkerModel, keyReason}, false},
	{mSpawnDuration, spawnDistribution, []tag.Key{keyWorkerModel}, false},
	{mSpawnStage, stageDistribution, []tag.Key{keyStage}, false},
	{mJobStart, jobStartDistribution, []tag.Key{keyWorkerModel}, false},
	{mSOAPRequests, sum, []tag.Key{keyMethod}, false},
	{mSOAPBytes, sum, []tag.Key{keyMethod}, false},
	{mCollectionErrors, sum, []tag.Key{keySource}, false},
	{mCapacityRefusals, sum, []tag.Key{keyResource}, false},
	{mProvisionedVMTarget, lastValue, nil, true},
	{mWarmPoolTarget, lastValue, []tag.Key{keyWorkerModel, keyFlavor, keyReason}, true},
	{mWarmPoolHitRatio, lastValue, []tag.Key{keyWorkerModel, keyFlavor}, true},
	{mHeartbeatFailures, lastValue, nil, false},
	{mVCenterUp, lastValue, nil, false},
	{mInventoryStale, lastValue, nil, false},
	{mInventoryAge, lastValue, nil, false},
	{mQuarantined, lastValue, nil, false},
	{mHeldVMs, lastValue, nil, false},
	{mPlacementVMCount, lastValue, []tag.Key{keyPlacement}, true},
	{mPlacementVCPUs, lastValue, []tag.Key{keyPlacement}, true},
	{mPlacementMemoryMB, lastValue, []tag.Key{keyPlacement}, true},
	{mPlacementHeadroomVCPUs, lastValue, []tag.Key{keyPlacement}, true},
	{mPlacementHeadroomMemoryMB, lastValue, []tag.Key{keyPlacement}, true},
	{mPlacementTasksInFlight, lastValue, []tag.Key{keyPlacement}, true},
	{mPlacementState, lastValue, []tag.Key{keyPlacement, keyState}, true},
	{mPlacementClones, sum, []tag.Key{keyPlacement}, false},
	{mPlacementCloneFailures, sum, []tag.Key{keyPlacement}, false},
	{mDatastoreFreeBytes, lastValue, []tag.Key{keyPlacement, keyDatastore}, true},
	{mDatastoreCapacityBytes, lastValue, []tag.Key{keyPlacement, keyDatastore}, true},
	{mDatastoreFloorBytes, lastValue, []tag.Key{keyPlacement, keyDatastore}, true},
	{mDatastoreAccessible, lastValue, []tag.Key{keyPlacement, keyDatastore}, true},
}

// producersMu serialises scrapes across every Metrics of the process. The
// OpenCensus Prometheus exporter reads the process-wide producer list
// (metricproducer.GlobalManager); a Metrics keeps its meter out of that list
// and adds it only for the duration of its own scrape, under this lock, so a
// scrape sees its own meter and no other hatchery's.
var producersMu sync.Mutex

// New starts a private OpenCensus meter with every view of the
// hatchery, tagged service_name=serviceName and service_type=hatchery, and
// the Prometheus exporter that serves it (Handler). Close stops it.
func New(serviceName string) (*Metrics, error) {
	if serviceName == "" {
		return nil, errors.New("new metrics: service name is required")
	}
	meter := view.NewMeter()
	producer, ok := meter.(metricproducer.Producer)
	if !ok {
		return nil, fmt.Errorf("new metrics: meter %T is not a metric producer", meter)
	}
	m := &Metrics{
		service: serviceName,
		base: []tag.Mutator{
			tag.Upsert(keyServiceName, tagValue(serviceName)),
			tag.Upsert(keyServiceType, ServiceType),
		},
		meter:      meter,
		soapPrev:   map[string]SOAPCount{},
		clonesPrev: map[string]PlacementClones{},
		models:     map[string]bool{},
	}
	all := make([]*view.View, 0, len(viewDefs))
	for _, d := range viewDefs {
		v := d.newView()
		all = append(all, v)
		if d.cycle {
			m.cycle = append(m.cycle, v)
		}
	}

	meter.Start()
	// Register is handled by the meter's goroutine after it has added
	// itself to the global producer list: once it returns, taking the meter
	// out of that list cannot race with the addition.
	if err := meter.Register(all...); err != nil {
		meter.Stop()
		return nil, fmt.Errorf("new metrics: register views: %w", err)
	}
	producersMu.Lock()
	metricproducer.GlobalManager().DeleteProducer(producer)
	producersMu.Unlock()

	reg := prometheus.NewRegistry()
	exp, err := ocprom.NewExporter(ocprom.Options{
		Registry:   reg,
		Registerer: uncheckedRegisterer{reg},
		Gatherer:   &meterGatherer{m: m, producer: producer, reg: reg},
		OnError: func(err error) {
			m.logger().Warn("export metrics", "err", err)
		},
	})
	if err != nil {
		meter.Stop()
		return nil, fmt.Errorf("new metrics: prometheus exporter: %w", err)
	}
	m.exporter = exp
	if err := m.zeroCounters(); err != nil {
		m.Close()
		return nil, fmt.Errorf("new metrics: %w", err)
	}
	return m, nil
}

// zeroCounters exports, from the start, every series whose label set is
// known in advance at 0: collection_errors of every source,
// capacity_refusals of every resource, heartbeat_failures,
// quarantined_templates, held_vm_count. A ratio or an
// increase() over them then answers 0, not "no data", until the first
// event. (spawns_* are zeroed per model, at its first spawn: zeroModel.)
func (m *Metrics) zeroCounters() error {
	var errs []error
	for _, src := range Sources {
		errs = append(errs, m.record([]tag.Mutator{tag.Upsert(keySource, string(src))}, mCollectionErrors.M(0)))
	}
	for _, r := range CapacityResources {
		errs = append(errs, m.record([]tag.Mutator{tag.Upsert(keyResource, string(r))}, mCapacityRefusals.M(0)))
	}
	errs = append(errs, m.record(nil, mHeartbeatFailures.M(0), mQuarantined.M(0), mHeldVMs.M(0)))
	return errors.Join(errs...)
}

// HeartbeatSent records the outcome of one heartbeat to the CDS API:
// heartbeat_failures counts the consecutive failures, 0 after a success.
func (m *Metrics) HeartbeatSent(ok bool) {
	m.heartbeatMu.Lock()
	defer m.heartbeatMu.Unlock()
	if ok {
		m.heartbeatFails = 0
	} else {
		m.heartbeatFails++
	}
	if err := m.record(nil, mHeartbeatFailures.M(m.heartbeatFails)); err != nil {
		m.logger().Warn("record heartbeat metric", "err", err)
	}
}

// recordHealth records the scrape-time gauges from the Health hook.
func (m *Metrics) recordHealth() {
	if m.Health == nil {
		return
	}
	hl := m.Health()
	b := func(v bool) int64 {
		if v {
			return 1
		}
		return 0
	}
	ms := []stats.Measurement{mVCenterUp.M(b(hl.VCenterUp))}
	if hl.Inventory {
		ms = append(ms, mInventoryStale.M(b(hl.InventoryStale)))
		if hl.InventoryAge >= 0 {
			ms = append(ms, mInventoryAge.M(hl.InventoryAge.Seconds()))
		}
	}
	if err := m.record(nil, ms...); err != nil {
		m.logger().Warn("record health metrics", "err", err)
	}
}

// Handler serves this Metrics in the Prometheus text format: mount it at
// /mon/metrics. Besides this Metrics' own series it shows the views
// registered on OpenCensus' default (global) meter, if any.
func (m *Metrics) Handler() http.Handler { return m.exporter }

// Close stops the meter. Later records are dropped; the handler keeps
// serving the last data.
func (m *Metrics) Close() {
	m.closeMu.Lock()
	defer m.closeMu.Unlock()
	if m.closed {
		return
	}
	m.closed = true
	// Aggregate what was recorded before: the meter's stop does not wait
	// for the measurements still queued.
	m.meter.Find(mVMCount.Name())
	m.meter.Stop()
}

func (m *Metrics) logger() *slog.Logger {
	if m.Logger != nil {
		return m.Logger
	}
	return slog.Default()
}

// record sends measurements tagged with the service tags plus extra to the
// meter. It does not wait for the meter to aggregate them (see flush).
func (m *Metrics) record(extra []tag.Mutator, ms ...stats.Measurement) error {
	m.closeMu.RLock()
	defer m.closeMu.RUnlock()
	if m.closed {
		return nil
	}
	mut := append(append([]tag.Mutator(nil), m.base...), extra...)
	// The background context: the caller's context may carry OpenCensus
	// tags of its own, which must not reach these series. Recording does
	// not block on I/O.
	err := stats.RecordWithOptions(context.Background(),
		stats.WithRecorder(m.meter), stats.WithTags(mut...), stats.WithMeasurements(ms...))
	if err != nil {
		return fmt.Errorf("record %s: %w", ms[0].Measure().Name(), err)
	}
	return nil
}

// flush returns once the meter has aggregated everything recorded before:
// the meter handles commands in order on one goroutine, and Find is a
// round trip through that queue.
func (m *Metrics) flush() {
	m.closeMu.RLock()
	defer m.closeMu.RUnlock()
	if !m.closed {
		m.meter.Find(mVMCount.Name())
	}
}

// resetGauges drops every series of the per-pass gauges (unregister
// and register again) by replacing their views with fresh ones.
// Fresh views, because registering writes to a view. Caller holds cycleMu.
func (m *Metrics) resetGauges() error {
	m.closeMu.RLock()
	defer m.closeMu.RUnlock()
	if m.closed {
		return nil
	}
	m.meter.Unregister(m.cycle...)
	fresh := make([]*view.View, 0, len(m.cycle))
	for _, d := range viewDefs {
		if d.cycle {
			fresh = append(fresh, d.newView())
		}
	}
	m.cycle = fresh
	if err := m.meter.Register(m.cycle...); err != nil {
		return fmt.Errorf("re-register gauges: %w", err)
	}
	return nil
}

// tagValue makes s a valid OpenCensus tag value: printable ASCII, at most
// 255 bytes. Other characters become '_'.
func tagValue(s string) string {
	b := []byte(s)
	if len(b) > 255 {
		b = b[:255]
	}
	for i, c := range b {
		if c < 0x20 || c > 0x7e {
			b[i] = '_'
		}
	}
	return string(b)
}

// meterGatherer gathers the exporter's registry with this Metrics' meter,
// and only it, in the global producer list (see producersMu), and never in
// the middle of a collection pass.
type meterGatherer struct {
	m        *Metrics
	producer metricproducer.Producer
	reg      *prometheus.Registry
}

// Gather implements prometheus.Gatherer.
func (g *meterGatherer) Gather() ([]*dto.MetricFamily, error) {
	// Counters recorded before the scrape (spawns) are in the scrape, and
	// so are the health gauges read now.
	g.m.recordHealth()
	g.m.flush()
	g.m.cycleMu.Lock()
	defer g.m.cycleMu.Unlock()
	producersMu.Lock()
	defer producersMu.Unlock()
	mgr := metricproducer.GlobalManager()
	mgr.AddProducer(g.producer)
	defer mgr.DeleteProducer(g.producer)
	return g.reg.Gather()
}

// uncheckedRegisterer registers collectors as "unchecked" (no descriptors
// announced): the exporter's collector describes only the series present at
// registration time, and its series come and go with each collection pass.
type uncheckedRegisterer struct{ prometheus.Registerer }

// Register implements prometheus.Registerer.
func (r uncheckedRegisterer) Register(c prometheus.Collector) error {
	return r.Registerer.Register(uncheckedCollector{c})
}

// MustRegister implements prometheus.Registerer.
func (r uncheckedRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// Unregister implements prometheus.Registerer.
func (r uncheckedRegisterer) Unregister(c prometheus.Collector) bool {
	return r.Registerer.Unregister(uncheckedCollector{c})
}

// uncheckedCollector hides a collector's descriptors from the registry.
type uncheckedCollector struct{ prometheus.Collector }

// Describe announces nothing: the collector is unchecked.
func (uncheckedCollector) Describe(chan<- *prometheus.Desc) {}

// ViewNames are the OpenCensus view names of every metric, in
// documentation order; a scrape shows one Prometheus family for each.
func ViewNames() []string {
	out := make([]string, 0, len(viewDefs))
	for _, d := range viewDefs {
		out = append(out, d.measure.Name())
	}
	return out
}
