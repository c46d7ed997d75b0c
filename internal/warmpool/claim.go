package warmpool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"

	"github.com/cds-contrib/hatchery-vsphere/internal/cloudinit"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/guest"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/internal/spawnfault"
	"github.com/cds-contrib/hatchery-vsphere/internal/spawntiming"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// errClaimLost means another writer reconfigured the VM since it was
// listed: another instance of this hatchery claimed it first.
var errClaimLost = errors.New("claim lost: vm changed since it was listed")

// errClaimGone means the VM no longer exists: it was destroyed since it
// was listed (another instance claimed it and its job ended, or a surplus
// removal took it). Like a lost claim, an expected outcome with several
// instances, not a failure.
var errClaimGone = errors.New("claim lost: vm destroyed since it was listed")

// takeInVCenter is the first write to an idle pool VM of a claim or a
// surplus removal, a compare-and-swap: a reconfigure carrying the
// config.changeVersion read with the listing, that rewrites the
// annotation as no longer a pool VM (provisioning false, created now).
// vCenter refuses it with a ConcurrentAccess fault when the VM changed
// since (another instance's claim or surplus removal): errClaimLost. Once
// it succeeds, no other instance lists the VM as idle, and no other
// instance's claim or removal started from an older listing can succeed.
// A VM whose taker stops before renaming or deleting it is a worker that
// never started: cleanup reclaims it after workerRegistrationTTL.
func (p *Pool) takeInVCenter(ctx context.Context, v inventory.VM) error {
	if v.Annotation == nil {
		return fmt.Errorf("claim %q: no annotation", v.Name)
	}
	a := *v.Annotation
	a.Provisioning = false
	a.Created = p.Now().UTC()
	rec := a.Record()
	err := p.Port.ReconfigureVirtualMachine(ctx, v.ObjectRef(), vctypes.ConfigChange{ChangeVersion: v.ChangeVersion, Record: &rec})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, vctypes.FaultConcurrentAccess):
		return fmt.Errorf("claim %q at changeVersion %q: %w", v.Name, v.ChangeVersion, errClaimLost)
	case errors.Is(err, vctypes.FaultNotFound):
		return fmt.Errorf("claim %q: %w", v.Name, errClaimGone)
	default:
		return fmt.Errorf("claim %q: %w", v.Name, err)
	}
}

// Claim picks an idle provisioned VM for model
// (docs/design.md#provisioned-vms), marks it as being used and returns it; nil, nil when none is
// available. Candidates are this hatchery's provisioned VMs of the model
// (V2: the template name, V1: the model path), powered off, not being
// provisioned, claimed or deleted, waiting in the idle state their
// annotation records (IdleProvisioned). Power state and annotation
// decide that a VM is ready: a VM whose power state is not its recorded
// idle state is still being provisioned (or half-made) and is skipped. The claim is atomic: two
// concurrent claims never return the same VM (a move to Claimed in the
// lifecycle table). The entry ends when the inventory no longer shows the
// VM as a pool VM (forgetConsumed).
//
// The order of the candidates is claimCandidates'; hotOK false leaves out
// suspended and powered-on VMs (a cloud-init spawn: its userdata is read
// at first boot, which a hot VM has passed).
func (p *Pool) Claim(ctx context.Context, model sdk.WorkerStarterWorkerModel, flavor *config.Flavor, hotOK bool) (*inventory.VM, error) {
	want := ModelKey(model)
	if want.Model == "" {
		return nil, nil
	}
	wantFlavor := ""
	if flavor != nil {
		wantFlavor = flavor.Name // normalised (config.Config.Normalize)
	}

	vms, err := p.Inventory.VMs(ctx)
	if err != nil {
		return nil, fmt.Errorf("claim provisioned vm for model %q: list vms: %w", want.Model, err)
	}
	p.forgetConsumed(vms)
	candidates := p.claimCandidates(vms, want, wantFlavor, hotOK)

	for _, v := range candidates {
		// One atomic step: a VM a concurrent claim took, or the surplus
		// removal or cleanup marked since the listing, is not idle any
		// more and the move is refused. From here the VM is a worker (or,
		// on failure, marked for deletion): never idle again, whatever a
		// stale snapshot says, until the inventory shows it renamed.
		if _, err := p.Life.MoveFrom(v.Name, lifecycle.Claimable(), lifecycle.Claimed, lifecycle.WithRef(v.ObjectRef().Value), lifecycle.WithPool(want.Pool())); err != nil {
			continue
		}
		// The claim in memory settles this process's own spawns; the
		// compare-and-swap below settles it against the other instances
		// of this hatchery (docs/high-availability.md).
		err := p.takeInVCenter(ctx, v)
		if err != nil {
			p.dropClaim(v.Name, v.ObjectRef().Value)
		}
		switch {
		case errors.Is(err, errClaimLost):
			p.Log.Info("provisioned vm taken by another instance, trying the next", logkey.VM, v.Name, logkey.Model, want.Model,
				logkey.Detail, "changeVersion moved since the listing")
			continue
		case errors.Is(err, errClaimGone):
			p.Inventory.Invalidate()
			p.Log.Info("provisioned vm gone since the listing, trying the next", logkey.VM, v.Name, logkey.Model, want.Model,
				logkey.Detail, "destroyed since the listing")
			continue
		case err != nil:
			p.Inventory.Invalidate()
			return nil, fmt.Errorf("claim provisioned vm for model %q: %w", want.Model, err)
		}
		p.Log.Info("claimed provisioned vm", logkey.VM, v.Name, logkey.Model, want.Model, logkey.Flavor, wantFlavor,
			logkey.Detail, claimReason(v, wantFlavor))
		return &v, nil
	}
	p.Log.Debug("no provisioned vm to claim", logkey.Model, want.Model, logkey.Flavor, wantFlavor, logkey.Detail, "no idle vm of that model and flavor")
	return nil, nil
}

// dropClaim ends the Claimed entry of the pool VM name (reference ref): its
// claim was lost or abandoned before anything was done to the VM. An entry
// gone already (forgetConsumed saw the VM leave the pool first) is fine.
func (p *Pool) dropClaim(name, ref string) {
	if err := p.Life.Drop(name, lifecycle.Claimed, lifecycle.WithRef(ref)); err != nil {
		// Marked meanwhile (the cleanup or a surplus removal decided):
		// that phase stands.
		p.Log.Debug("claimed entry kept", logkey.VM, name, logkey.Err, err)
	}
}

// claimCandidates lists the idle pool VMs of pool want (any flavor) that a
// spawn of flavor wantFlavor may take, in the order it should try them
// (docs/configuration.md, "Warm pool"): the exact flavor waiting hot
// (suspended or powered on; only when hotOK), the exact flavor powered
// off, a neutral VM powered off (resized on claim). Within each group the
// oldest goes first. A VM pre-sized for another flavor, or a hot VM with
// no flavor (it could not be resized), is never a candidate.
func (p *Pool) claimCandidates(vms []inventory.VM, want Key, wantFlavor string, hotOK bool) []inventory.VM {
	var hot, exact, neutral []inventory.VM
	for _, v := range vms {
		if !p.IdleProvisioned(v) {
			continue
		}
		k, _ := keyOf(p.Hatchery, v)
		if k.V1 != want.V1 || k.Model != want.Model {
			continue
		}
		isHot := v.Annotation.IdleState != ""
		switch {
		case isHot && (!hotOK || k.Flavor == "" || k.Flavor != wantFlavor):
		case isHot:
			hot = append(hot, v)
		case k.Flavor == wantFlavor:
			exact = append(exact, v)
		case k.Flavor == "":
			neutral = append(neutral, v)
		}
	}
	sortOldestFirst(hot)
	sortOldestFirst(exact)
	sortOldestFirst(neutral)
	return append(append(hot, exact...), neutral...)
}

func claimReason(v inventory.VM, wantFlavor string) string {
	switch {
	case v.Annotation.IdleState != "":
		return "exact flavor, " + v.Annotation.IdleState
	case config.FlavorName(v.Annotation.Flavor) == wantFlavor:
		return "exact flavor"
	}
	return "neutral vm, resized on claim"
}

// sortOldestFirst orders vms by creation (their record's Created), the
// oldest first, then by name: the order claims and surplus removals take
// pool VMs in.
func sortOldestFirst(vms []inventory.VM) {
	sort.SliceStable(vms, func(i, j int) bool {
		a, b := vms[i].Annotation.Created, vms[j].Annotation.Created
		if !a.Equal(b) {
			return a.Before(b)
		}
		return vms[i].Name < vms[j].Name
	})
}

// PrepareClaimed turns a claimed VM into the worker: one reconfigure
// while powered off renames it to annot.WorkerName (the spec's Name: vCenter
// renames on reconfigure) and writes annot (and the flavor's CPU/RAM and
// disk growth when the VM is neutral and a flavor is requested), then
// power on. The annotation written always names this hatchery, is no longer
// a provisioning one, is created now (the claim time) and keeps the VM's
// static IP when annot has none. It
// refuses a VM that is not ours. On error the VM is powered off and marked
// for deletion, and the error names the failed step.
//
// A non-nil boot adds the cloud-init guestinfo (metadata with a new instance id, userdata) to the
// reconfigure made before power on. On a failure after that reconfigure
// the userdata is removed again before the VM is marked for deletion.
func (p *Pool) PrepareClaimed(ctx context.Context, vm *inventory.VM, annot inventory.Annotation, flavor *config.Flavor, boot *cloudinit.Boot) (vctypes.Ref, error) {
	if err := p.beginPrepare(vm, &annot); err != nil {
		return vctypes.Ref{}, err
	}
	newName := annot.WorkerName
	resize := flavor != nil && vm.Annotation.Flavor == ""
	if flavor != nil && annot.Flavor == "" {
		annot.Flavor = flavor.Name
	} else if flavor == nil && annot.Flavor == "" {
		annot.Flavor = vm.Annotation.Flavor
	}
	log := p.Log.With(logkey.VM, vm.Name, logkey.Model, annot.ModelName(), logkey.Job, annot.JobID)

	obj := vm.ObjectRef()
	current := vm.Name
	renameUnknown := false
	userdataWritten := false
	fail := func(step string, err error) (vctypes.Ref, error) {
		err = fmt.Errorf("prepare claimed vm %q as %q: %s: %w", vm.Name, newName, step, err)
		log.Warn("claimed vm failed, marked for deletion", logkey.Err, err)
		if userdataWritten {
			p.Custody.ScrubUserdata(ctx, obj, current, "claimed vm failed")
		}
		p.abandonClaim(ctx, log, obj, current, newName, renameUnknown)
		return vctypes.Ref{}, err
	}

	spawntiming.Mark(ctx, spawntiming.StageBookToClone)
	// The rename rides on the reconfigure (one task, not two), with the
	// record, the growth to the flavor and the cloud-init guestinfo.
	rec := annot.Record()
	change := vctypes.ConfigChange{Name: newName, Record: &rec}
	if resize {
		change.Growth = flavor.Growth()
	}
	if boot != nil {
		opts, err := p.cloudInitOptions(newName, annot.IPAddress, *boot)
		if err != nil {
			// Nothing was sent: the VM is as it was.
			return fail("cloud-init guestinfo", err)
		}
		change.Options = opts
	}
	if err := p.Port.ReconfigureVirtualMachine(ctx, obj, change); err != nil {
		var prep *vctypes.PrepError
		if errors.As(err, &prep) {
			// Nothing was sent: the VM is as it was.
			return fail(prep.Step, prep.Err)
		}
		// A fault vCenter answered applied nothing: the VM keeps its
		// pool name. Otherwise it may carry either name.
		renameUnknown = !spawnfault.IsVCenterFault(err)
		userdataWritten = boot != nil // remove it in any case, to be safe
		return fail(fmt.Sprintf("rename %q to %q and reconfigure", vm.Name, newName), err)
	}
	current = newName
	userdataWritten = boot != nil
	spawntiming.Mark(ctx, spawntiming.StageClaim)
	if err := p.Port.StartVirtualMachine(ctx, obj); err != nil {
		return fail("power on", metrics.MarkSpawnFailure(metrics.SpawnFailurePowerOn, err))
	}
	spawntiming.Mark(ctx, spawntiming.StagePowerOn)
	p.Inventory.Invalidate()
	log.Info("claimed vm prepared", logkey.Flavor, annot.Flavor, logkey.Detail, fmt.Sprintf("renamed to %q and powered on", newName))
	return obj, nil
}

// cloudInitOptions is CloudInit's guestinfo for the worker name at ip.
func (p *Pool) cloudInitOptions(name, ip string, boot cloudinit.Boot) ([]vctypes.Option, error) {
	if p.CloudInit == nil {
		return nil, errors.New("no clone spec builder")
	}
	return p.CloudInit(name, ip, boot)
}

// abandonClaim ends a claimed VM whose preparation failed: it powers the
// VM off, on a context detached from the (possibly ended) spawn and
// bounded by guest.Readiness.Cleanup, then marks it for deletion under the
// name it has now (current); renameUnknown says the renaming reconfigure's
// outcome is unknown, so the VM may carry either name and both are marked.
// A worker name the VM never took is freed.
func (p *Pool) abandonClaim(ctx context.Context, log *slog.Logger, vm vctypes.Ref, current, newName string, renameUnknown bool) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), guest.Readiness.Cleanup)
	if err := p.Port.ShutdownVirtualMachine(cctx, vm); err != nil {
		log.Warn("claimed vm not powered off, left to cleanup", logkey.Err, err)
	}
	cancel()
	if current != newName && !renameUnknown {
		// Not renamed: the VM is marked under its pool name, and the
		// worker name it never took is freed.
		p.Life.Must(current, lifecycle.Preparing, lifecycle.Marked, lifecycle.WithRef(vm.Value), lifecycle.Forget(newName))
	} else {
		// Renamed, or the reconfigure's outcome is unknown: the entry
		// (one per reference, moved under the worker name when the
		// preparation began) answers to both names, marked. It is named
		// by its current name: a move by a name it bore before finds no
		// entry (that name is free for a new VM).
		p.Custody.MarkToDelete(newName)
	}
	p.Inventory.Invalidate()
}

// beginPrepare starts the preparation of a claimed pool VM as the worker
// annot.WorkerName: it refuses a VM that is not ours (or no worker name),
// completes annot as the worker's record (this hatchery, no longer a pool
// VM, the VM's IP when annot has none, created now) and moves the worker
// name to Preparing. On a refused move the claim is dropped (the VM is
// idle again, nothing was done to it).
func (p *Pool) beginPrepare(vm *inventory.VM, annot *inventory.Annotation) error {
	if vm == nil {
		return fmt.Errorf("prepare claimed vm: no vm")
	}
	if !vm.OwnedBy(p.Hatchery) || vm.Template {
		p.Log.Error("refusing to prepare claimed vm", logkey.VM, vm.Name, logkey.Detail, "not a vm owned by this hatchery")
		return fmt.Errorf("prepare claimed vm %q: not owned by hatchery %q", vm.Name, p.Hatchery)
	}
	newName := annot.WorkerName
	if newName == "" {
		return fmt.Errorf("prepare claimed vm %q: no worker name", vm.Name)
	}
	annot.HatcheryName = p.Hatchery
	annot.Provisioning = false
	annot.IdleState = ""
	if annot.IPAddress == "" {
		annot.IPAddress = vm.Annotation.IPAddress
	}
	// Created is the claim time: cleanup measures the worker's registration
	// window from it until WorkerStarted is recorded. Keeping the
	// provisioning time would let cleanup take a freshly claimed VM that
	// waited long in the pool for a worker that never started.
	annot.Created = p.Now().UTC()

	// The claimed VM's entry (its reference) takes the worker name: the
	// cleanup leaves it alone under either name until it runs, and the
	// spawn moves it on to Running (the hatchery, internal/vsphere).
	if err := p.Life.Move(newName, lifecycle.Claimed, lifecycle.Preparing, lifecycle.WithRef(vm.ObjectRef().Value), lifecycle.WithJob(annot.JobID)); err != nil {
		// Nothing was done to the VM: it is idle again.
		p.dropClaim(vm.Name, vm.ObjectRef().Value)
		return fmt.Errorf("prepare claimed vm %q as %q: %w", vm.Name, newName, err)
	}

	// The VM came from the snapshot, which shows its address from now on:
	// the reservation its provisioning made under its old name would
	// outlive it.
	p.IPs.Release(vm.Annotation.IPAddress, vm.Name)
	return nil
}
