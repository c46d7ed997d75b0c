package warmpool

import (
	"context"
	"errors"
	"fmt"
	"github.com/vmware/govmomi/task"
	"github.com/vmware/govmomi/vim25/types"
	"testing"
	"time"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/internal/modelref"
	"github.com/cds-contrib/hatchery-vsphere/internal/spawnfault"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// The pool's writes on its VMs go through the custody it holds
// (internal/custody), built here without any hatchery: fakeHost fails the
// test on any call, and the strict port accepts only the expected ones.

// TestSurplusDeletedThroughCustody: a pool above its number takes its
// oldest idle VM with the claim's compare-and-swap (at the changeVersion
// listed), then destroys it through the custody (a powered-off VM: one
// destroy), which leaves it Destroyed in the table; the younger one is not
// touched (the strict mock fails on any other call).
func TestSurplusDeletedThroughCustody(t *testing.T) {
	t.Parallel()
	old := poolVM("warmpool-v2-old", "debian12", "small", 2*time.Hour)
	young := poolVM("warmpool-v2-young", "debian12", "small", time.Hour)
	e := newPoolEnv(t, []inventory.VM{old, young}, false)
	gomock.InOrder(
		e.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), refIs("warmpool-v2-old"), casAt("cv-warmpool-v2-old")).Return(nil),
		e.vs.EXPECT().DestroyVirtualMachine(gomock.Any(), refIs("warmpool-v2-old")).Return(nil),
	)
	k := Key{Model: "debian12", Flavor: "small"}
	e.p.RemoveSurplus(context.Background(), []inventory.VM{old, young}, map[Key]int{k: 2}, map[Key]int{k: 1})

	d, ok := e.p.Life.Get("warmpool-v2-old")
	require.True(t, ok)
	assert.Equal(t, lifecycle.Destroyed, d.Phase)
	_, ok = e.p.Life.Get("warmpool-v2-young")
	assert.False(t, ok, "the younger vm stays idle, untracked")
	assert.Positive(t, e.inv.Invalidations())
}

// TestProvisioningAccountsAttemptsInCustody: each clone failing on the
// template marks its slot for deletion and counts in the custody's
// quarantine book; at the threshold (3 here) the template is quarantined
// and the next provisioning is deferred without a clone.
func TestProvisioningAccountsAttemptsInCustody(t *testing.T) {
	t.Parallel()
	e := newPoolEnv(t, nil, false)
	clones := 0
	e.p.Clone = func(_ context.Context, tpl modelref.Template, name string, _ *inventory.Annotation, _ *config.Flavor) (vctypes.Ref, error) {
		clones++
		return vctypes.Ref{}, spawnfault.MarkTemplate(fmt.Errorf("clone %q from %q: %w", name, tpl.Name, errors.New("disk unreadable")))
	}
	k := Key{Model: "debian12"}
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("warmpool-v2-debian12-%d", i)
		e.p.ProvisionOne(context.Background(), Task{Key: k, Name: name, Template: modelref.OfEntry("", "debian12")})
		d, ok := e.p.Life.Get(name)
		require.True(t, ok, name)
		assert.Equal(t, lifecycle.Marked, d.Phase, "%s marked through the custody", name)
	}
	q := e.p.Custody.Quarantine.Quarantined()
	require.Len(t, q, 1)
	assert.Equal(t, k.QuarantineKey(), q[0].Key)

	e.p.ProvisionOne(context.Background(), Task{Key: k, Name: "warmpool-v2-debian12-4", Template: modelref.OfEntry("", "debian12")})
	assert.Equal(t, 3, clones, "a quarantined template is not cloned")
	_, ok := e.p.Life.Get("warmpool-v2-debian12-4")
	assert.False(t, ok, "a deferred provisioning leaves no entry")
}

// TestSurplusLeavesAVMAnotherInstanceClaimed: the listing the surplus was
// counted on still shows a VM idle that another instance of this hatchery
// has claimed since (renamed, powered on, its worker started). The
// removal's compare-and-swap at the listed changeVersion is refused with
// ConcurrentAccess: nothing else is done to the VM (no power off, no
// destroy: the strict mock fails on one), the mark is dropped (a mark would
// have the next cleanup pass power the worker off), and the removal is
// not counted: the listing is stale, so the younger VM is not taken in its
// place this pass (the strict mock fails on its compare-and-swap). A VM
// gone since the listing is left the same way. Without
// the compare-and-swap, the removal powered off and destroyed the other
// instance's running worker.
func TestSurplusLeavesAVMAnotherInstanceClaimed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"claimed by another instance", concurrentAccessFault("warmpool-v2-old")},
		{"gone since the listing", vcenter.Classify(fmt.Errorf("reconfigure %q: %w", "warmpool-v2-old", task.Error{LocalizedMethodFault: &types.LocalizedMethodFault{
			Fault: &types.ManagedObjectNotFound{}, LocalizedMessage: "The object has already been deleted."}}))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			old := poolVM("warmpool-v2-old", "debian12", "small", 2*time.Hour)
			young := poolVM("warmpool-v2-young", "debian12", "small", time.Hour)
			e := newPoolEnv(t, []inventory.VM{old, young}, false)
			e.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), refIs("warmpool-v2-old"), casAt("cv-warmpool-v2-old")).Return(tc.err)
			k := Key{Model: "debian12", Flavor: "small"}
			e.p.RemoveSurplus(context.Background(), []inventory.VM{old, young}, map[Key]int{k: 2}, map[Key]int{k: 1})

			_, ok := e.p.Life.Get("warmpool-v2-old")
			assert.False(t, ok, "no mark left on the other instance's vm")
			assert.Positive(t, e.inv.Invalidations(), "the listing is known stale")
		})
	}
}
