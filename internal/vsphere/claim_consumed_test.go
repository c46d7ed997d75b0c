package vsphere

import (
	"context"
	"testing"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/internal/warmpool"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"
)

// A shared inventory lags behind the hatchery's own writes: after a claimed
// VM became a worker, a stale snapshot can still show it as an idle
// provisioned VM. It must never be claimed twice, nor counted in its pool,
// nor removed as surplus, until the inventory shows what it became.
func TestClaimedVMIsNeverOfferedAgainFromAStaleSnapshot(t *testing.T) {
	t.Parallel()
	idle := warmProvVM("provision-v2-a", "debian12", "")
	e := newWarmEnv(t, warmConfig(), []inventory.VM{idle}, nil)
	ctx := context.Background()

	got, err := e.h.pool.Claim(ctx, v2Model("debian12"), nil, true)
	require.NoError(t, err)
	require.NotNil(t, got)
	// The spawn ended; the snapshot is still stale.

	again, err := e.h.pool.Claim(ctx, v2Model("debian12"), nil, true)
	require.NoError(t, err)
	require.Nil(t, again, "the stale entry of a claimed VM is not claimable")
	require.False(t, e.h.pool.IdleProvisioned(idle), "nor idle for the surplus removal")
	require.Zero(t, e.h.pool.Counts([]inventory.VM{idle})[warmpool.Key{Model: "debian12"}], "nor counted in its pool")

	// The inventory catches up: the VM is a worker now. The mark is dropped,
	// and a new provisioned VM with a new reference is claimable.
	worker := warmVM("worker-1")
	worker.Ref = idle.Ref
	fresh := warmProvVM("provision-v2-b", "debian12", "")
	e.inv.mu.Lock()
	e.inv.vms = []inventory.VM{worker, fresh}
	e.inv.mu.Unlock()
	next, err := e.h.pool.Claim(ctx, v2Model("debian12"), nil, true)
	require.NoError(t, err)
	require.NotNil(t, next)
	require.Equal(t, "provision-v2-b", next.Name)
	require.False(t, e.h.life.RefIn(idle.Ref.Value, lifecycle.Claimed), "the mark of a VM shown as a worker is forgotten")
	require.Equal(t, types.VirtualMachinePowerStatePoweredOff, next.PowerState)
}
