package warmpool

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/poolsize"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// refillEstimate is how long a taken pool VM's slot stays empty beyond
// the provisioning interval: a linked clone, its power-on, the guest's
// boot for the IP and the power-off (84 s in the latency model,
// docs/architecture.md#latency-model), rounded up for a loaded vCenter.
const refillEstimate = 2 * time.Minute

// queuedFor is how long after it was last seen in the queue a job not
// started here counts as waiting for its pool (the short-term
// correction): the queue is polled every 20 s, so a job still waiting is
// seen again well within it, and a job another instance or hatchery took,
// or that was cancelled, stops counting a minute after it left the queue.
const queuedFor = time.Minute

// seenFor is how long a job's id is remembered, so that the same job
// seen at every poll of the queue counts as one arrival.
const seenFor = 2 * time.Hour

// Demand is what the warm pool learns of the jobs it could serve: one
// poolsize.Sizer per pool that follows demand (an entry with max:
// config.WorkerProvisioning.Scales), fed with the jobs the hatchery sees
// in the queue (Arrive) and the starts (Started), asked for a target at
// each pass (Provision). It is safe for concurrent use; the zero value is
// not: NewDemand.
type Demand struct {
	mu     sync.Mutex
	sizers map[Key]*poolsize.Sizer
	last   map[Key]PoolStatus
	seen   map[string]seenJob
	swept  time.Time // when seen last lost its old ids
	// records is each pool's record in the Pool's DemandStore.
	records map[Key]demandRecord
}

// seenJob is a job id the hatchery saw in the queue.
type seenJob struct {
	key     Key
	at      time.Time // last seen
	started bool
}

// PoolStatus is one pool's sizing as of the last pass, for /mon/status,
// the metrics and ctl.
type PoolStatus struct {
	// Key is the pool.
	Key Key
	// Demand tells whether the pool follows demand (else Target is the
	// entry's number).
	Demand bool
	// Target is the number of VMs the pool is filled to.
	Target int
	// Reason says why (poolsize.ReasonFixed for a fixed pool).
	Reason poolsize.Reason
	// Detail gives the figures.
	Detail string
	// Since is when the target last changed.
	Since time.Time
	// HitRatio is the share of the pool's starts that took a ready VM,
	// over Starts starts since this process started.
	HitRatio float64
	Starts   int
}

// NewDemand returns an empty Demand: nothing learnt yet.
func NewDemand() *Demand {
	return &Demand{sizers: map[Key]*poolsize.Sizer{}, last: map[Key]PoolStatus{}, seen: map[string]seenJob{}, records: map[Key]demandRecord{}}
}

// sizer is k's Sizer, made on first use; mu held.
func (d *Demand) sizer(k Key) *poolsize.Sizer {
	s, ok := d.sizers[k]
	if !ok {
		s = &poolsize.Sizer{}
		d.sizers[k] = s
	}
	return s
}

// Arrive counts the job jobID, seen in the queue at now, for the pool k
// (once per job id: the queue is polled again and again; a job seen
// again is still waiting).
func (d *Demand) Arrive(k Key, jobID string, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if now.Sub(d.swept) > time.Minute {
		d.swept = now
		for id, j := range d.seen {
			if now.Sub(j.at) > seenFor {
				delete(d.seen, id)
			}
		}
	}
	if j, dup := d.seen[jobID]; dup {
		j.at = now // still waiting
		d.seen[jobID] = j
		return
	}
	d.seen[jobID] = seenJob{key: k, at: now}
	d.sizer(k).Demand.Arrive(now)
}

// Started counts the start of job jobID from a ready VM of pool k (warm)
// or a fresh clone: the pool's hit ratio, and the job no longer waits.
func (d *Demand) Started(k Key, jobID string, warm bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if j, ok := d.seen[jobID]; ok {
		j.started = true
		d.seen[jobID] = j
	}
	d.sizer(k).Start(warm)
}

// queued counts the jobs of k last seen in the queue less than queuedFor
// ago and not started; mu held.
func (d *Demand) queued(k Key, now time.Time) int {
	n := 0
	for _, j := range d.seen {
		if j.key == k && !j.started && now.Sub(j.at) < queuedFor {
			n++
		}
	}
	return n
}

// Waiting counts the jobs of pool k that wait in the queue at now: seen
// at a poll less than a minute before, not started here.
func (d *Demand) Waiting(k Key, now time.Time) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.queued(k, now)
}

// decide is k's target this pass under policy p and limits.
func (d *Demand) decide(k Key, p poolsize.Policy, loc *time.Location, limits poolsize.Limits, now time.Time) poolsize.Decision {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.sizer(k)
	s.Demand.Loc = loc
	dec := s.Decide(p, poolsize.Input{Now: now, Queued: d.queued(k, now), Limits: limits})
	st := d.last[k]
	if dec.Changed || !st.Demand {
		st.Since = now
	}
	st.Key, st.Demand, st.Target, st.Reason, st.Detail = k, true, dec.Target, dec.Reason, dec.Detail
	st.HitRatio, st.Starts = s.HitRatio()
	d.last[k] = st
	return dec
}

// fixed records k's fixed target.
func (d *Demand) fixed(k Key, number int, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.last[k]
	if st.Demand || st.Target != number || st.Since.IsZero() {
		st.Since = now
	}
	st.Key, st.Demand, st.Target, st.Reason, st.Detail = k, false, number, poolsize.ReasonFixed, fmt.Sprintf("number %d", number)
	st.HitRatio, st.Starts = d.sizer(k).HitRatio()
	d.last[k] = st
}

// Status is every pool's sizing as of the last pass, V2 pools first, by
// model and flavor.
func (d *Demand) Status() []PoolStatus {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]PoolStatus, 0, len(d.last))
	for _, st := range d.last {
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return keyLess(out[i].Key, out[j].Key) })
	return out
}

// forget drops the pools not in keep (entries removed by a reload).
func (d *Demand) forget(keep map[Key]bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k := range d.last {
		if !keep[k] {
			delete(d.last, k)
		}
	}
}

// JobPool is the pool a job of model asking flavor counts for: the
// configured pool of its model and flavor, else its model's neutral pool
// (a neutral VM serves any flavor, resized), else none (false).
func JobPool(cfg *config.Config, model sdk.WorkerStarterWorkerModel, flavor *config.Flavor) (Key, bool) {
	k := ModelKey(model)
	if k.Model == "" {
		return Key{}, false
	}
	if flavor != nil {
		k.Flavor = flavor.Name
	}
	neutral := Key{V1: k.V1, Model: k.Model}
	found := false
	for _, e := range cfg.WorkerProvisioning {
		ek, ok := entryKey(e)
		if !ok {
			continue
		}
		if ek == k {
			return k, true
		}
		if ek == neutral {
			found = true
		}
	}
	return neutral, found
}

// entryKey is the pool of a workerProvisioning entry (false: it names no
// model).
func entryKey(e config.WorkerProvisioning) (Key, bool) {
	switch {
	case e.ModelVMWare != "":
		return Key{Model: e.ModelVMWare, Flavor: e.Flavor}, true
	case e.ModelPath != "":
		return Key{V1: true, Model: e.ModelPath, Flavor: e.Flavor}, true
	}
	return Key{}, false
}

// NoteArrival counts a job the hatchery saw in the queue for the pool
// that would serve it (JobPool); nothing when no pool would, or without
// a Demand.
func (p *Pool) NoteArrival(model sdk.WorkerStarterWorkerModel, flavor *config.Flavor, jobID string) {
	if p.Demand == nil {
		return
	}
	if k, ok := JobPool(p.conf(), model, flavor); ok {
		p.Demand.Arrive(k, jobID, p.Now())
	}
}

// NoteStart counts a job's start from a ready VM of its pool (warm) or a
// fresh clone, for the pool's hit ratio.
func (p *Pool) NoteStart(model sdk.WorkerStarterWorkerModel, flavor *config.Flavor, jobID string, warm bool) {
	if p.Demand == nil {
		return
	}
	if k, ok := JobPool(p.conf(), model, flavor); ok {
		p.Demand.Started(k, jobID, warm)
	}
}

// PoolStatus is every configured pool's sizing as of the last pass; a
// pool no pass has sized yet shows its number (fixed) or its min (reason
// min, "no pass yet"). V2 pools first, by model and flavor.
func (p *Pool) PoolStatus() []PoolStatus {
	var decided map[Key]PoolStatus
	if p.Demand != nil {
		decided = map[Key]PoolStatus{}
		for _, st := range p.Demand.Status() {
			decided[st.Key] = st
		}
	}
	var out []PoolStatus
	seen := map[Key]bool{}
	for _, e := range p.conf().WorkerProvisioning {
		k, ok := entryKey(e)
		if !ok || seen[k] {
			continue
		}
		seen[k] = true
		if st, ok := decided[k]; ok {
			out = append(out, st)
			continue
		}
		st := PoolStatus{Key: k, Target: e.Number, Reason: poolsize.ReasonFixed, Detail: fmt.Sprintf("number %d", e.Number)}
		if e.Scales() {
			st.Demand, st.Target, st.Reason, st.Detail = true, e.Min, poolsize.ReasonMin, "no pass yet"
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return keyLess(out[i].Key, out[j].Key) })
	return out
}

// entryTarget is the number of VMs the pool of entry e holds this pass:
// its number, or, for an entry that follows demand, the Demand's decision
// within the pool's limits (one log line when it changes). Without a
// Demand, a demand entry keeps its min.
func (p *Pool) entryTarget(ctx context.Context, cfg *config.Config, e config.WorkerProvisioning, k Key, room *poolRoom) int {
	if !e.Scales() {
		if p.Demand != nil {
			p.Demand.fixed(k, e.Number, p.Now())
		}
		return e.Number
	}
	if p.Demand == nil {
		return e.Min
	}
	pol := poolsize.Policy{
		Min: e.Min, Max: e.Max, WarmShare: e.PoolWarmShare(),
		Refill:    cfg.WorkerProvisioningIntervalDuration() + refillEstimate,
		Ahead:     e.PoolAhead(),
		IdleAfter: e.PoolIdle(),
	}
	for _, s := range e.Schedules {
		from, to := s.Span()
		pol.Schedules = append(pol.Schedules, poolsize.Schedule{Days: s.Weekdays(), From: from, To: to, Min: s.Min, Max: s.Max})
	}
	limits := room.limits(ctx, p, cfg, e, k)
	p.loadDemand(ctx, k) // before the first decision: what was learnt before a restart
	d := p.Demand.decide(k, pol, e.PoolLocation(), limits, p.Now())
	p.saveDemand(ctx, k, false)
	if d.Changed {
		p.Log.Info("warm pool target changed", logkey.Model, k.Model, logkey.Flavor, k.Flavor, logkey.Reason, string(d.Reason),
			logkey.Detail, fmt.Sprintf("target %d: %s", d.Target, d.Detail))
	}
	return d.Target
}

// poolRoom reads, once per pass and only when a demand pool asks, what
// the capacity and the placements leave for the pools: the caps of
// poolsize.Limits.
type poolRoom struct {
	vms     []inventory.VM
	scaling int // demand entries this pass: each gets an equal share of the capacity's room
	read    bool
	flavors map[string]int // admission.Admission.FlavorRoom, nil when unread
	counts  map[Key]int    // the pools' VMs in the listing
	workers int            // this hatchery's powered-on VMs that are not pool VMs
}

// limits are pool k's caps this pass. The capacity's: the workers of its
// flavor the capacity runs at once (those running now, plus those it
// still lets start), shared equally among the demand pools, plus the
// pool's own VMs when they run idle (they take their share already); the
// framework's maxWorker caps it too, as more ready VMs than workers may
// run at once are never used. The placements': the pool's own VMs plus
// those that still fit (admission.Admission.PlacementRoom). Unknown: no
// cap.
func (r *poolRoom) limits(ctx context.Context, p *Pool, cfg *config.Config, e config.WorkerProvisioning, k Key) poolsize.Limits {
	if !r.read {
		r.read = true
		r.counts = map[Key]int{}
		for _, v := range r.vms {
			if pk, ok := keyOf(p.Hatchery, v); ok {
				r.counts[pk]++
			} else if !v.Template && v.OwnedBy(p.Hatchery) && v.PoweredOn() {
				r.workers++
			}
		}
		if p.Admission != nil {
			if h, err := p.Admission().FlavorRoom(ctx); err == nil {
				r.flavors = h
			} else {
				p.Log.Debug("warm pool capacity room unknown this pass", logkey.Err, err)
			}
		}
	}
	l := poolsize.NoLimits
	if room, ok := r.flavors[k.Flavor]; ok && k.Flavor != "" && room >= 0 {
		share := (room + r.workers) / max(r.scaling, 1)
		if e.State() == config.IdleStatePoweredOn {
			share += r.counts[k]
		}
		l.Capacity = share
	}
	if mw := cfg.CommonConfiguration.Provision.MaxWorker; mw > 0 && (l.Capacity < 0 || l.Capacity > mw) {
		l.Capacity = mw
	}
	if p.Admission != nil {
		if room := p.Admission().PlacementRoom(ctx, r.vms, cfg.FlavorNamed(k.Flavor)); room >= 0 {
			l.Headroom = r.counts[k] + room
		}
	}
	return l
}

// demandIdle is the idle period of every pool that follows demand
// (config.WorkerProvisioning.PoolIdle): its surplus VMs go only once they
// have waited that long.
func demandIdle(cfg *config.Config) map[Key]time.Duration {
	out := map[Key]time.Duration{}
	for _, e := range cfg.WorkerProvisioning {
		if k, ok := entryKey(e); ok && e.Scales() {
			out[k] = e.PoolIdle()
		}
	}
	return out
}

// idleLongEnough tells whether the surplus VM v of pool k may go: any VM
// of a fixed pool, a VM of a demand pool that has waited idle, since its
// clone (its record's creation time), at least the pool's idle period. A
// VM without a creation time has waited long enough.
func idleLongEnough(v inventory.VM, idleFor map[Key]time.Duration, k Key, now time.Time) bool {
	d, ok := idleFor[k]
	if !ok || v.Annotation == nil || v.Annotation.Created.IsZero() {
		return true
	}
	return now.Sub(v.Annotation.Created) >= d
}
