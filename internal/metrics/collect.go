package metrics

import (
	"errors"

	"go.opencensus.io/stats"
	"go.opencensus.io/tag"
)

// Source is a source of a collection pass: the source tag of
// collection_errors.
type Source string

// Sources of a collection pass.
const (
	// SourceInventory: the VM inventory snapshot.
	SourceInventory Source = "inventory"
	// SourceResourcePool: the runtime of the hatchery's resource pool.
	SourceResourcePool Source = "resource_pool"
	// SourceHeadroom: the flavor headroom (the Headroom hook).
	SourceHeadroom Source = "headroom"
	// SourceIPRange: the configured static IP ranges.
	SourceIPRange Source = "ip_range"
)

// Sources lists every source, in documentation order.
var Sources = []Source{SourceInventory, SourceResourcePool, SourceHeadroom, SourceIPRange}

// Pass is what one collection pass read, in metric terms. A nil part was
// not read (or does not apply): its gauges are absent from the scrape
// until a later pass has it.
type Pass struct {
	// Inventory is the summary of one inventory snapshot.
	Inventory *Inventory
	// IPs is the use of the configured static IP ranges.
	IPs *IPs
	// ResourcePool is the runtime of the hatchery's resource pool.
	ResourcePool *ResourcePool
	// WarmPoolTarget is provisioned_vm_target, always recorded.
	WarmPoolTarget int64
	// WarmPools are the warm pools' targets and hit ratios
	// (warm_pool_target, warm_pool_hit_ratio).
	WarmPools []WarmPool
	// Headroom is flavor_headroom by flavor; nil: not recorded.
	Headroom map[string]int
	// SOAP is a snapshot of the cumulative SOAP counters (the SOAP hook);
	// Collect adds what is new since the previous pass to soap_requests
	// and soap_bytes. nil: not recorded.
	SOAP map[string]SOAPCount
	// Failed are the sources that could not be read: each adds 1 to
	// collection_errors.
	Failed []Source
	// Placements are the hatchery's placements, in configuration order;
	// nil: none known (the placement gauges are absent).
	Placements []Placement
	// PlacementStates are every state a placement can be in: each
	// placement has one placement_state series per state.
	PlacementStates []string
}

// Worker is one per-worker series of worker_vcpus and worker_memory_mb.
type Worker struct {
	Name, Model     string
	VCPUs, MemoryMB int64
}

// Inventory is what one inventory snapshot says, in metric terms
// (docs/metrics.md says which VMs each gauge counts).
type Inventory struct {
	// Workers are this hatchery's VMs, one series each.
	Workers []Worker

	AllocatedVCPUs, AllocatedMemoryMB int64
	VMCount                           int64
	// ProvisionedVMs counts the pool VMs (annotation provisioning=true)
	// by power state: the keys are ProvisionedStates; a missing key is 0.
	ProvisionedVMs map[string]int64

	TemplateVCPUs, TemplateMemoryMB, TemplateCount int64

	PoolVCPUs, PoolMemoryMB, PoolVMCount int64
}

// ProvisionedStates are the values of provisioned_vm_count's state label:
// vSphere's power states of a pool VM, every one recorded at each pass.
var ProvisionedStates = []string{"poweredOff", "suspended", "poweredOn"}

// IPs is the use of the configured static IP ranges: ip_used_count and
// ip_total_count.
type IPs struct {
	Used, Total int64
}

// WarmPool is one warm pool's sizing (docs/warm-pools.md).
type WarmPool struct {
	// Model is the V2 template or V1 model path; Flavor the flavor ("" for
	// neutral VMs).
	Model, Flavor string
	// Reason is the reason of the target (internal/poolsize's Reason).
	Reason string
	// Target is the number of VMs the pool is filled to.
	Target int64
	// HitRatio is the share of the pool's starts that took a ready VM.
	HitRatio float64
}

// ResourcePool is the runtime of the hatchery's resource pool, as vCenter
// reports it (ResourcePoolRuntimeInfo): CPU in MHz, memory in bytes.
type ResourcePool struct {
	CPUMaxMHz, CPUUsageMHz, CPUUnreservedMHz                int64
	MemoryMaxBytes, MemoryUsageBytes, MemoryUnreservedBytes int64
}

// Collect records one collection pass: it rebuilds every per-pass gauge
// from p in one step that a scrape cannot split, adds the SOAP traffic
// since the previous pass and the failed sources to their counters, and
// returns once the meter has aggregated them. The error joins every
// measurement that could not be recorded; the others are recorded.
func (m *Metrics) Collect(p Pass) error {
	m.cycleMu.Lock()
	defer m.cycleMu.Unlock()
	var errs []error
	rec := func(extra []tag.Mutator, ms ...stats.Measurement) {
		if err := m.record(extra, ms...); err != nil {
			errs = append(errs, err)
		}
	}
	if err := m.resetGauges(); err != nil {
		errs = append(errs, err)
	}
	if s := p.Inventory; s != nil {
		for _, w := range s.Workers {
			rec([]tag.Mutator{tag.Upsert(keyWorkerName, tagValue(w.Name)), tag.Upsert(keyWorkerModel, tagValue(w.Model))},
				mWorkerVCPUs.M(w.VCPUs), mWorkerMemoryMB.M(w.MemoryMB))
		}
		rec(nil,
			mAllocatedVCPUs.M(s.AllocatedVCPUs), mAllocatedMemoryMB.M(s.AllocatedMemoryMB),
			mVMCount.M(s.VMCount),
			mTemplateVCPUs.M(s.TemplateVCPUs), mTemplateMemoryMB.M(s.TemplateMemoryMB), mTemplateCount.M(s.TemplateCount),
			mPoolTotalVCPUs.M(s.PoolVCPUs), mPoolTotalMemoryMB.M(s.PoolMemoryMB), mPoolTotalVMCount.M(s.PoolVMCount))
		for _, st := range ProvisionedStates {
			rec([]tag.Mutator{tag.Upsert(keyState, st)}, mProvisionedVMCount.M(s.ProvisionedVMs[st]))
		}
	}
	if p.IPs != nil {
		rec(nil, mIPUsedCount.M(p.IPs.Used), mIPTotalCount.M(p.IPs.Total))
	}
	if rp := p.ResourcePool; rp != nil {
		rec(nil,
			mRPCPUMaxMHz.M(rp.CPUMaxMHz), mRPCPUUsageMHz.M(rp.CPUUsageMHz), mRPCPUUnreservedMHz.M(rp.CPUUnreservedMHz),
			mRPMemMaxBytes.M(rp.MemoryMaxBytes), mRPMemUsageBytes.M(rp.MemoryUsageBytes), mRPMemUnreservedBytes.M(rp.MemoryUnreservedBytes))
	}
	rec(nil, mProvisionedVMTarget.M(p.WarmPoolTarget))
	for _, w := range p.WarmPools {
		pool := []tag.Mutator{tag.Upsert(keyWorkerModel, tagValue(w.Model)), tag.Upsert(keyFlavor, tagValue(w.Flavor))}
		rec(append(pool, tag.Upsert(keyReason, tagValue(w.Reason))), mWarmPoolTarget.M(w.Target))
		rec(pool, mWarmPoolHitRatio.M(w.HitRatio))
	}
	for flavor, n := range p.Headroom {
		rec([]tag.Mutator{tag.Upsert(keyFlavor, tagValue(flavor))}, mFlavorHeadroom.M(int64(n)))
	}
	for method, d := range m.soapDeltas(p.SOAP) {
		mut := []tag.Mutator{tag.Upsert(keyMethod, tagValue(method))}
		if d.Requests > 0 {
			rec(mut, mSOAPRequests.M(d.Requests))
		}
		if d.Bytes > 0 {
			rec(mut, mSOAPBytes.M(d.Bytes))
		}
	}
	m.recordPlacements(p.PlacementStates, p.Placements, rec)
	for _, src := range p.Failed {
		rec([]tag.Mutator{tag.Upsert(keySource, string(src))}, mCollectionErrors.M(1))
	}
	m.flush()
	return errors.Join(errs...)
}

// soapDeltas turns a snapshot of cumulative SOAP counters into what is new
// since the previous snapshot. A counter that went down restarted: all of
// its value is new.
func (m *Metrics) soapDeltas(now map[string]SOAPCount) map[string]SOAPCount {
	if now == nil {
		return nil
	}
	m.stateMu.Lock()
	defer m.stateMu.Unlock()
	out := make(map[string]SOAPCount, len(now))
	for method, c := range now {
		p := m.soapPrev[method]
		d := SOAPCount{Requests: c.Requests - p.Requests, Bytes: c.Bytes - p.Bytes}
		if d.Requests < 0 || d.Bytes < 0 {
			d = c
		}
		out[method] = d
	}
	m.soapPrev = make(map[string]SOAPCount, len(now))
	for method, c := range now {
		m.soapPrev[method] = c
	}
	return out
}
