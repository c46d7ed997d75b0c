package vsphere

import (
	"context"
	"errors"
	"fmt"

	"github.com/cds-contrib/hatchery-vsphere/internal/clonespec"
	"github.com/cds-contrib/hatchery-vsphere/internal/cloudinit"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/guest"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/ippool"
	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/internal/modelref"
	"github.com/cds-contrib/hatchery-vsphere/internal/spawnfault"
	"github.com/cds-contrib/hatchery-vsphere/internal/spawntiming"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/internal/warmpool"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// SpawnWorker starts one worker (docs/architecture.md): it takes the job's
// plan (spawnPlan: the admission's, resolved from one configuration
// snapshot), resolves from it the guest credentials, the script and the
// template, claims a pre-provisioned
// VM or clones a fresh one, waits for it to be ready, launches the worker
// and records the start in the VM's annotation. A registration (RegisterOnly)
// builds the V1 model's template instead. On any failure after a VM exists
// the VM is powered off and marked for deletion and its IP released; the
// error names the VM, the job and the step.
func (h *HatcheryVSphere) SpawnWorker(ctx context.Context, args spawn.Arguments) (err error) {
	key := pendingKey(args.JobID, args.Model)
	if !h.life.BeginSpawn(key) {
		h.log.Info("spawn refused", logkey.VM, args.WorkerName, logkey.Job, args.JobID, logkey.Model, args.Model.GetName(), logkey.Detail, "job already being spawned")
		return fmt.Errorf("spawn worker %q for job %q: job already being spawned", args.WorkerName, args.JobID)
	}
	defer h.life.EndSpawn(key)
	defer h.releaseCapacity(args.JobID)

	if args.RegisterOnly {
		return h.registerModel(ctx, args)
	}
	// Every step below reads the plan, never the running configuration:
	// a reload meanwhile is the next job's.
	plan := h.spawnPlan(args)
	qa, err := h.quarantineBegin(args, plan.QuarantineKey)
	if err != nil {
		return err
	}
	defer func() { err = h.quarantineEnd(ctx, qa, args, err) }()
	clock := spawntiming.NewClock(h.now, args.Queued, args.Booked)
	ctx = spawntiming.WithClock(ctx, clock)
	name := args.WorkerName
	errf := func(step string, err error) error {
		h.warnUnlessShuttingDown(ctx, "spawn failed", logkey.VM, name, logkey.Job, args.JobID, logkey.Model, args.Model.GetName(), logkey.Detail, step)
		return fmt.Errorf("spawn worker %q for job %q: %s: %w", name, args.JobID, step, err)
	}
	if name == "" {
		return errf("check arguments", errors.New("no worker name"))
	}

	flavor, err := plan.Flavor, plan.FlavorErr
	if err != nil {
		return errf("resolve flavor", metrics.MarkSpawnFailure(metrics.SpawnFailureFlavor, err))
	}
	ga, cloudInit, err := h.accessOf(ctx, args.Model, plan.Model)
	if err != nil {
		return errf("resolve guest credentials", err)
	}
	script, err := guest.Script(args, ga.PreStartScript, plan.WorkerTTL)
	if err != nil {
		return errf("build worker script", err)
	}
	boot := cloudInitBoot(cloudInit, plan.IsWindows(), script, args.WorkerConfig)
	vms, err := h.inv.VMs(ctx)
	if err != nil {
		return errf("list vms", err)
	}
	template, err := h.spawnTemplate(vms, plan.Template, args.Model)
	if err != nil {
		return errf("resolve template", err)
	}
	for _, v := range vms {
		if v.Name == name {
			return errf("check name", fmt.Errorf("a vm named %q already exists", name))
		}
	}

	annot := inventory.Annotation{
		HatcheryName: h.Name(),
		WorkerName:   name,
		JobID:        args.JobID,
		Created:      h.now().UTC(),
		Flavor:       clonespec.FlavorName(flavor),
		SpawnedBy:    h.instance,
	}
	if args.Model.IsV1() {
		annot.WorkerModelPath = args.Model.GetName()
		annot.WorkerModelLastModified = modelLastModified(args.Model.ModelV1)
	} else {
		annot.VMwareModelPath = template.Name
	}

	vm, err := h.instantOrClaimOrClone(ctx, args, plan, template, &annot, boot)
	if errors.Is(err, ippool.ErrNoIPAvailable) {
		// CanSpawn saw a free address; a concurrent spawn, a pool refill
		// or the other instance's lock took it since. A capacity state,
		// not a failure: the job goes back to the queue, its attempt
		// uncounted, as when the admission refuses it for an address.
		r := &refusal.Refusal{Reason: refusal.ReasonIP, Detail: "no static ip address left at clone time (taken since the admission)", Err: err}
		h.log.Info("spawn refused", logkey.VM, name, logkey.Job, args.JobID, logkey.Model, args.Model.GetName(), logkey.Reason, r.Reason, logkey.Detail, err.Error())
		return r
	}
	if err != nil {
		return errf("create vm", metrics.MarkSpawnFailure(metrics.SpawnFailureClone, err))
	}
	h.recordCreated(name, args.JobID)
	h.log.Info("vm created", logkey.VM, name, logkey.Job, args.JobID, logkey.Model, args.Model.GetName(), logkey.Flavor, annot.Flavor, logkey.IP, annot.IPAddress)

	if cloudInit {
		err = h.bootCloudInitWorker(ctx, vm, name, &annot, true, planBootWait(plan))
	} else {
		err = h.launchWorker(ctx, h.guestFor(plan), vm, name, &annot, ga, script, args.WorkerConfig)
	}
	if err != nil {
		if cloudInit {
			h.scrubUserdata(ctx, vm, name, "spawn failed")
		}
		step, cause := "start worker", err
		var se *guest.StepError
		if errors.As(err, &se) {
			step, cause = se.Step, metrics.MarkSpawnFailure(guestFailure(se.Step), se.Err)
		}
		if !h.holdVM(ctx, plan, vm, name, &annot, step) {
			h.abandonVM(ctx, vm, name, annot.IPAddress)
		}
		return errf(step, spawnfault.MarkTemplate(cause))
	}
	h.timingReporterAt(plan.SlowStart).Report(ctx, args, clock)
	return nil
}

// stepLaunch is the guest step launching the worker program.
const stepLaunch = "launch worker"

// guestFailure is the spawns_failed reason of a failed guest step:
// launching the worker, else its readiness (guest operations, the IP,
// the first command in the guest).
func guestFailure(step string) metrics.SpawnFailureReason {
	if step == stepLaunch {
		return metrics.SpawnFailureLaunch
	}
	return metrics.SpawnFailureGuestNotReady
}

// spawnTemplate returns want, the template a worker of model is cloned
// from (its plan's: modelref.Of, docs/design.md#which-template), once vms
// show it: the V2 spec.image, which must exist as a template; for V1 this
// hatchery's template of the model, built by registration.
func (h *HatcheryVSphere) spawnTemplate(vms []inventory.VM, want modelref.Template, model sdk.WorkerStarterWorkerModel) (modelref.Template, error) {
	if _, ok := inventory.FindTemplate(vms, h.Name(), want); ok {
		return want, nil
	}
	switch {
	case want.Built:
		return modelref.Template{}, fmt.Errorf("no template %q of model %q: the model is not registered", want.Name, model.GetName())
	case want.Name == "":
		return modelref.Template{}, fmt.Errorf("model %q has no spec.image", model.GetName())
	}
	for _, v := range vms {
		if v.Name == want.Name {
			return modelref.Template{}, fmt.Errorf("image %q of model %q is a vm, not a template", want.Name, model.GetName())
		}
	}
	return modelref.Template{}, fmt.Errorf("template %q of model %q not found", want.Name, model.GetName())
}

// claimOrClone returns the worker's VM, powered on and carrying annot: a
// claimed pre-provisioned VM when one fits, else a fresh clone. On error
// the callee has already cleaned up (delete mark, IP released).
// boot, for a cloud-init model, is written in the VM's guestinfo before it
// powers on. to is where a fresh clone goes and its guest OS, from the
// job's plan.
func (h *HatcheryVSphere) claimOrClone(ctx context.Context, args spawn.Arguments, template modelref.Template, annot *inventory.Annotation, flavor *config.Flavor, boot *cloudinit.Boot, to cloneTo) (vctypes.Ref, error) {
	for attempt := 0; ; attempt++ {
		// A hot VM whose check fails is discarded: the next candidate
		// (or a fresh clone) serves the job.
		claimed, err := h.pool.Claim(ctx, args.Model, flavor, boot == nil && attempt < warmpool.MaxHotClaims)
		if err != nil {
			h.log.Warn("claim provisioned vm failed, cloning", logkey.VM, annot.WorkerName, logkey.Job, args.JobID, logkey.Err, err)
			claimed = nil
		}
		if attempt == 0 && !isRegisterJob(args.JobID) {
			h.pool.NoteStart(args.Model, flavor, args.JobID, claimed != nil) // the pool's hit ratio
		}
		if claimed == nil {
			break
		}
		if !claimed.OwnedBy(h.Name()) {
			// Never act on a VM that is not ours, whatever the claim says.
			return vctypes.Ref{}, fmt.Errorf("claimed vm %q is not owned by hatchery %q", claimed.Name, h.Name())
		}
		annot.IPAddress = claimed.Annotation.IPAddress
		annot.Created = claimed.Annotation.Created
		// A claimed VM stays where it was cloned, whatever placement the
		// admission chose (a cordoned placement's pool drains so).
		h.placementUnused(to.w)
		annot.Placement = claimed.Annotation.Placement
		h.log.Info("provisioned vm claimed", logkey.VM, claimed.Name, logkey.Job, args.JobID, logkey.Flavor, clonespec.FlavorName(flavor), logkey.IP, annot.IPAddress)
		var vm vctypes.Ref
		if claimed.Annotation.IdleState != "" {
			vm, err = h.pool.PrepareHot(ctx, claimed, *annot)
			h.inv.Invalidate()
			if errors.Is(err, warmpool.ErrHotCheck) {
				annot.IPAddress = ""
				h.log.Info("hot vm discarded, trying the next option", logkey.VM, claimed.Name, logkey.Job, args.JobID, logkey.Err, err)
				continue
			}
		} else {
			vm, err = h.pool.PrepareClaimed(ctx, claimed, *annot, flavor, boot)
			h.inv.Invalidate()
		}
		if err != nil {
			return vctypes.Ref{}, fmt.Errorf("prepare provisioned vm %q: %w", claimed.Name, err)
		}
		if vm.Value == "" {
			return vctypes.Ref{}, fmt.Errorf("prepare provisioned vm %q: no vm returned", claimed.Name)
		}
		return vm, nil
	}
	annot.IPAddress, annot.Created, annot.Placement = "", h.now().UTC(), ""
	return h.cloneVMTo(ctx, template, annot.WorkerName, annot, flavor, boot, to)
}

// startWorker is launchWorker through the starter of the VM recorded by
// annot, its OS read in the running configuration (guestOf): a
// registration's; a job's spawn reads its plan (guestFor).
func (h *HatcheryVSphere) startWorker(ctx context.Context, vm vctypes.Ref, name string, annot *inventory.Annotation, ga guest.Access, script string, cfg spawn.WorkerConfig) error {
	return h.launchWorker(ctx, h.guestOf(annot), vm, name, annot, ga, script, cfg)
}

// launchWorker waits for the VM to be ready, launches the worker through
// starter (guestFor: the plan's OS) and records its start time in the
// annotation.
func (h *HatcheryVSphere) launchWorker(ctx context.Context, starter guest.Starter, vm vctypes.Ref, name string, annot *inventory.Annotation, ga guest.Access, script string, cfg spawn.WorkerConfig) error {
	if _, err := starter.WaitReady(ctx, vm, name, annot.IPAddress, ga); err != nil {
		return err
	}
	spawntiming.Mark(ctx, spawntiming.StageGuestReady)
	if err := starter.Launch(ctx, vm, ga, script, cfg); err != nil {
		return guest.StepErr(stepLaunch, err)
	}
	spawntiming.Mark(ctx, spawntiming.StageLaunch)
	started := h.now().UTC()
	annot.WorkerStarted = &started
	h.log.Info("worker launched", logkey.VM, name, logkey.Job, annot.JobID, logkey.Model, annot.ModelName(), logkey.IP, annot.IPAddress)
	if err := h.writeAnnotation(ctx, vm, annot); err != nil {
		// The worker runs: the VM is not abandoned. Cleanup reads the
		// start from memory (this run), the worker list, else the
		// creation time.
		h.recordUnrecordedStart(name, started)
		h.log.Warn("record worker start failed", logkey.VM, name, logkey.Job, annot.JobID, logkey.Err, err)
	}
	return nil
}

// abandonVM is the failure path for a VM this spawn created or claimed:
// power off (on a context detached from a cancelled spawn, bounded), mark
// for deletion, release the IP reservation made for it under name (the
// VM, powered off, keeps the address in its annotation until destroyed).
func (h *HatcheryVSphere) abandonVM(ctx context.Context, vm vctypes.Ref, name, ip string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), guest.Readiness.Cleanup)
	defer cancel()
	if err := h.vs.ShutdownVirtualMachine(cctx, vm); err != nil {
		h.log.Warn("power off failed vm", logkey.VM, name, logkey.Err, err)
	}
	h.markToDelete(name)
	h.inv.Invalidate()
	if ip != "" {
		h.ips.Release(ip, name)
	}
	h.log.Info("vm marked for deletion", logkey.VM, name, logkey.IP, ip, logkey.Detail, "spawn failed")
}
