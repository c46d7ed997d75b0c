// Package inventorytest provides an in-memory inventory.Inventory for the
// tests of the packages that read the VM inventory (decision tests that
// need no simulator). Only tests import it.
package inventorytest

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// Fixed is an inventory.Inventory serving a settable list of VMs (or a
// settable error). The zero value is an empty inventory. It is safe for
// concurrent use; every read returns a copy of the list.
type Fixed struct {
	mu          sync.Mutex
	vms         []inventory.VM
	err         error
	hook        func(context.Context) error
	invalidated atomic.Int64
}

// New returns an inventory serving vms.
func New(vms ...inventory.VM) *Fixed {
	return &Fixed{vms: slices.Clone(vms)}
}

// VMs returns a copy of the list and the error set with SetErr. The hook
// set with SetHook runs after the copy, outside the lock; its error, if
// any, is returned instead.
func (f *Fixed) VMs(ctx context.Context) ([]inventory.VM, error) {
	f.mu.Lock()
	vms, err, hook := slices.Clone(f.vms), f.err, f.hook
	f.mu.Unlock()
	if hook != nil {
		if herr := hook(ctx); herr != nil {
			return nil, herr
		}
	}
	if err != nil {
		return nil, err
	}
	return vms, nil
}

// SetHook makes every later VMs call run hook once the list is read (nil:
// no hook); tests use it to interleave an event with a read, or to learn
// of each read.
func (f *Fixed) SetHook(hook func(context.Context) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hook = hook
}

// Invalidate counts the call (Invalidations); the list does not change.
func (f *Fixed) Invalidate(...vctypes.Ref) { f.invalidated.Add(1) }

// Invalidations is how many times Invalidate was called.
func (f *Fixed) Invalidations() int64 { return f.invalidated.Load() }

// Set replaces the list.
func (f *Fixed) Set(vms ...inventory.VM) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.vms = slices.Clone(vms)
}

// Add appends to the list.
func (f *Fixed) Add(vms ...inventory.VM) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.vms = append(f.vms, vms...)
}

// SetErr makes every later VMs call fail with err (nil: serve the list
// again).
func (f *Fixed) SetErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}
