package warmpool

import (
	"context"
	"errors"
	"fmt"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/guest"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/spawnfault"
	"github.com/cds-contrib/hatchery-vsphere/internal/spawntiming"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// ErrHotCheck marks the failure of a claimed hot pool VM's check (guest
// ready, expected IP) after its resume: the VM is discarded and the spawn
// goes on to the next option (docs/configuration.md, "Warm pool").
var ErrHotCheck = errors.New("hot pool vm failed its check")

// MaxHotClaims bounds how many hot pool VMs one spawn discards before it
// takes the next option: every discarded VM is marked and never offered
// again, so the bound only keeps a pool of broken VMs from delaying a job
// for long.
const MaxHotClaims = 3

// PrepareHot turns a claimed hot pool VM (suspended or powered on, of
// the exact flavor) into the worker: power on (a suspended VM resumes),
// check it (guest operations ready, the IP its record holds, bounded by
// guest.Readiness.Resume), then rename to annot.WorkerName and write annot
// in one reconfigure. A hot VM is never resized nor given cloud-init
// userdata: it booted already. It refuses a VM that is not ours. On error the VM is powered
// off and marked for deletion, never reused; a failed check wraps
// ErrHotCheck.
func (p *Pool) PrepareHot(ctx context.Context, vm *inventory.VM, annot inventory.Annotation) (vctypes.Ref, error) {
	if err := p.beginPrepare(vm, &annot); err != nil {
		return vctypes.Ref{}, err
	}
	state := vm.Annotation.IdleState // beginPrepare checked that vm is ours: it has a record
	newName := annot.WorkerName
	if annot.Flavor == "" {
		annot.Flavor = vm.Annotation.Flavor
	}
	log := p.Log.With(logkey.VM, vm.Name, logkey.Model, annot.ModelName(), logkey.Job, annot.JobID)

	obj := vm.ObjectRef()
	current := vm.Name
	renameUnknown := false
	fail := func(step string, err error) (vctypes.Ref, error) {
		err = fmt.Errorf("prepare hot vm %q as %q: %s: %w", vm.Name, newName, step, err)
		log.Warn("claimed hot vm failed, marked for deletion", logkey.Err, err)
		p.abandonClaim(ctx, log, obj, current, newName, renameUnknown)
		return vctypes.Ref{}, err
	}

	spawntiming.Mark(ctx, spawntiming.StageBookToClone)
	// A suspended VM resumes; a powered-on one is on already (success).
	if err := p.Port.StartVirtualMachine(ctx, obj); err != nil {
		return fail("resume", fmt.Errorf("%w: %w", ErrHotCheck, err))
	}
	if err := p.checkHotVM(ctx, obj, vm.Annotation.IPAddress); err != nil {
		return fail("check after "+hotVerb(state), fmt.Errorf("%w: %w", ErrHotCheck, err))
	}
	spawntiming.Mark(ctx, spawntiming.StagePowerOn)

	// One task renames (the spec's Name) and writes the record.
	rec := annot.Record()
	if err := p.Port.ReconfigureVirtualMachine(ctx, obj, vctypes.ConfigChange{Name: newName, Record: &rec}); err != nil {
		// A fault vCenter answered applied nothing: the VM keeps its
		// pool name. Otherwise it may carry either name.
		renameUnknown = !spawnfault.IsVCenterFault(err)
		return fail(fmt.Sprintf("rename %q to %q and write annotation", vm.Name, newName), err)
	}
	current = newName
	spawntiming.Mark(ctx, spawntiming.StageClaim)
	p.Inventory.Invalidate()
	log.Info("claimed vm prepared", logkey.Flavor, annot.Flavor, logkey.Detail, fmt.Sprintf("%s, checked, renamed to %q", hotVerb(state), newName))
	return obj, nil
}

// checkHotVM checks a resumed (or running) pool VM before a worker starts
// in it: guest operations ready and the guest reporting expectedIP (any
// IPv4 address when the record holds none), each bounded by
// guest.Readiness.Resume.
func (p *Pool) checkHotVM(ctx context.Context, vm vctypes.Ref, expectedIP string) error {
	gctx, cancel := context.WithTimeout(ctx, guest.Readiness.Resume)
	err := p.Port.WaitForGuestOperationsReady(gctx, vm)
	cancel()
	if err != nil {
		return fmt.Errorf("wait for guest operations ready: %w", err)
	}
	if _, err := guest.WaitIP(ctx, p.Port, vm, expectedIP, guest.Readiness.Resume); err != nil {
		return fmt.Errorf("wait for ip %s: %w", expectedIP, err)
	}
	return nil
}

// hotVerb names what a claim does to a VM waiting in state.
func hotVerb(state string) string {
	if state == config.IdleStateSuspended {
		return "resumed"
	}
	return "running"
}
