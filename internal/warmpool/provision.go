package warmpool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/ippool"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/internal/modelref"
	"github.com/cds-contrib/hatchery-vsphere/internal/spawnfault"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
)

// provisionIPTimeout bounds the wait for a freshly provisioned VM's IP: the
// readiness deadline (docs/design.md#timeouts). A VM that has no IP by then is removed.
const provisionIPTimeout = 3 * time.Minute

// Task is one VM to provision: one free slot of one pool.
type Task struct {
	// Key is the pool the VM is for.
	Key Key
	// Name is the pool slot cloned into (Key.SlotName).
	Name string
	// Template is the template cloned (modelref's rule).
	Template modelref.Template
	// Flavor is the flavor the VM is pre-sized for (nil: neutral).
	Flavor *config.Flavor
	// LastModified is the V1 model's last modification (Unix seconds).
	LastModified string
	// IdleState is how the VM waits once ready (config.WorkerProvisioning.State).
	IdleState string
}

// poolTarget is one pool's configured size and how to fill it.
type poolTarget struct {
	task   Task
	number int
}

// Provision is one pass of the provisioning loop
// (docs/design.md#provisioned-vms): it removes idle surplus VMs, then clones the missing ones, V2 pools
// before V1 pools, round-robin across pools, at most
// workerProvisioningPoolSize at once. It returns when every clone it
// started has ended.
func (p *Pool) Provision(ctx context.Context) {
	vms, err := p.Inventory.VMs(ctx)
	if err != nil {
		level := slog.LevelWarn
		if vctypes.Unanswered(err) {
			// vCenter down: the vCenter client logs the outage's start
			// and end, not a line per pass (docs/operations.md#when-vcenter-restarts).
			level = slog.LevelDebug
		}
		p.Log.Log(ctx, level, "provisioning skipped: cannot list vms", logkey.Err, err)
		return
	}
	// A claimed VM's slot name is free again once the inventory shows the
	// VM as a worker (renamed, re-annotated) or gone: without this, a slot
	// stayed Claimed until the next claim, and a pool emptied by claims
	// was never refilled.
	p.forgetConsumed(vms)
	targets, configured := p.provisioningTargets(ctx, vms)
	counts := p.Counts(vms)

	p.removeSurplus(ctx, vms, counts, configured, demandIdle(p.conf()))

	var v2, v1 [][]Task
	for _, t := range targets {
		deficit := t.number - counts[t.task.Key]
		if deficit <= 0 {
			continue
		}
		p.Log.Info("provisioning pool below target", logkey.Model, t.task.Key.Model, logkey.Flavor, t.task.Key.Flavor,
			logkey.Detail, fmt.Sprintf("%d of %d present", counts[t.task.Key], t.number))
		names := p.freeSlots(t.task.Key, t.number, deficit, vms)
		if len(names) < deficit {
			p.Log.Debug("pool slots busy, refilled next pass", logkey.Model, t.task.Key.Model, logkey.Flavor, t.task.Key.Flavor,
				logkey.Detail, fmt.Sprintf("%d missing, %d free slots", deficit, len(names)))
		}
		q := make([]Task, len(names))
		for i := range q {
			q[i] = t.task
			q[i].Name = names[i]
		}
		if t.task.Key.V1 {
			v1 = append(v1, q)
		} else {
			v2 = append(v2, q)
		}
	}
	queue := append(roundRobinTasks(v2), roundRobinTasks(v1)...)
	p.runProvisionTasks(ctx, queue)
}

// roundRobinTasks interleaves the queues: one of each in turn.
func roundRobinTasks(queues [][]Task) []Task {
	var out []Task
	for i := 0; ; i++ {
		added := false
		for _, q := range queues {
			if i < len(q) {
				out = append(out, q[i])
				added = true
			}
		}
		if !added {
			return out
		}
	}
}

// runProvisionTasks runs the tasks, at most workerProvisioningPoolSize at
// once, stops starting new ones when ctx ends and joins them all.
func (p *Pool) runProvisionTasks(ctx context.Context, queue []Task) {
	size := p.conf().WorkerProvisioningPoolSize
	if size <= 0 {
		size = 1
	}
	sem := make(chan struct{}, size)
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, task := range queue {
		if ctx.Err() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case sem <- struct{}{}:
		}
		wg.Go(func() {
			defer func() { <-sem }()
			p.ProvisionOne(ctx, task)
		})
	}
}

// provisioningTargets reads the configuration into pools: the pools to
// fill (entries that can be provisioned now) and the configured size of
// every pool (surplus is measured against it, even for a pool that cannot
// be filled this pass).
func (p *Pool) provisioningTargets(ctx context.Context, vms []inventory.VM) ([]poolTarget, map[Key]int) {
	configured := map[Key]int{}
	var targets []poolTarget
	var v1Models []sdk.Model
	v1Loaded, v1OK := false, false

	cfg := p.conf() // one snapshot for the pass's targets
	room := &poolRoom{vms: vms}
	keys := map[Key]bool{}
	for _, e := range cfg.WorkerProvisioning {
		if e.Scales() {
			room.scaling++
		}
	}
	defer func() {
		if p.Demand != nil {
			p.Demand.forget(keys)
		}
	}()
	for i, e := range cfg.WorkerProvisioning {
		var key Key
		switch {
		case e.ModelVMWare != "":
			key = Key{Model: e.ModelVMWare, Flavor: e.Flavor} // normalised (config.Config.Normalize)
		case e.ModelPath != "":
			key = Key{V1: true, Model: e.ModelPath, Flavor: e.Flavor}
		default:
			p.Log.Warn("provisioning entry skipped", logkey.Detail, fmt.Sprintf("workerProvisioning[%d] names no model", i))
			continue
		}
		keys[key] = true
		number := p.entryTarget(ctx, cfg, e, key, room) // e.Number, or the demand's target
		if number <= 0 {
			continue
		}
		configured[key] += number

		task := Task{Key: key, IdleState: e.State()}
		if key.Flavor != "" {
			f := cfg.FlavorNamed(key.Flavor)
			if f == nil {
				p.Log.Warn("provisioning entry skipped", logkey.Model, key.Model, logkey.Flavor, key.Flavor, logkey.Detail, "unknown flavor")
				continue
			}
			task.Flavor = f
		}
		if !key.V1 {
			// The template is the rule's (modelref), as for a spawn.
			tpl := modelref.OfEntry("", e.ModelVMWare)
			if _, ok := inventory.FindTemplate(vms, p.Hatchery, tpl); !ok {
				p.Log.Warn("provisioning entry skipped", logkey.Model, key.Model, logkey.Detail, "no template with that name")
				continue
			}
			task.Template = tpl
			targets = append(targets, poolTarget{task: task, number: number})
			continue
		}

		if !v1Loaded {
			v1Loaded = true
			v1Models, v1OK = p.enabledModels(ctx)
		}
		if !v1OK {
			continue // logged once by enabledModels
		}
		m, ok := sdk.FindModel(v1Models, key.Model)
		if !ok {
			p.Log.Warn("provisioning entry skipped", logkey.Model, key.Model, logkey.Detail, "model not enabled on the api")
			continue
		}
		if m.NeedRegistration || p.Host.NeedRegistration(ctx, &m) {
			p.Log.Info("provisioning entry skipped", logkey.Model, key.Model, logkey.Detail, "model needs registration")
			continue
		}
		want := modelref.OfV1(&m)
		tpl, ok := inventory.FindTemplate(vms, p.Hatchery, want)
		if !ok {
			p.Log.Info("provisioning entry skipped", logkey.Model, key.Model, logkey.Detail, "no model template built yet")
			continue
		}
		task.Template = want
		// The version the template was built from, as its record keeps
		// it: NeedRegistration just found it equal to the model's.
		task.LastModified = tpl.Annotation.WorkerModelLastModified
		targets = append(targets, poolTarget{task: task, number: number})
	}
	return targets, configured
}

// enabledModels fetches the V1 models; false (logged) when the API is not
// there or fails: V1 pools are then not filled this pass.
func (p *Pool) enabledModels(ctx context.Context) ([]sdk.Model, bool) {
	if p.CDS == nil {
		p.Log.Warn("v1 provisioning skipped", logkey.Detail, "no cds api client")
		return nil, false
	}
	ms, err := p.CDS.WorkerModelsEnabled(ctx)
	if err != nil {
		p.Log.Warn("v1 provisioning skipped", logkey.Detail, fmt.Sprintf("list enabled worker models: %v", err))
		return nil, false
	}
	return ms, true
}

// Counts counts, per pool, the provisioned VMs of this hatchery that
// stay in the pool: in vCenter (idle, or left half-made and waiting for
// cleanup) or being provisioned now. A pool VM of an earlier version
// (LegacyPrefix) is leaving: RemoveSurplus removes it and its slot is
// refilled under this version's name. VMs being claimed, already claimed
// (a stale snapshot may still show them here) or marked for deletion are
// leaving the pool and are not counted.
func (p *Pool) Counts(vms []inventory.VM) map[Key]int {
	seen := map[string]bool{}
	counts := map[Key]int{}
	for _, v := range vms {
		k, ok := keyOf(p.Hatchery, v)
		if !ok || legacy(v) || p.Life.InVM(lifeVM(v), append(lifecycle.LeavingPool(), lifecycle.Consumed()...)...) || seen[v.Name] {
			continue
		}
		seen[v.Name] = true
		counts[k]++
	}
	for _, e := range p.Life.List(lifecycle.Provisioning) {
		if !seen[e.Name] {
			seen[e.Name] = true
			counts[keyOfPool(e.Pool)]++
		}
	}
	present := make(map[string]bool, len(vms))
	for _, v := range vms {
		present[v.Name] = true
	}
	// Idle entries: provisioned by this run, not shown yet. Expired ones
	// go first (the capacity release grace has passed).
	if _, err := p.Life.Expire(lifecycle.Idle, p.Now()); err != nil {
		p.Log.Error("idle pool entries not expired", logkey.Err, err)
	}
	for _, e := range p.Life.List(lifecycle.Idle) {
		switch {
		case present[e.Name]:
			// The snapshot shows it: counted above.
			if err := p.Life.Drop(e.Name, lifecycle.Idle, lifecycle.WithRef(e.Ref)); err != nil {
				// Claimed or removed since the listing: that phase stands.
				p.Log.Debug("idle entry kept", logkey.VM, e.Name, logkey.Err, err)
			}
		case seen[e.Name]:
		default:
			seen[e.Name] = true
			counts[keyOfPool(e.Pool)]++
		}
	}
	return counts
}

// ProvisionOne clones one VM for the pool, waits for its IP and powers it
// off (a hot pool's VM: readyHot), when its footprint fits the static limits meanwhile
// (admission.Admission.ReserveProvisioning). A VM that fails on the way is marked for deletion.
func (p *Pool) ProvisionOne(ctx context.Context, t Task) {
	name := t.Name
	log := p.Log.With(logkey.VM, name, logkey.Model, t.Key.Model, logkey.Flavor, t.Key.Flavor)
	d, err := p.Admission().ReserveProvisioning(ctx, name, t.Template, t.Flavor, t.Key.Model, t.Key.Flavor)
	if err != nil {
		log.Warn("provisioning deferred to the next pass", logkey.Err, err)
		return
	}
	if !d.Allowed {
		log.Info("provisioning deferred to the next pass", logkey.Detail, "capacity: "+d.Detail)
		return
	}
	r := &provisionRun{p: p, t: t, log: log}
	defer func() {
		if r.off {
			p.Admission().DropProvisioning(name)
		} else {
			p.Admission().ReleaseProvisioning(name)
		}
	}()
	if err := p.Life.Move(name, lifecycle.Gone, lifecycle.Provisioning, lifecycle.WithPool(t.Key.Pool())); err != nil {
		log.Warn("provisioning deferred to the next pass", logkey.Err, err)
		return
	}
	// A quarantined template fills no pool either; a provisioning is a
	// spawn for the quarantine book (its failures count, its success
	// lifts), so a warm pool cannot keep cloning a broken template.
	attempt, _, refused := p.Custody.BeginAttempt(t.Key.QuarantineKey())
	if attempt == nil {
		log.Info("provisioning deferred to the next pass", logkey.Reason, refused.Reason, logkey.Detail, refused.Detail)
		p.Life.Must(name, lifecycle.Provisioning, lifecycle.Gone)
		return
	}
	defer func() { _, _ = p.Custody.EndAttempt(ctx, attempt, log, "provisioned a pool vm", r.failed) }()
	// Leaves Provisioning on every path: Idle or Gone when ready, Marked
	// when it failed (mark), Gone otherwise.
	defer func() {
		if !r.settled {
			p.Life.Must(name, lifecycle.Provisioning, lifecycle.Gone)
		}
	}()

	annot := inventory.Annotation{
		HatcheryName: p.Hatchery,
		WorkerName:   name,
		Provisioning: true,
		Created:      p.Now().UTC(),
	}
	if t.Flavor != nil {
		annot.Flavor = t.Flavor.Name
	}
	if t.Key.V1 {
		annot.WorkerModelPath = t.Key.Model
		annot.WorkerModelLastModified = t.LastModified
	} else {
		annot.VMwareModelPath = t.Key.Model
	}
	r.cloneAndReady(ctx, &annot)
}

// provisionRun is one ProvisionOne past its admission: what its deferred
// steps read of how it ended.
type provisionRun struct {
	p   *Pool
	t   Task
	log *slog.Logger
	// off: the VM waits powered off or suspended, holding no capacity: its
	// reservation is dropped, not released.
	off bool
	// failed is the failure, marked (spawnfault.MarkTemplate) when the
	// template is to blame; the quarantine's attempt ends with it.
	failed error
	// settled: the VM left Provisioning (Idle, or Marked by mark).
	settled bool
}

// failedLine says why the provisioning failed: WARN, or INFO when the
// shutdown cut it (a healthy stop logs no WARN), or DEBUG when vCenter
// did not answer (the vCenter client logs the outage's start and end,
// not a line per slot and pass: docs/operations.md#when-vcenter-restarts).
func (r *provisionRun) failedLine(ctx context.Context, err error, args ...any) {
	switch {
	case ctx.Err() != nil:
		r.log.Info("provisioning cut by the shutdown", args...)
	case vctypes.Unanswered(err):
		r.log.Debug("provisioning failed", args...)
	default:
		r.log.Warn("provisioning failed", args...)
	}
}

// mark marks the failed VM for deletion (Marked).
func (r *provisionRun) mark() {
	r.settled = r.p.Custody.MarkToDelete(r.t.Name)
}

// cloneAndReady clones the VM with its record annot, waits for its IP and
// powers it off (a hot pool's VM: readyHot); a VM that fails on the way
// is marked for deletion.
func (r *provisionRun) cloneAndReady(ctx context.Context, annot *inventory.Annotation) {
	p, t, log, name := r.p, r.t, r.log, r.t.Name
	vm, err := p.Clone(ctx, t.Template, name, annot, t.Flavor)
	if errors.Is(err, vctypes.FaultDuplicateName) {
		// Another instance of this hatchery filled the slot first
		// (docs/high-availability.md#pool-slots): the slot is filled, and
		// the VM is theirs to finish, never marked here.
		log.Debug("pool slot filled by another instance", logkey.Detail, fmt.Sprintf("clone %q: name taken", name))
		r.failed = err // says nothing of the template: neither counts nor lifts
		return
	}
	if errors.Is(err, ippool.ErrNoIPAvailable) {
		// Every address of the static ranges is held (workers, the other
		// instance's locks): a capacity state, as for a job refused for
		// lack of an address, not a fault. Nothing was cloned; the next
		// pass tries again.
		log.Info("provisioning deferred to the next pass", logkey.Reason, refusal.ReasonIP, logkey.Detail, fmt.Sprintf("clone %q: %v", t.Template.Name, err))
		r.failed = err // says nothing of the template: neither counts nor lifts
		return
	}
	if err != nil {
		r.failed = err // the hatchery's clone marks the template's own faults
		r.failedLine(ctx, err, logkey.Detail, fmt.Sprintf("clone %q: %v", t.Template.Name, err))
		r.mark()
		p.Inventory.Invalidate()
		return
	}
	p.Inventory.Invalidate()

	ipCtx, cancel := context.WithTimeout(ctx, provisionIPTimeout)
	_, err = p.Port.WaitForVirtualMachineIP(ipCtx, vm, annot.IPAddress)
	cancel()
	if err != nil {
		r.failed = spawnfault.MarkTemplate(err) // the guest of a VM of this template never came up
		r.failedLine(ctx, err, logkey.Detail, fmt.Sprintf("wait for ip of %q: %v", name, err))
		r.mark()
		return
	}
	if t.IdleState == config.IdleStateSuspended || t.IdleState == config.IdleStatePoweredOn {
		if err := p.readyHot(ctx, vm, name, annot, t.IdleState); err != nil {
			r.failed = spawnfault.MarkTemplate(err)
			r.failedLine(ctx, err, logkey.Err, err)
			r.mark()
			p.Inventory.Invalidate()
			return
		}
		// A suspended VM holds no capacity any more; a running one does,
		// and the inventory counts it once it shows it (the reservation
		// ends after the release grace).
		r.off = t.IdleState == config.IdleStateSuspended
	} else {
		if err := p.Port.ShutdownVirtualMachine(ctx, vm); err != nil {
			r.failed = err
			r.failedLine(ctx, err, logkey.Detail, fmt.Sprintf("power off %q: %v", name, err))
			r.mark()
			p.Inventory.Invalidate()
			return
		}
		r.off = true
	}
	p.Inventory.Invalidate()
	if grace := p.releaseGrace(); grace > 0 {
		// The shared inventory shows the VM after its next refresh.
		p.Life.Must(name, lifecycle.Provisioning, lifecycle.Idle, lifecycle.WithRef(vm.Value), lifecycle.WithDeadline(p.Now().Add(grace)))
		r.settled = true
	}
	log.Info("provisioned vm ready", logkey.Detail, provisionedDetail(t.IdleState))
}

// readyHot makes a booted pool VM ready to wait hot (idleState suspended or
// poweredOn): it waits for guest operations (bounded by
// provisionIPTimeout, as the IP), records the idle state and the guest's
// IP in the VM's annotation (the record a claim checks the resumed VM
// against, and what a restart reads), then suspends a VM of a suspended
// pool. The record is written before the suspend: a VM whose suspend
// fails or is cut short is powered on with a suspended record, which is
// never idle and which the cleanup removes.
func (p *Pool) readyHot(ctx context.Context, vm vctypes.Ref, name string, annot *inventory.Annotation, idleState string) error {
	gctx, cancel := context.WithTimeout(ctx, provisionIPTimeout)
	err := p.Port.WaitForGuestOperationsReady(gctx, vm)
	cancel()
	if err != nil {
		return fmt.Errorf("wait for guest operations of %q: %w", name, err)
	}
	ictx, cancel := context.WithTimeout(ctx, provisionIPTimeout)
	ip, err := p.Port.WaitForVirtualMachineIP(ictx, vm, annot.IPAddress)
	cancel()
	if err != nil {
		return fmt.Errorf("wait for ip of %q: %w", name, err)
	}
	annot.IPAddress = ip
	annot.IdleState = idleState
	if err := p.Custody.WriteRecord(ctx, vm, annot); err != nil {
		return fmt.Errorf("record idle state %q: %w", idleState, err)
	}
	if idleState != config.IdleStateSuspended {
		return nil
	}
	if err := p.Port.SuspendVirtualMachine(ctx, vm); err != nil {
		return fmt.Errorf("suspend %q: %w", name, err)
	}
	return nil
}

// provisionedDetail says how a ready pool VM waits, for the log.
func provisionedDetail(idleState string) string {
	switch idleState {
	case config.IdleStateSuspended:
		return "cloned, got its ip, guest ready, suspended"
	case config.IdleStatePoweredOn:
		return "cloned, got its ip, guest ready, running idle"
	}
	return "cloned, got its ip, powered off"
}
