package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/internal/placement"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// Port is what a Collector reads of vCenter: the hatchery's resource
// pool and its runtime, the reader admission shares (vctypes.PoolReader).
// vctypes.Port implements it.
type Port = vctypes.PoolReader

// Options are what New needs.
type Options struct {
	// Hatchery is the hatchery's name: the owner of the VMs it counts as
	// its own.
	Hatchery string
	// Config gives the IP ranges and the warm pool's target.
	Config *config.Config
	// Live, when set, returns the running configuration (a reload
	// replaces it); a pass reads it once. Nil: Config.
	Live func() *config.Config
	// Inventory gives the VMs of a pass.
	Inventory inventory.Inventory
	// Port reads the resource pool when the inventory has no recent
	// reading.
	Port Port
	// PoolRuntime returns a recent resource pool runtime the inventory
	// read, nil when it has none (the Collector then reads it itself).
	PoolRuntime func() *vctypes.PoolRuntime
	// Placements, when set, returns the hatchery's placement set, read
	// each pass (from memory: it reaches no vCenter); nil, or a nil set:
	// no placement gauges.
	Placements func() placement.Set
	// WarmPools, when set, returns the warm pools' sizing of the
	// provisioning loop's last pass (warm_pool_target,
	// warm_pool_hit_ratio; provisioned_vm_target is their sum).
	WarmPools func() []metrics.WarmPool
	// Log receives the sources that could not be read.
	Log *slog.Logger
}

// Collector computes the gauges of one hatchery. Create it with New; one
// pass at a time (the hatchery's one metrics loop).
type Collector struct {
	name        string
	cfg         *config.Config
	live        func() *config.Config
	inv         inventory.Inventory
	port        Port
	poolRuntime func() *vctypes.PoolRuntime
	placements  func() placement.Set
	warmPools   func() []metrics.WarmPool
	log         *slog.Logger
	pool        metricsPool
}

// New returns a Collector.
func New(o Options) *Collector {
	return &Collector{name: o.Hatchery, cfg: o.Config, live: o.Live, inv: o.Inventory, port: o.Port, poolRuntime: o.PoolRuntime, placements: o.Placements, warmPools: o.WarmPools, log: o.Log}
}

// Collect is one collection pass: it reads one inventory snapshot,
// the resource pool runtime (the inventory's reading when it has a recent
// one, else a live read), the flavor headroom, the SOAP counters and the
// placements' statuses,
// then rebuilds every gauge of m from them (metrics.Metrics.Collect). A
// source that cannot be read is logged as a warning and counted in
// collection_errors; its gauges are absent until a later pass reads it, and
// the other gauges are unaffected. A pass interrupted by the end of ctx
// changes nothing.
func (c *Collector) Collect(ctx context.Context, m *metrics.Metrics) {
	start := time.Now()
	var failed []metrics.Source

	// Read every source first, without holding any lock of m.
	vms, invErr := c.inv.VMs(ctx)
	if invErr != nil {
		failed = append(failed, metrics.SourceInventory)
		c.log.Log(ctx, quietIfUnanswered(invErr), "metrics: read inventory", logkey.Err, invErr)
	}
	rt, rpErr := c.poolRuntime(), error(nil)
	if rt == nil {
		rt, rpErr = c.resourcePoolRuntime(ctx)
	}
	if rpErr != nil {
		failed = append(failed, metrics.SourceResourcePool)
		if errors.Is(rpErr, vctypes.ErrPlacementUnresolved) {
			// A topology problem (no such pool, or several): the vCenter
			// client logged it once as an ERROR and /mon/status shows it;
			// a WARN every pass would only repeat it.
			c.log.Debug("metrics: resource pool unresolved, resource pool gauges skipped", logkey.Err, rpErr)
		} else if vctypes.Unanswered(rpErr) {
			// vCenter down: the vCenter client logged the outage once.
			c.log.Debug("metrics: resource pool unreadable, resource pool gauges skipped", logkey.Err, rpErr)
		} else {
			c.log.Warn("metrics: resource pool unreadable, resource pool gauges skipped", logkey.Err, rpErr)
		}
	}
	var headroom map[string]int
	if m.Headroom != nil {
		var err error
		if headroom, err = m.Headroom(ctx); err != nil {
			failed = append(failed, metrics.SourceHeadroom)
			c.log.Log(ctx, quietIfUnanswered(err), "metrics: flavor headroom", logkey.Err, err)
			headroom = nil
		}
	}
	var soap map[string]metrics.SOAPCount
	if m.SOAP != nil {
		soap = m.SOAP()
	}
	cfg := c.cfg
	if c.live != nil {
		cfg = c.live() // one snapshot for the pass
	}
	var places []metrics.Placement
	if c.placements != nil {
		places = placementGauges(c.placements())
	}
	ipRange, hasIPRange, ipErr := configuredIPs(cfg)
	if ipErr != nil {
		failed = append(failed, metrics.SourceIPRange)
		c.log.Warn("metrics: parse ip ranges", logkey.Err, ipErr)
	}
	if ctx.Err() != nil {
		return // shutting down: keep the last pass
	}

	var warm []metrics.WarmPool
	if c.warmPools != nil {
		warm = c.warmPools()
	}
	// Then rebuild the gauges in one step that a scrape cannot split.
	pass := metrics.Pass{
		WarmPoolTarget: warmPoolTarget(cfg, warm),
		WarmPools:      warm,
		Headroom:       headroom,
		SOAP:           soap,
		Failed:         failed,
		Placements:     places,
	}
	if places != nil {
		pass.PlacementStates = placementStates()
	}
	if invErr == nil {
		pass.Inventory = summarizeVMs(c.name, vms).gauges()
		if hasIPRange && ipErr == nil {
			pass.IPs = &metrics.IPs{Used: ipsInUse(ipRange, vms), Total: int64(len(ipRange))}
		}
	}
	if rt != nil {
		pass.ResourcePool = &metrics.ResourcePool{
			CPUMaxMHz: rt.CPUMaxMHz, CPUUsageMHz: rt.CPUUsageMHz, CPUUnreservedMHz: rt.CPUUnreservedMHz,
			MemoryMaxBytes: rt.MemoryMaxBytes, MemoryUsageBytes: rt.MemoryUsageBytes, MemoryUnreservedBytes: rt.MemoryUnreservedBytes,
		}
	}
	if err := m.Collect(pass); err != nil {
		c.log.Warn("metrics: record", logkey.Err, err)
	}
	c.log.Debug("metrics collected", "vms", len(vms), "failed", failed, "took", time.Since(start))
}

// metricsPool is the collector's resource pool, loaded once and dropped
// when unreadable (resourcePoolRuntime).
type metricsPool struct {
	mu   sync.Mutex
	pool *vctypes.Ref
}

// resourcePoolRuntime reads the runtime of the hatchery's resource pool.
// The pool is loaded once and kept; it is loaded again after a failure.
func (c *Collector) resourcePoolRuntime(ctx context.Context) (*vctypes.PoolRuntime, error) {
	c.pool.mu.Lock()
	pool := c.pool.pool
	c.pool.mu.Unlock()
	if pool == nil {
		p, err := c.port.LoadResourcePool(ctx)
		if err != nil {
			return nil, fmt.Errorf("load resource pool: %w", err)
		}
		if p.Value == "" {
			return nil, errors.New("load resource pool: no pool")
		}
		pool = &p
	}
	rt, err := c.port.ResourcePoolRuntime(ctx, *pool)
	if err == nil && rt == nil {
		err = errors.New("no runtime info")
	}
	c.pool.mu.Lock()
	defer c.pool.mu.Unlock()
	if err != nil {
		c.pool.pool = nil
		return nil, fmt.Errorf("read runtime of resource pool %s: %w", pool.Value, err)
	}
	c.pool.pool = pool
	return rt, nil
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
	vmCount                           int64
	provisioned                       map[string]int64

	templateVCPUs, templateMemoryMB, templateCount int64

	poolVCPUs, poolMemoryMB, poolVMCount int64
}

// gauges is s for metrics.Metrics.Collect.
func (s vmSummary) gauges() *metrics.Inventory {
	g := &metrics.Inventory{
		AllocatedVCPUs: s.allocatedVCPUs, AllocatedMemoryMB: s.allocatedMemoryMB,
		VMCount: s.vmCount, ProvisionedVMs: s.provisioned,
		TemplateVCPUs: s.templateVCPUs, TemplateMemoryMB: s.templateMemoryMB, TemplateCount: s.templateCount,
		PoolVCPUs: s.poolVCPUs, PoolMemoryMB: s.poolMemoryMB, PoolVMCount: s.poolVMCount,
	}
	for _, w := range s.workers {
		g.Workers = append(g.Workers, metrics.Worker{Name: w.name, Model: w.model, VCPUs: w.vcpus, MemoryMB: w.memoryMB})
	}
	return g
}

// summarizeVMs classifies the datacenter's VMs for the metrics (see
// docs/metrics.md):
//   - this hatchery's VMs: carry hatchery's ownership record, are not
//     vSphere templates and not model templates (annotation model=true);
//     each is one per-worker series and counts in vm_count (any power
//     state), provisioned_vm_count (annotation provisioning=true, by power
//     state) and, when
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
		s.workers = append(s.workers, workerGauge{name: v.Name, model: v.Annotation.ModelName(), vcpus: cpu, memoryMB: mem})
		s.vmCount++
		if v.Annotation.Provisioning {
			if s.provisioned == nil {
				s.provisioned = map[string]int64{}
			}
			s.provisioned[string(v.PowerState)]++
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

// warmPoolTarget is how many pre-provisioned VMs the warm pools are
// filled to: the sum of their targets (warm, the last pass's), else of
// workerProvisioning[].number.
func warmPoolTarget(cfg *config.Config, warm []metrics.WarmPool) int64 {
	var n int64
	if warm != nil {
		for _, w := range warm {
			n += w.Target
		}
		return n
	}
	for _, w := range cfg.WorkerProvisioning {
		n += int64(w.Number)
	}
	return n
}

// quietIfUnanswered is the level of a pass's failure: DEBUG when vCenter
// did not answer (vctypes.Unanswered: the vCenter client logs the outage's
// start and end, docs/operations.md#when-vcenter-restarts), else WARN.
func quietIfUnanswered(err error) slog.Level {
	if vctypes.Unanswered(err) {
		return slog.LevelDebug
	}
	return slog.LevelWarn
}
