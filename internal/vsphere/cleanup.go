package vsphere

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/custody"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/internal/warmpool"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// apiWorkers is what the CDS API knows of the workers, by name.
type apiWorkers struct {
	known    map[string]bool
	disabled map[string]bool
}

// loadAPIWorkers lists the V1 and V2 workers. Any failure (or no API
// client) is an error: the callers then decide nothing that depends on it.
func (h *HatcheryVSphere) loadAPIWorkers(ctx context.Context) (apiWorkers, error) {
	w := apiWorkers{known: map[string]bool{}, disabled: map[string]bool{}}
	if h.cds == nil {
		return w, fmt.Errorf("list workers: no cds api client")
	}
	// A hatchery signed in with one API version only has no session for the
	// other: that version contributes no worker, it is not an outage.
	v1, err1 := h.cds.WorkerList(ctx)
	if err1 != nil && !errors.Is(err1, cdsclient.ErrNoSession) {
		return w, fmt.Errorf("list v1 workers: %w", err1)
	}
	v2, err2 := h.cds.V2WorkerList(ctx)
	if err2 != nil && !errors.Is(err2, cdsclient.ErrNoSession) {
		return w, fmt.Errorf("list v2 workers: %w", err2)
	}
	if err1 != nil && err2 != nil {
		return w, fmt.Errorf("list workers: %w", err1)
	}
	add := func(name, status string) {
		w.known[name] = true
		if status == sdk.StatusDisabled {
			w.disabled[name] = true
		}
	}
	for _, x := range v1 {
		add(x.Name, x.Status)
	}
	for _, x := range v2 {
		add(x.Name, x.Status)
	}
	return w, nil
}

// defaultRegistrationTTL is the default workerRegistrationTTL
// (docs/design.md#timeouts).
const defaultRegistrationTTL = 10 * time.Minute

// registrationTTL is workerRegistrationTTL, or the default documented in
// docs/configuration.md when unset.
func (h *HatcheryVSphere) registrationTTL() time.Duration {
	if d := h.conf().WorkerRegistrationTTLDuration(); d > 0 {
		return d
	}
	return defaultRegistrationTTL
}

// awolVerdict is one cleanup decision: delete or not, and why.
type awolVerdict struct {
	del    bool
	reason string
	// release: the VM is reclaimed before its worker registered, its job
	// goes back to the queue at once (releaseReclaimedJob).
	release bool
	// marked: the VM was marked for deletion by the loop that owned it;
	// its deletion holds whatever its power state (deletionPower).
	marked bool
}

func awolKeep(reason string) awolVerdict   { return awolVerdict{reason: reason} }
func awolRemove(reason string) awolVerdict { return awolVerdict{del: true, reason: reason} }
func awolReclaim(reason string) awolVerdict {
	return awolVerdict{del: true, reason: reason, release: true}
}

// killAwolServers is one pass of the awol cleanup (docs/design.md#cleanup).
// It looks only at VMs owned by this hatchery that are not templates and
// decides from the annotation's timestamps (Created, WorkerStarted) and the
// power state; vSphere events are read only for a VM whose annotation has
// no timestamp at all. When the CDS API cannot be read, only the VMs
// marked for deletion are deleted this pass: nothing is guessed.
func (h *HatcheryVSphere) killAwolServers(ctx context.Context) {
	vms, err := h.inv.VMs(ctx)
	if err != nil {
		h.passFailed(ctx, "awol cleanup skipped: cannot list vms", err)
		return
	}
	if len(h.conf().WorkerProvisioning) == 0 {
		// The provisioning loop does not run without entries: the pools
		// of removed entries are emptied here.
		h.pool.RemoveSurplus(ctx, vms, h.pool.Counts(vms), nil)
	}
	h.dropAbsentDeleteMarks(vms)
	h.tendHolds(vms)
	if err := h.ips.Reconcile(ctx, h.indexOf(vms).Used); err != nil {
		h.passFailed(ctx, "ip locks not reconciled, retried next pass", err)
	}
	h.forgetOthersFinished(vms)
	workers, apiErr := h.loadAPIWorkers(ctx)
	if apiErr != nil {
		h.warnUnlessShuttingDown(ctx, "awol cleanup limited to vms marked for deletion", logkey.Err, apiErr)
	} else {
		h.scrubRegistered(ctx, workers)
	}
	for _, vm := range vms {
		if ctx.Err() != nil {
			return
		}
		if vm.Template || !vm.OwnedBy(h.Name()) {
			continue // never ours to decide
		}
		var v awolVerdict
		switch {
		case h.life.InVM(lifeVM(vm), lifecycle.ToDelete()...):
			v = awolRemove("marked for deletion")
			v.marked = true
		case apiErr != nil:
			continue
		default:
			v = h.awolVerdict(ctx, vm, workers)
		}
		log := h.log.With(logkey.VM, vm.Name, logkey.Model, vm.Annotation.ModelName(), logkey.Detail, v.reason)
		if !v.del {
			h.keepOthers(vm) // a grace counts passes that found it ready in a row
			log.Debug("awol cleanup keeps vm")
			continue
		}
		if wait, ok := h.leaveToSpawner(vm); ok {
			log.Debug("awol cleanup leaves vm to the instance that spawned it", "spawned_by", vm.Annotation.SpawnedBy, "for", wait.Round(time.Second))
			continue
		}
		power := deletionPower(vm, v)
		log.Info("awol cleanup deletes vm")
		switch err := h.deleteServer(ctx, vm, power); {
		case errors.Is(err, custody.ErrWithdrawn):
			// The listing showed the VM powered off; vCenter found it
			// running (a spawn powered it on since): the verdict is void.
			log.Info("awol cleanup withdrew its deletion: the vm runs", logkey.Err, err)
		case errors.Is(err, custody.ErrDeleteInProgress):
			h.log.Debug("vm already being deleted", logkey.VM, vm.Name, logkey.Err, err)
		case err != nil && vctypes.Unanswered(err) && ctx.Err() == nil:
			// vCenter down: the vCenter client logs the outage's start
			// and end, not a line per VM and pass (docs/operations.md#when-vcenter-restarts).
			h.log.Debug("vm not deleted, retried next pass", logkey.VM, vm.Name, logkey.Err, err)
		case err != nil:
			h.warnUnlessShuttingDown(ctx, "vm not deleted, retried next pass", logkey.VM, vm.Name, logkey.Err, err)
		default:
			h.custody.ForgetUserdata(vm.Name)
			if v.release {
				h.releaseReclaimedJob(ctx, vm, v.reason)
			}
		}
	}
}

// deletionPower is what the deletion of vm, decided by v on the listing
// that showed vm, may do to it if it runs. A VM marked for deletion (by the
// loop that owned it: a failed spawn, a disabled worker) goes whatever its
// power state. Any other verdict on a VM the listing showed powered off
// rests on that power state, and the listing may be older than a spawn's
// power-on (another instance's, or this one's before its snapshot caught
// up): such a deletion never powers the VM off (custody.OnlyPoweredOff),
// and a VM found running is judged again on the next listing
// (docs/high-availability.md, "Deletions decided on a listing").
func deletionPower(vm inventory.VM, v awolVerdict) custody.Power {
	if v.marked || vm.Power() != vctypes.PoweredOff {
		return custody.StopRunning
	}
	return custody.OnlyPoweredOff
}

// awolVerdict decides the fate of one VM of ours that is not marked for
// deletion, from its annotation, its power state and the API's workers.
func (h *HatcheryVSphere) awolVerdict(ctx context.Context, vm inventory.VM, workers apiWorkers) awolVerdict {
	a := vm.Annotation
	now := h.now()
	regTTL := h.registrationTTL()

	switch h.life.PhaseOf(lifeVM(vm)) {
	case lifecycle.Provisioning:
		return awolKeep("being provisioned")
	case lifecycle.Claimed, lifecycle.Preparing:
		return awolKeep("claimed, being prepared")
	case lifecycle.Deleting:
		return awolKeep("being deleted")
	case lifecycle.Destroyed:
		return awolKeep("destroyed, the inventory lags")
	}
	if v, ok := h.holdVerdict(vm); ok {
		// Before the job checks: a new spawn of the held VM's job may be
		// in flight, the hold is decided by its own deadline only.
		return v
	}
	switch {
	case a.JobID != "" && h.life.SpawnInFlight(a.JobID):
		// The spawn owns its VM until it returns; on failure it marks it.
		return awolKeep("spawn of its job in flight")
	}

	if a.InstantParent {
		// Never an orphan worker: the instant-parents loop's, kept while
		// a model uses it (instant_parents.go).
		return h.parentVerdict(vm)
	}
	if warmpool.HasPoolName(vm) && a.Provisioning {
		return provisionedVerdict(vm, now, regTTL)
	}
	if a.Model {
		return awolKeep("model template")
	}

	known := workers.known[vm.Name]
	started := a.WorkerStarted
	if t, ok := h.unrecordedStart(vm.Name); ok && started == nil {
		started = &t // launched by this run, the record failed
	}
	created := a.Created
	if created.IsZero() && started == nil {
		t, ok, err := h.firstEventTime(ctx, vm)
		switch {
		case err != nil:
			return awolKeep(fmt.Sprintf("no timestamp in annotation and events unreadable: %v", err))
		case !ok:
			return awolKeep("no timestamp in annotation nor events")
		}
		created = t
	}
	if started == nil && known {
		// The API knows the worker: it did start, the record lags.
		started = &created
	}
	if started == nil {
		if vm.Power() == vctypes.PoweredOff && !a.RegisterOnly && !a.Provisioning && created.Before(h.started) {
			// An earlier run's spawn that failed or was cut short by the
			// shutdown: it powered the VM off and marked it for deletion
			// in memory only. No spawn of this run owns it (nothing in
			// flight above), no worker will ever start in it, and it holds
			// its job ("already serves the job") and its IP until deleted.
			// Or another instance of this hatchery's spawn between its
			// clone and its power-on: the two look the same. Only the job
			// tells them apart: one that ran or ended proves the VM is
			// done with; one still waiting for a worker of ours does not,
			// and that VM is reclaimed after the registration TTL like
			// any worker that never started (docs/high-availability.md,
			// "Deletions decided on a listing").
			v := h.reclaimUnlessJobRan(ctx, vm, "left by an earlier run: powered off, its worker never started", created)
			if v.release && now.Sub(created) <= regTTL {
				return awolKeep("powered off, its worker never started, its job still waiting: kept within the registration ttl (another instance's spawn between its clone and its power-on looks the same)")
			}
			return v
		}
		if now.Sub(created) > regTTL {
			return h.reclaimUnlessJobRan(ctx, vm, fmt.Sprintf("worker never started, created %s ago", now.Sub(created).Round(time.Second)), created)
		}
		return awolKeep("worker starting")
	}

	age := now.Sub(*started)
	poweredOff := vm.Power() == vctypes.PoweredOff
	switch {
	case known && poweredOff && !a.RegisterOnly:
		// A worker VM is powered off only by its script's end (the
		// post-command) or by a failed spawn (marked, above): its job is
		// over, whatever the API's list still says of its worker.
		return awolRemove("worker finished: powered off, its worker still listed by the api")
	case known:
		if age > h.conf().WorkerTTLDuration() {
			return awolRemove(fmt.Sprintf("worker ttl expired, started %s ago", age.Round(time.Second)))
		}
		return awolKeep("worker known to the api, within ttl")
	case poweredOff && !a.RegisterOnly:
		if grace := h.conf().FinishedWorkerGracePeriodDuration(); age < grace {
			return awolKeep(fmt.Sprintf("worker finished, kept for finishedWorkerGracePeriod (%s) after its start %s ago", grace, age.Round(time.Second)))
		}
		return awolRemove("worker finished: unknown to the api and powered off")
	case age > regTTL:
		return h.reclaimUnlessJobRan(ctx, vm, fmt.Sprintf("worker never registered, started %s ago", age.Round(time.Second)), *started)
	case a.RegisterOnly && poweredOff:
		return awolKeep("registration vm powered off, waiting to become a template")
	}
	return awolKeep("worker starting, within registration ttl")
}

// provisionedVerdict is awolVerdict's for a provisioned (warm-pool) VM.
// Provisioned VMs belong to the provisioning loop, except one left
// half-made by a crash (never in its idle state long after creation, more
// than regTTL) and a hot pool VM that is not in the state its record says
// (suspended or running, found otherwise: broken).
func provisionedVerdict(vm inventory.VM, now time.Time, regTTL time.Duration) awolVerdict {
	a := vm.Annotation
	if vm.Power() == warmpool.IdlePowerState(a) {
		return awolKeep("provisioned, idle " + string(vm.PowerState))
	}
	if a.IdleState != "" {
		return awolRemove(fmt.Sprintf("broken hot pool vm: recorded %s, found %s", a.IdleState, vm.PowerState))
	}
	if !a.Created.IsZero() && now.Sub(a.Created) > regTTL {
		return awolRemove(fmt.Sprintf("half-provisioned: still %s %s after creation", vm.PowerState, now.Sub(a.Created).Round(time.Second)))
	}
	return awolKeep("provisioned, not yet powered off")
}

// reclaimUnlessJobRan is the verdict on a VM about to be reclaimed because
// its worker never started or never registered (reason), since the given
// time: the API's view of the VM's job decides (docs/design.md#cleanup).
// A worker can sign in, run its job and sign out between two reads of the
// worker list (a V2 worker leaves the list seconds after it ends), so its
// absence from the list proves nothing. Only these VMs cost a job read.
//
//   - job still waiting for a worker of ours: reclaimed, the job released;
//   - job taken by this VM's worker and Building, VM powered on, within
//     workerTTL: kept (the worker runs; the list was read before it
//     registered);
//   - job taken by this VM's worker otherwise: finished, deleted, not
//     released;
//   - job gone, held by no one or by another worker, or ended: deleted,
//     not released (it is not ours to release);
//   - job unreadable: kept (nothing is guessed), until workerTTL after
//     since, then deleted without a release.
func (h *HatcheryVSphere) reclaimUnlessJobRan(ctx context.Context, vm inventory.VM, reason string, since time.Time) awolVerdict {
	a := vm.Annotation
	if a.JobID == "" || a.RegisterOnly {
		return awolReclaim(reason)
	}
	rctx, cancel := context.WithTimeout(ctx, releaseTimeout)
	defer cancel()
	j, err := h.readJob(rctx, a.JobID)
	age := h.now().Sub(since)
	ttl := h.conf().WorkerTTLDuration()
	if err != nil {
		if age > ttl {
			return awolRemove(fmt.Sprintf("%s; job unreadable %s after, past the worker ttl: %v", reason, age.Round(time.Second), err))
		}
		return awolKeep(fmt.Sprintf("%s, but its job is unreadable: %v", reason, err))
	}
	switch {
	case j.gone:
		return awolRemove(reason + "; " + j.describe())
	case j.waiting():
		return awolReclaim(reason)
	case j.worker == vm.Name || (j.worker == "" && j.status == sdk.StatusBuilding):
		if j.status == sdk.StatusBuilding && vm.Power() != vctypes.PoweredOff && age <= ttl {
			return awolKeep("its worker runs its job (" + j.describe() + "), the api's worker list lags")
		}
		return awolRemove("worker finished: " + j.describe())
	}
	return awolRemove(reason + "; " + j.describe() + ", not ours to release")
}

// firstEventTime is the events fallback for a VM whose annotation carries
// no timestamp: the time of its oldest retained event.
func (h *HatcheryVSphere) firstEventTime(ctx context.Context, vm inventory.VM) (time.Time, bool, error) {
	events, err := h.vs.LoadVirtualMachineEvents(ctx, vm.ObjectRef())
	if err != nil {
		return time.Time{}, false, fmt.Errorf("load events of %q: %w", vm.Name, err)
	}
	for _, e := range events {
		if !e.Created.IsZero() {
			return e.Created, true, nil
		}
	}
	return time.Time{}, false, nil
}

// killDisabledWorkers is one pass of the disabled-worker cleanup
// (docs/design.md#cleanup): every VM of ours whose worker the API reports Disabled is marked
// for deletion; the awol cleanup destroys it. A VM this process is
// destroying or destroyed already is left alone.
func (h *HatcheryVSphere) killDisabledWorkers(ctx context.Context) {
	workers, err := h.loadAPIWorkers(ctx)
	if err != nil {
		h.warnUnlessShuttingDown(ctx, "disabled workers cleanup skipped", logkey.Err, err)
		return
	}
	if len(workers.disabled) == 0 {
		return
	}
	vms, err := h.inv.VMs(ctx)
	if err != nil {
		h.passFailed(ctx, "disabled workers cleanup skipped: cannot list vms", err)
		return
	}
	for _, vm := range vms {
		if vm.Template || !vm.OwnedBy(h.Name()) || !workers.disabled[vm.Name] {
			continue
		}
		if h.life.InVM(lifeVM(vm), lifecycle.Destroying()...) {
			// Already being destroyed or destroyed, the snapshot lags: the
			// API lists an ended V1 worker, Disabled, for minutes after its
			// VM went (docs/design.md#cleanup).
			continue
		}
		if h.markToDelete(vm.Name) {
			h.log.Info("vm marked for deletion", logkey.VM, vm.Name, logkey.Detail, "worker disabled on the api")
		}
	}
}

// passFailed logs a cleanup pass (or a step of one) that vCenter cut
// short. When vCenter did not answer (vctypes.Unanswered), the inventory's
// stale error after an outage included, the line is DEBUG: the vCenter
// client logs the outage's start and end, not a line per pass
// (docs/operations.md#when-vcenter-restarts), and a pass may run between
// vCenter's return and the inventory's first good refresh. Any other
// failure is a WARN (INFO during a shutdown).
func (h *HatcheryVSphere) passFailed(ctx context.Context, msg string, err error) {
	if vctypes.Unanswered(err) && ctx.Err() == nil {
		h.log.Debug(msg, logkey.Err, err)
		return
	}
	h.warnUnlessShuttingDown(ctx, msg, logkey.Err, err)
}

// warnUnlessShuttingDown logs msg at WARN, or at INFO once ctx has ended:
// a request or a spawn cut by the shutdown is not a fault.
// A vCenter wait cut short by shutdown is not a fault: the task goes on in
// vCenter, and the next start judges the VM from its annotation and the
// inventory. A healthy run that stops in the middle of a deletion thus logs
// no WARN.
func (h *HatcheryVSphere) warnUnlessShuttingDown(ctx context.Context, msg string, args ...any) {
	if ctx.Err() != nil {
		h.log.Info(msg+" (shutting down)", args...)
		return
	}
	h.log.Warn(msg, args...)
}
