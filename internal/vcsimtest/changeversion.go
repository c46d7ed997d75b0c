package vcsimtest

import (
	"strconv"
	"sync/atomic"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// changeVersions makes the simulator enforce config.changeVersion the way
// vCenter documents it for ReconfigVM_Task, which vcsim v0.56.0 does not: a
// spec whose ChangeVersion is set and differs from the VM's current
// config.changeVersion fails with a ConcurrentAccess fault,
// and every reconfigure that is let through moves the version on at once,
// in the same locked step as the comparison, so that of two reconfigures
// carrying the same version exactly one passes. (The simulator moves the
// version again when the task applies the spec.) A spec without a
// ChangeVersion is never checked, as on vCenter.
type changeVersions struct {
	next atomic.Int64
}

// handle is a method hook (installHooks): it answers a stale reconfigure
// with ConcurrentAccess and lets every other call through (nil, nil).
func (cv *changeVersions) handle(ctx *simulator.Context, method *simulator.Method) (mo.Reference, types.BaseMethodFault) {
	if method.Name != "ReconfigVM_Task" {
		return nil, nil
	}
	req, ok := method.Body.(*types.ReconfigVM_Task)
	if !ok || req.Spec.ChangeVersion == "" {
		return nil, nil
	}
	vm, ok := ctx.Map.Get(method.This).(*simulator.VirtualMachine)
	if !ok {
		return nil, nil
	}
	stale := false
	ctx.WithLock(vm, func() {
		if vm.Config == nil || vm.Config.ChangeVersion != req.Spec.ChangeVersion {
			stale = true
			return
		}
		ctx.Update(vm, []types.PropertyChange{{
			Name: "config.changeVersion",
			Val:  "vcsimtest-" + strconv.FormatInt(cv.next.Add(1), 10),
			Op:   types.PropertyChangeOpAssign,
		}})
	})
	if stale {
		// vCenter fails the task; the simulator's session lookup would
		// replace a handler object returned here, so the fault is the
		// call's. The adapter's error carries it either way, and the
		// hatchery classifies it with fault.Is.
		return nil, &types.ConcurrentAccess{}
	}
	return nil, nil
}
