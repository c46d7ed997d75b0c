package vcsimtest

import (
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// methodHook is one extension of the simulator's dispatch: it sees every
// SOAP call before the simulator runs it and may answer it with a fault,
// or with an object that handles the call in place of the registered one
// (nil, nil lets the call through unchanged). See installHooks.
type methodHook func(*simulator.Context, *simulator.Method) (mo.Reference, types.BaseMethodFault)

// installHooks makes hooks the registry's method hook (Registry.Handler,
// which the simulator has one of): they run in order, and the first that
// answers (a fault or a handler object) decides the call. Install them
// before the first call reaches the simulator.
func installHooks(m *simulator.Model, hooks ...methodHook) {
	m.Map().Handler = func(ctx *simulator.Context, method *simulator.Method) (mo.Reference, types.BaseMethodFault) {
		for _, h := range hooks {
			if h == nil {
				continue
			}
			if obj, fault := h(ctx, method); obj != nil || fault != nil {
				return obj, fault
			}
		}
		return nil, nil
	}
}
