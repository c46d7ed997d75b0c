package vsphere

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/internal/spawnfault"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/vim25/types"
)

// provisionIPTimeout bounds the wait for a freshly provisioned VM's IP: the
// readiness deadline (docs/design.md#timeouts). A VM that has no IP by then is removed.
const provisionIPTimeout = 3 * time.Minute

// defaultRegistrationTTL is the default workerRegistrationTTL
// (docs/design.md#timeouts), used as the bound of an in-flight provisioning when the
// configuration leaves it at zero.
const defaultRegistrationTTL = 10 * time.Minute

// cloneFunc is the signature of HatcheryVSphere.cloneVM.
type cloneFunc func(ctx context.Context, templateName, vmName string, annot *inventory.Annotation, flavor *config.Flavor) (types.ManagedObjectReference, error)

// poolKey identifies one warm pool: V1 or V2, the model (V2 template name or
// V1 model path) and the flavor name the VMs are pre-sized for ("" =
// neutral). Flavor names are lower-case.
type poolKey struct {
	v1     bool
	model  string
	flavor string
}

func (k poolKey) prefix() string {
	if k.v1 {
		return provisionV1Prefix
	}
	return provisionV2Prefix
}

// keyOf returns the pool a provisioned VM belongs to, false when the VM is
// not a provisioned VM of this hatchery.
func (h *HatcheryVSphere) keyOf(vm inventory.VM) (poolKey, bool) {
	if vm.Template || !vm.OwnedBy(h.Name()) || !vm.Annotation.Provisioning {
		return poolKey{}, false
	}
	flavor := strings.ToLower(vm.Annotation.Flavor)
	switch {
	case vm.HasPrefix(provisionV2Prefix):
		return poolKey{model: vm.Annotation.VMwareModelPath, flavor: flavor}, true
	case vm.HasPrefix(provisionV1Prefix):
		return poolKey{v1: true, model: vm.Annotation.WorkerModelPath, flavor: flavor}, true
	}
	return poolKey{}, false
}

// provisioningState is the warm pool's own state beyond the lifecycle
// table (where the VMs being provisioned, recently provisioned and claimed
// are: internal/lifecycle, docs/lifecycle.md).
type provisioningState struct {
	// clone replaces h.cloneVM in tests; nil means h.cloneVM.
	clone cloneFunc
}

func newProvisioningState() *provisioningState { return &provisioningState{} }

// provisionTask is one VM to provision.
type provisionTask struct {
	key poolKey
	// name is the pool slot cloned into (poolKey.slotName).
	name     string
	template string
	flavor   *config.Flavor
	// lastModified is the V1 model's last modification (Unix seconds).
	lastModified string
	// idleState is how the VM waits once ready (config.WorkerProvisioning.State).
	idleState string
}

// poolTarget is one pool's configured size and how to fill it.
type poolTarget struct {
	task   provisionTask
	number int
}

// provisioning is one pass of the provisioning loop
// (docs/design.md#provisioned-vms): it removes idle surplus VMs, then clones the missing ones, V2 pools
// before V1 pools, round-robin across pools, at most
// workerProvisioningPoolSize at once. It returns when every clone it
// started has ended.
func (h *HatcheryVSphere) provisioning(ctx context.Context) {
	vms, err := h.inv.VMs(ctx)
	if err != nil {
		h.log.Warn("provisioning skipped: cannot list vms", logkey.Err, err)
		return
	}
	// A claimed VM's slot name is free again once the inventory shows the
	// VM as a worker (renamed, re-annotated) or gone: without this, a slot
	// stayed Claimed until the next claim, and a pool emptied by claims
	// was never refilled.
	h.forgetConsumed(vms)
	targets, configured := h.provisioningTargets(ctx, vms)
	counts := h.poolCounts(vms)

	h.removeSurplus(ctx, vms, counts, configured)

	var v2, v1 [][]provisionTask
	for _, t := range targets {
		deficit := t.number - counts[t.task.key]
		if deficit <= 0 {
			continue
		}
		h.log.Info("provisioning pool below target", logkey.Model, t.task.key.model, logkey.Flavor, t.task.key.flavor,
			logkey.Detail, fmt.Sprintf("%d of %d present", counts[t.task.key], t.number))
		names := h.freeSlots(t.task.key, t.number, deficit, vms)
		if len(names) < deficit {
			h.log.Debug("pool slots busy, refilled next pass", logkey.Model, t.task.key.model, logkey.Flavor, t.task.key.flavor,
				logkey.Detail, fmt.Sprintf("%d missing, %d free slots", deficit, len(names)))
		}
		q := make([]provisionTask, len(names))
		for i := range q {
			q[i] = t.task
			q[i].name = names[i]
		}
		if t.task.key.v1 {
			v1 = append(v1, q)
		} else {
			v2 = append(v2, q)
		}
	}
	queue := append(roundRobinTasks(v2), roundRobinTasks(v1)...)
	h.runProvisionTasks(ctx, queue)
}

// roundRobinTasks interleaves the queues: one of each in turn.
func roundRobinTasks(queues [][]provisionTask) []provisionTask {
	var out []provisionTask
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
func (h *HatcheryVSphere) runProvisionTasks(ctx context.Context, queue []provisionTask) {
	size := h.cfg.WorkerProvisioningPoolSize
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
			h.provisionOne(ctx, task)
		})
	}
}

// provisioningTargets reads the configuration into pools: the pools to
// fill (entries that can be provisioned now) and the configured size of
// every pool (surplus is measured against it, even for a pool that cannot
// be filled this pass).
func (h *HatcheryVSphere) provisioningTargets(ctx context.Context, vms []inventory.VM) ([]poolTarget, map[poolKey]int) {
	configured := map[poolKey]int{}
	var targets []poolTarget
	var v1Models []sdk.Model
	v1Loaded, v1OK := false, false

	for i, e := range h.cfg.WorkerProvisioning {
		var key poolKey
		switch {
		case e.ModelVMWare != "":
			key = poolKey{model: e.ModelVMWare, flavor: strings.ToLower(e.Flavor)}
		case e.ModelPath != "":
			key = poolKey{v1: true, model: e.ModelPath, flavor: strings.ToLower(e.Flavor)}
		default:
			h.log.Warn("provisioning entry skipped", logkey.Detail, fmt.Sprintf("workerProvisioning[%d] names no model", i))
			continue
		}
		if e.Number <= 0 {
			continue
		}
		configured[key] += e.Number

		task := provisionTask{key: key, idleState: e.State()}
		if key.flavor != "" {
			f := h.flavorByName(key.flavor)
			if f == nil {
				h.log.Warn("provisioning entry skipped", logkey.Model, key.model, logkey.Flavor, key.flavor, logkey.Detail, "unknown flavor")
				continue
			}
			task.flavor = f
		}
		if !key.v1 {
			if !poolHasTemplate(vms, key.model) {
				h.log.Warn("provisioning entry skipped", logkey.Model, key.model, logkey.Detail, "no template with that name")
				continue
			}
			task.template = key.model
			targets = append(targets, poolTarget{task: task, number: e.Number})
			continue
		}

		if !v1Loaded {
			v1Loaded = true
			v1Models, v1OK = h.enabledModels(ctx)
		}
		if !v1OK {
			continue // logged once by enabledModels
		}
		m, ok := findEnabledModel(v1Models, key.model)
		if !ok {
			h.log.Warn("provisioning entry skipped", logkey.Model, key.model, logkey.Detail, "model not enabled on the api")
			continue
		}
		if m.NeedRegistration || h.NeedRegistration(ctx, &m) {
			h.log.Info("provisioning entry skipped", logkey.Model, key.model, logkey.Detail, "model needs registration")
			continue
		}
		tpl, ok := h.findModelTemplate(vms, &m)
		if !ok {
			h.log.Info("provisioning entry skipped", logkey.Model, key.model, logkey.Detail, "no model template built yet")
			continue
		}
		task.template = tpl.Name
		task.lastModified = modelLastModified(&m)
		targets = append(targets, poolTarget{task: task, number: e.Number})
	}
	return targets, configured
}

// enabledModels fetches the V1 models; false (logged) when the API is not
// there or fails: V1 pools are then not filled this pass.
func (h *HatcheryVSphere) enabledModels(ctx context.Context) ([]sdk.Model, bool) {
	if h.cds == nil {
		h.log.Warn("v1 provisioning skipped", logkey.Detail, "no cds api client")
		return nil, false
	}
	ms, err := h.cds.WorkerModelsEnabled(ctx)
	if err != nil {
		h.log.Warn("v1 provisioning skipped", logkey.Detail, fmt.Sprintf("list enabled worker models: %v", err))
		return nil, false
	}
	return ms, true
}

func findEnabledModel(ms []sdk.Model, path string) (sdk.Model, bool) {
	for _, m := range ms {
		if m.Path() == path {
			return m, true
		}
	}
	return sdk.Model{}, false
}

func poolHasTemplate(vms []inventory.VM, name string) bool {
	for _, v := range vms {
		if v.Template && v.Name == name {
			return true
		}
	}
	return false
}

// flavorByName returns the configured flavor (names are case-insensitive).
func (h *HatcheryVSphere) flavorByName(name string) *config.Flavor {
	for i := range h.cfg.Flavors {
		if strings.EqualFold(h.cfg.Flavors[i].Name, name) {
			f := h.cfg.Flavors[i]
			return &f
		}
	}
	return nil
}

// poolCounts counts, per pool, the provisioned VMs of this hatchery that
// stay in the pool: in vCenter (idle, or left half-made and waiting for
// cleanup) or being provisioned now. VMs being claimed, already claimed
// (a stale snapshot may still show them here) or marked for deletion are
// leaving the pool and are not counted.
func (h *HatcheryVSphere) poolCounts(vms []inventory.VM) map[poolKey]int {
	seen := map[string]bool{}
	counts := map[poolKey]int{}
	for _, v := range vms {
		k, ok := h.keyOf(v)
		if !ok || h.life.In(v.Name, leavingPool...) || h.life.RefIn(v.Ref.Value, consumedPhases...) || seen[v.Name] {
			continue
		}
		seen[v.Name] = true
		counts[k]++
	}
	for _, e := range h.life.List(lifecycle.Provisioning) {
		if !seen[e.Name] {
			seen[e.Name] = true
			counts[poolKeyOf(e.Pool)]++
		}
	}
	present := make(map[string]bool, len(vms))
	for _, v := range vms {
		present[v.Name] = true
	}
	// Idle entries: provisioned by this run, not shown yet. Expired ones
	// go first (the capacity release grace has passed).
	h.life.Expire(lifecycle.Idle, h.now())
	for _, e := range h.life.List(lifecycle.Idle) {
		switch {
		case present[e.Name]:
			// The snapshot shows it: counted above.
			_ = h.life.Move(e.Name, lifecycle.Idle, lifecycle.Gone)
		case seen[e.Name]:
		default:
			seen[e.Name] = true
			counts[poolKeyOf(e.Pool)]++
		}
	}
	return counts
}

// provisionOne clones one VM for the pool, waits for its IP and powers it
// off (a hot pool's VM: readyHot), when its footprint fits the static limits meanwhile
// (admission.Admission.ReserveProvisioning). A VM that fails on the way is marked for deletion.
func (h *HatcheryVSphere) provisionOne(ctx context.Context, t provisionTask) {
	name := t.name
	log := h.log.With(logkey.VM, name, logkey.Model, t.key.model, logkey.Flavor, t.key.flavor)
	d, err := h.admission().ReserveProvisioning(ctx, name, t.template, t.flavor, t.key.model, t.key.flavor)
	if err != nil {
		log.Warn("provisioning deferred to the next pass", logkey.Err, err)
		return
	}
	if !d.Allowed {
		log.Info("provisioning deferred to the next pass", logkey.Detail, "capacity: "+d.Detail)
		return
	}
	off := false
	defer func() {
		if off {
			h.admission().DropProvisioning(name)
		} else {
			h.admission().ReleaseProvisioning(name)
		}
	}()
	if err := h.life.Move(name, lifecycle.Gone, lifecycle.Provisioning, lifecycle.WithPool(t.key.pool())); err != nil {
		log.Warn("provisioning deferred to the next pass", logkey.Err, err)
		return
	}
	// A quarantined template fills no pool either; a provisioning is a
	// spawn for the quarantine book (its failures count, its success
	// lifts), so a warm pool cannot keep cloning a broken template.
	attempt, v := h.quar.Begin(t.key.quarantineKey())
	if attempt == nil {
		log.Info("provisioning deferred to the next pass", logkey.Reason, refusal.ReasonQuarantined, logkey.Detail, refuseQuarantined(v).Detail)
		_ = h.life.Move(name, lifecycle.Provisioning, lifecycle.Gone)
		return
	}
	var failed error // the failure, marked (spawnfault.MarkTemplate) when the template is to blame
	defer func() { h.endAttempt(ctx, attempt, log, "provisioned a pool vm", failed) }()
	// Leaves Provisioning on every path: Idle or Gone when ready, Marked
	// when it failed (then this move is refused, as it should be).
	defer func() { _ = h.life.Move(name, lifecycle.Provisioning, lifecycle.Gone) }()

	annot := inventory.Annotation{
		HatcheryName: h.Name(),
		WorkerName:   name,
		Provisioning: true,
		Created:      h.now().UTC(),
	}
	if t.flavor != nil {
		annot.Flavor = t.flavor.Name
	}
	if t.key.v1 {
		annot.WorkerModelPath = t.key.model
		annot.WorkerModelLastModified = t.lastModified
	} else {
		annot.VMwareModelPath = t.key.model
	}

	clone := h.prov.clone
	if clone == nil {
		clone = h.cloneVM
	}
	vm, err := clone(ctx, t.template, name, &annot, t.flavor)
	if fault.Is(err, &types.DuplicateName{}) {
		// Another instance of this hatchery filled the slot first
		// (docs/high-availability.md#pool-slots): the slot is filled, and
		// the VM is theirs to finish, never marked here.
		log.Debug("pool slot filled by another instance", logkey.Detail, fmt.Sprintf("clone %q: name taken", name))
		failed = err // says nothing of the template: neither counts nor lifts
		return
	}
	if err != nil {
		failed = err // cloneVM marks the template's own faults
		log.Warn("provisioning failed", logkey.Detail, fmt.Sprintf("clone %q: %v", t.template, err))
		h.markToDelete(name)
		h.inv.Invalidate()
		return
	}
	h.inv.Invalidate()

	ipCtx, cancel := context.WithTimeout(ctx, provisionIPTimeout)
	_, err = h.vs.WaitForVirtualMachineIP(ipCtx, vm, annot.IPAddress)
	cancel()
	if err != nil {
		failed = spawnfault.MarkTemplate(err) // the guest of a VM of this template never came up
		log.Warn("provisioning failed", logkey.Detail, fmt.Sprintf("wait for ip of %q: %v", name, err))
		h.markToDelete(name)
		return
	}
	if t.idleState == config.IdleStateSuspended || t.idleState == config.IdleStatePoweredOn {
		if err := h.readyHot(ctx, vm, name, &annot, t.idleState); err != nil {
			failed = spawnfault.MarkTemplate(err)
			log.Warn("provisioning failed", logkey.Err, err)
			h.markToDelete(name)
			h.inv.Invalidate()
			return
		}
		// A suspended VM holds no capacity any more; a running one does,
		// and the inventory counts it once it shows it (the reservation
		// ends after the release grace).
		off = t.idleState == config.IdleStateSuspended
	} else {
		if err := h.vs.ShutdownVirtualMachine(ctx, vm); err != nil {
			failed = err
			log.Warn("provisioning failed", logkey.Detail, fmt.Sprintf("power off %q: %v", name, err))
			h.markToDelete(name)
			h.inv.Invalidate()
			return
		}
		off = true
	}
	h.inv.Invalidate()
	if grace := h.releaseGrace(); grace > 0 {
		// The shared inventory shows the VM after its next refresh.
		_ = h.life.Move(name, lifecycle.Provisioning, lifecycle.Idle, lifecycle.WithDeadline(h.now().Add(grace)))
	}
	log.Info("provisioned vm ready", logkey.Detail, provisionedDetail(t.idleState))
}

// readyHot makes a booted pool VM ready to wait hot (idleState suspended or
// poweredOn): it waits for guest operations (bounded by
// provisionIPTimeout, as the IP), records the idle state and the guest's
// IP in the VM's annotation (the record a claim checks the resumed VM
// against, and what a restart reads), then suspends a VM of a suspended
// pool. The record is written before the suspend: a VM whose suspend
// fails or is cut short is powered on with a suspended record, which is
// never idle and which the cleanup removes.
func (h *HatcheryVSphere) readyHot(ctx context.Context, vm types.ManagedObjectReference, name string, annot *inventory.Annotation, idleState string) error {
	gctx, cancel := context.WithTimeout(ctx, provisionIPTimeout)
	err := h.vs.WaitForGuestOperationsReady(gctx, vm)
	cancel()
	if err != nil {
		return fmt.Errorf("wait for guest operations of %q: %w", name, err)
	}
	ictx, cancel := context.WithTimeout(ctx, provisionIPTimeout)
	ip, err := h.vs.WaitForVirtualMachineIP(ictx, vm, annot.IPAddress)
	cancel()
	if err != nil {
		return fmt.Errorf("wait for ip of %q: %w", name, err)
	}
	annot.IPAddress = ip
	annot.IdleState = idleState
	if err := h.writeAnnotation(ctx, vm, annot); err != nil {
		return fmt.Errorf("record idle state %q: %w", idleState, err)
	}
	if idleState != config.IdleStateSuspended {
		return nil
	}
	if err := h.vs.SuspendVirtualMachine(ctx, vm); err != nil {
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
