// Package inventorytest provides an in-memory inventory.Inventory for the
// tests of the packages that read the VM inventory (decision tests that
// need no simulator). Only tests import it.
package inventorytest

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
)

// Fixed is an inventory.Inventory serving a settable list of VMs (or a
// settable error). The zero value is an empty inventory. It is safe for
// concurrent use; every read returns a copy of the list.
type Fixed struct {
	mu          sync.Mutex
	vms         []inventory.VM
	err         error
	invalidated atomic.Int64
}

// New returns an inventory serving vms.
func New(vms ...inventory.VM) *Fixed {
	return &Fixed{vms: slices.Clone(vms)}
}

// VMs returns a copy of the list and the error set with SetErr.
func (f *Fixed) VMs(context.Context) ([]inventory.VM, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	return slices.Clone(f.vms), nil
}

// Invalidate counts the call (Invalidations); the list does not change.
func (f *Fixed) Invalidate(...types.ManagedObjectReference) { f.invalidated.Add(1) }

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
