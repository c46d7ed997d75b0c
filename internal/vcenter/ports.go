package vcenter

import (
	"context"
	"fmt"

	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// Ports adapts a Port to the decision packages' ports, which speak the
// project's vocabulary (internal/vctypes) and import no govmomi package:
// guest.Port, ippool.Locker, vctypes.PoolReader (admission, collector). Each
// method converts its arguments (vocabulary.go), calls the Port and
// returns its error classified (Classify), so that a decision tests a
// fault with errors.Is(err, vctypes.FaultX). It holds nothing but the
// Port: tests that drive decisions through mock_vsphere.MockPort keep
// doing so through it.
type Ports struct {
	Port Port
}

// PortsOf adapts p.
func PortsOf(p Port) Ports { return Ports{Port: p} }

// WaitForGuestOperationsReady blocks until the guest of vm runs programs
// or ctx ends.
func (p Ports) WaitForGuestOperationsReady(ctx context.Context, vm vctypes.Ref) error {
	return Classify(p.Port.WaitForGuestOperationsReady(ctx, MORef(vm)))
}

// StartProgramInGuest starts prog in the guest of vm with auth and
// returns its pid.
func (p Ports) StartProgramInGuest(ctx context.Context, vm vctypes.Ref, auth *vctypes.GuestAuth, prog vctypes.GuestProgram) (int64, error) {
	pid, err := p.Port.StartProgramInGuest(ctx, MORef(vm), GuestAuthOf(auth), GuestProgramSpec(prog))
	return pid, Classify(err)
}

// WaitForVirtualMachineIP blocks until the guest of vm reports an IPv4
// address (expectedIP when not empty) or ctx ends, and returns it.
func (p Ports) WaitForVirtualMachineIP(ctx context.Context, vm vctypes.Ref, expectedIP string) (string, error) {
	ip, err := p.Port.WaitForVirtualMachineIP(ctx, MORef(vm), expectedIP)
	return ip, Classify(err)
}

// CreateLock creates the lock object name; vctypes.ErrLockTaken (wrapped)
// when it exists.
func (p Ports) CreateLock(ctx context.Context, name string) (vctypes.Ref, error) {
	ref, err := p.Port.CreateLock(ctx, name)
	return RefOf(ref), Classify(err)
}

// ListLocks returns the lock objects whose name starts with prefix, by name.
func (p Ports) ListLocks(ctx context.Context, prefix string) (map[string]vctypes.Ref, error) {
	locks, err := p.Port.ListLocks(ctx, prefix)
	if err != nil {
		return nil, Classify(err)
	}
	out := make(map[string]vctypes.Ref, len(locks))
	for name, ref := range locks {
		out[name] = RefOf(ref)
	}
	return out, nil
}

// DeleteLock deletes the lock object lock; already gone is success.
func (p Ports) DeleteLock(ctx context.Context, lock vctypes.Ref) error {
	return Classify(p.Port.DeleteLock(ctx, MORef(lock)))
}

// LoadResourcePool returns the pool new VMs go to.
func (p Ports) LoadResourcePool(ctx context.Context) (vctypes.Ref, error) {
	ref, err := p.Port.LoadResourcePool(ctx)
	return RefOf(ref), Classify(err)
}

// ResourcePoolRuntime reads the figures of pool's runtime.
func (p Ports) ResourcePoolRuntime(ctx context.Context, pool vctypes.Ref) (*vctypes.PoolRuntime, error) {
	rt, err := p.Port.ResourcePoolRuntime(ctx, MORef(pool))
	return PoolRuntimeOf(rt), Classify(err)
}

// PoolRuntimeAt reads the runtime of the resource pool at path (a pool's
// or a cluster's path; "" the configured pool): a placement's pool
// (admission.PlacementPort).
func (p Ports) PoolRuntimeAt(ctx context.Context, path string) (*vctypes.PoolRuntime, error) {
	pool, err := p.Port.ResourcePoolAt(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("resource pool %q: %w", path, Classify(err))
	}
	rt, err := p.Port.ResourcePoolRuntime(ctx, pool)
	if err != nil {
		return nil, fmt.Errorf("resource pool %q runtime: %w", path, Classify(err))
	}
	return PoolRuntimeOf(rt), nil
}

// DatastoreSpaceOf reads the space of the datastore named name
// (admission.PlacementPort).
func (p Ports) DatastoreSpaceOf(ctx context.Context, name string) (*vctypes.DatastoreSpace, error) {
	ds, err := p.Port.LoadDatastore(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("datastore %q: %w", name, Classify(err))
	}
	sum, err := p.Port.DatastoreSpace(ctx, ds)
	if err != nil {
		return nil, fmt.Errorf("datastore %q space: %w", name, Classify(err))
	}
	if sum == nil {
		return nil, fmt.Errorf("datastore %q space: empty summary", name)
	}
	return &vctypes.DatastoreSpace{Ref: RefOf(ds), Name: sum.Name, FreeBytes: sum.FreeSpace,
		CapacityBytes: sum.Capacity, Accessible: sum.Accessible}, nil
}
