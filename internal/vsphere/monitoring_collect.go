package vsphere

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/vmware/govmomi/vim25/types"
	"go.opencensus.io/stats"
	"go.opencensus.io/tag"
)

// Sources of a collection pass, the source tag of collection_errors.
const (
	metricsSourceInventory    = "inventory"
	metricsSourceResourcePool = "resource_pool"
	metricsSourceHeadroom     = "headroom"
	metricsSourceIPRange      = "ip_range"
)

// RunMetrics collects m every interval (MetricsInterval when every <= 0),
// the first time at once, until ctx ends. It is the hatchery's one metrics
// collector: the daemon starts it in one goroutine next to Run and joins it
// at shutdown.
func (h *HatcheryVSphere) RunMetrics(ctx context.Context, m *Metrics, every time.Duration) {
	if m == nil {
		return
	}
	if every <= 0 {
		every = MetricsInterval
	}
	runEvery(ctx, h.log, "metrics", every, func(ctx context.Context) { h.collectMetrics(ctx, m) })
}

// collectMetrics is one collection pass: it reads one inventory snapshot,
// the resource pool runtime (the inventory's reading when it has a recent
// one, else a live read), the flavor headroom and the SOAP counters,
// then rebuilds every gauge of m from them. A source that cannot be read is
// logged as a warning and counted in collection_errors; its gauges are
// absent until a later pass reads it, and the other gauges are unaffected.
// A pass interrupted by the end of ctx changes nothing.
func (h *HatcheryVSphere) collectMetrics(ctx context.Context, m *Metrics) {
	start := time.Now()
	var failed []string

	// Read every source first, without holding any lock of m.
	vms, invErr := h.inv.VMs(ctx)
	if invErr != nil {
		failed = append(failed, metricsSourceInventory)
		h.log.Warn("metrics: read inventory", logkey.Err, invErr)
	}
	rt, rpErr := h.inventoryPoolRuntime(), error(nil)
	if rt == nil {
		rt, rpErr = h.resourcePoolRuntime(ctx, m)
	}
	if rpErr != nil {
		failed = append(failed, metricsSourceResourcePool)
		h.log.Warn("metrics: resource pool unreadable, resource pool gauges skipped", logkey.Err, rpErr)
	}
	var headroom map[string]int
	if m.Headroom != nil {
		var err error
		if headroom, err = m.Headroom(ctx); err != nil {
			failed = append(failed, metricsSourceHeadroom)
			h.log.Warn("metrics: flavor headroom", logkey.Err, err)
			headroom = nil
		}
	}
	var soap map[string]SOAPCount
	if m.SOAP != nil {
		soap = m.SOAP()
	}
	ipRange, hasIPRange, ipErr := configuredIPs(h.cfg)
	if ipErr != nil {
		failed = append(failed, metricsSourceIPRange)
		h.log.Warn("metrics: parse ip ranges", logkey.Err, ipErr)
	}
	if ctx.Err() != nil {
		return // shutting down: keep the last pass
	}

	// Then rebuild the gauges in one step that a scrape cannot split.
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
	if invErr == nil {
		s := summarizeVMs(h.Name(), vms)
		for _, w := range s.workers {
			rec([]tag.Mutator{tag.Upsert(keyWorkerName, tagValue(w.name)), tag.Upsert(keyWorkerModel, tagValue(w.model))},
				mWorkerVCPUs.M(w.vcpus), mWorkerMemoryMB.M(w.memoryMB))
		}
		rec(nil,
			mAllocatedVCPUs.M(s.allocatedVCPUs), mAllocatedMemoryMB.M(s.allocatedMemoryMB),
			mVMCount.M(s.vmCount), mProvisionedVMCount.M(s.provisionedVMCount),
			mTemplateVCPUs.M(s.templateVCPUs), mTemplateMemoryMB.M(s.templateMemoryMB), mTemplateCount.M(s.templateCount),
			mPoolTotalVCPUs.M(s.poolVCPUs), mPoolTotalMemoryMB.M(s.poolMemoryMB), mPoolTotalVMCount.M(s.poolVMCount))
		if hasIPRange && ipErr == nil {
			rec(nil, mIPUsedCount.M(ipsInUse(ipRange, vms)), mIPTotalCount.M(int64(len(ipRange))))
		}
	}
	if rt != nil {
		rec(nil,
			mRPCPUMaxMHz.M(rt.Cpu.MaxUsage), mRPCPUUsageMHz.M(rt.Cpu.OverallUsage), mRPCPUUnreservedMHz.M(rt.Cpu.UnreservedForVm),
			mRPMemMaxBytes.M(rt.Memory.MaxUsage), mRPMemUsageBytes.M(rt.Memory.OverallUsage), mRPMemUnreservedBytes.M(rt.Memory.UnreservedForVm))
	}
	rec(nil, mProvisionedVMTarget.M(warmPoolTarget(h.cfg)))
	for flavor, n := range headroom {
		rec([]tag.Mutator{tag.Upsert(keyFlavor, tagValue(flavor))}, mFlavorHeadroom.M(int64(n)))
	}
	for method, d := range m.soapDeltas(soap) {
		mut := []tag.Mutator{tag.Upsert(keyMethod, tagValue(method))}
		if d.Requests > 0 {
			rec(mut, mSOAPRequests.M(d.Requests))
		}
		if d.Bytes > 0 {
			rec(mut, mSOAPBytes.M(d.Bytes))
		}
	}
	for _, src := range failed {
		rec([]tag.Mutator{tag.Upsert(keySource, src)}, mCollectionErrors.M(1))
	}
	m.flush()
	if len(errs) > 0 {
		h.log.Warn("metrics: record", logkey.Err, errors.Join(errs...))
	}
	h.log.Debug("metrics collected", "vms", len(vms), "failed", failed, "took", time.Since(start))
}

// resourcePoolRuntime reads the runtime of the hatchery's resource pool.
// The pool is loaded once and kept; it is loaded again after a failure.
func (h *HatcheryVSphere) resourcePoolRuntime(ctx context.Context, m *Metrics) (*types.ResourcePoolRuntimeInfo, error) {
	m.stateMu.Lock()
	pool := m.pool
	m.stateMu.Unlock()
	if pool == nil {
		p, err := h.vs.LoadResourcePool(ctx)
		if err != nil {
			return nil, fmt.Errorf("load resource pool: %w", err)
		}
		if p.Value == "" {
			return nil, errors.New("load resource pool: no pool")
		}
		pool = &p
	}
	rt, err := h.vs.ResourcePoolRuntime(ctx, *pool)
	if err == nil && rt == nil {
		err = errors.New("no runtime info")
	}
	m.stateMu.Lock()
	defer m.stateMu.Unlock()
	if err != nil {
		m.pool = nil
		return nil, fmt.Errorf("read runtime of resource pool %s: %w", pool.Reference().Value, err)
	}
	m.pool = pool
	return rt, nil
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

// workerGauge is one per-worker series.
type workerGauge struct {
	name, model     string
	vcpus, memoryMB int64
}

// vmSummary is what one inventory snapshot says, in metric terms.
type vmSummary struct {
	workers []workerGauge

	allocatedVCPUs, allocatedMemoryMB int64
	vmCount, provisionedVMCount       int64

	templateVCPUs, templateMemoryMB, templateCount int64

	poolVCPUs, poolMemoryMB, poolVMCount int64
}

// summarizeVMs classifies the datacenter's VMs for the metrics (see
// docs/metrics.md):
//   - this hatchery's VMs: carry hatchery's ownership record, are not
//     vSphere templates and not model templates (annotation model=true);
//     each is one per-worker series and counts in vm_count (any power
//     state), provisioned_vm_count (annotation provisioning=true) and, when
//     powered on, allocated_* (the capacity check's notion, docs/design.md#allocated);
//   - this hatchery's model templates: its VMs with annotation model=true;
//     template_* sum their configured size;
//   - the pool: every VM of the datacenter that is not a vSphere template,
//     whoever owns it; pool_total_vm_count counts them in any power state,
//     pool_total_vcpus/memory sum the powered-on ones.
func summarizeVMs(hatchery string, vms []inventory.VM) vmSummary {
	var s vmSummary
	for _, v := range vms {
		cpu, mem := int64(v.NumCPU), int64(v.MemoryMB)
		if !v.Template {
			s.poolVMCount++
			if v.PoweredOn() {
				s.poolVCPUs += cpu
				s.poolMemoryMB += mem
			}
		}
		if !v.OwnedBy(hatchery) {
			continue
		}
		if v.Annotation.Model {
			s.templateCount++
			s.templateVCPUs += cpu
			s.templateMemoryMB += mem
			continue
		}
		if v.Template {
			continue
		}
		model := v.Annotation.VMwareModelPath
		if model == "" {
			model = v.Annotation.WorkerModelPath
		}
		s.workers = append(s.workers, workerGauge{name: v.Name, model: model, vcpus: cpu, memoryMB: mem})
		s.vmCount++
		if v.Annotation.Provisioning {
			s.provisionedVMCount++
		}
		if v.PoweredOn() {
			s.allocatedVCPUs += cpu
			s.allocatedMemoryMB += mem
		}
	}
	return s
}

// configuredIPs returns the addresses of iprange and of every [[networks]]
// range; configured is false when no range is set (DHCP).
func configuredIPs(cfg *config.Config) (addrs map[netip.Addr]bool, configured bool, err error) {
	ranges := []string{}
	if cfg.IPRange != "" {
		ranges = append(ranges, cfg.IPRange)
	}
	for _, n := range cfg.Networks {
		if n.IPRange != "" {
			ranges = append(ranges, n.IPRange)
		}
	}
	if len(ranges) == 0 {
		return nil, false, nil
	}
	addrs = map[netip.Addr]bool{}
	for _, r := range ranges {
		list, err := config.ParseIPRange(r)
		if err != nil {
			return nil, true, fmt.Errorf("parse iprange %q: %w", r, err)
		}
		for _, a := range list {
			addrs[a] = true
		}
	}
	return addrs, true, nil
}

// ipsInUse counts the addresses of inRange held by a VM or template of the
// datacenter, whoever owns it: written in its annotation (even powered off,
// docs/design.md#traps) or reported by its guest.
func ipsInUse(inRange map[netip.Addr]bool, vms []inventory.VM) int64 {
	used := map[netip.Addr]bool{}
	mark := func(s string) {
		if a, err := netip.ParseAddr(s); err == nil && inRange[a.Unmap()] {
			used[a.Unmap()] = true
		}
	}
	for _, v := range vms {
		if v.Annotation != nil && v.Annotation.IPAddress != "" {
			mark(v.Annotation.IPAddress)
		}
		for _, ip := range v.IPAddresses {
			mark(ip)
		}
	}
	return int64(len(used))
}

// warmPoolTarget is how many pre-provisioned VMs the warm pool is
// configured to keep: the sum of workerProvisioning[].number.
func warmPoolTarget(cfg *config.Config) int64 {
	var n int64
	for _, w := range cfg.WorkerProvisioning {
		n += int64(w.Number)
	}
	return n
}
