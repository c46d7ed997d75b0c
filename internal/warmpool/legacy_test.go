package warmpool

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// No pool slot name, V1 or V2, with or without a flavor, starts the way
// the upstream CDS vSphere hatchery's pool VMs do ("provision-v2", which
// it claims by, or "provision-", which its cleanup and worker count skip):
// docs/coexistence.md. Fails with the earlier prefixes.
func TestSlotNamesAreNotUpstreams(t *testing.T) {
	t.Parallel()
	for _, k := range []Key{
		{Model: "debian12"}, {Model: "debian12", Flavor: "large"},
		{V1: true, Model: "shared.infra/debian12"}, {V1: true, Model: "g/m", Flavor: "small"},
		{Model: "provision-v2-x"}, // a template named like upstream's VMs
	} {
		for slot := range 3 {
			n := k.SlotName(slot)
			assert.False(t, strings.HasPrefix(n, "provision-"), n)
			assert.True(t, HasPoolName(inventory.VM{Name: n}), n)
		}
	}
}

// legacyVM is vm renamed as an earlier version named its pool VMs.
func legacyVM(name string, change ...func(*inventory.VM)) inventory.VM {
	return poolVM(name, "debian12", "", 3*time.Hour, change...)
}

// Pool VMs of an earlier version (provision-v1-/provision-v2- names, this
// hatchery's record) are pool VMs still — claimable, never counted toward
// their pool (so it is refilled under the new names) — and the idle ones
// are removed even when their pool is not above its number. A VM of that
// name whose record names another hatchery, or one not idle (half-made,
// powered on), is not removed (the strict port fails on any other call).
// Without the change the old V2 VM counted in its pool and nothing was
// removed.
func TestLegacyPoolVMsLeaveThePool(t *testing.T) {
	t.Parallel()
	oldV2 := legacyVM("provision-v2-8k2m4x")
	oldV1 := legacyVM("provision-v1-debian12-abc123-0", func(v *inventory.VM) {
		v.Annotation.VMwareModelPath, v.Annotation.WorkerModelPath = "", "shared.infra/debian12"
	})
	upstream := legacyVM("provision-v2-up", func(v *inventory.VM) { v.Annotation.HatcheryName = "upstream-vsphere" })
	halfMade := legacyVM("provision-v2-half", func(v *inventory.VM) { v.PowerState = vctypes.PoweredOn })
	fresh := poolVM(Key{Model: "debian12"}.SlotName(0), "debian12", "", time.Minute)
	vms := []inventory.VM{oldV2, oldV1, upstream, halfMade, fresh}
	e := newPoolEnv(t, vms, false)

	k := Key{Model: "debian12"}
	for _, v := range []inventory.VM{oldV2, oldV1, halfMade, fresh} {
		_, ok := keyOf(testHatchery, v)
		assert.True(t, ok, "%s is a pool vm of ours", v.Name)
	}
	_, ok := keyOf(testHatchery, upstream)
	assert.False(t, ok, "another hatchery's")
	counts := e.p.Counts(vms)
	assert.Equal(t, map[Key]int{k: 1}, counts, "only the vm under the new name counts")
	assert.Equal(t, []inventory.VM{oldV2, fresh}, e.p.claimCandidates(vms, k, "", false), "an old idle vm may still be claimed, the oldest first")

	for _, n := range []string{"provision-v2-8k2m4x", "provision-v1-debian12-abc123-0"} {
		gomock.InOrder(
			e.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), refIs(n), casAt("cv-"+n)).Return(nil),
			e.vs.EXPECT().DestroyVirtualMachine(gomock.Any(), refIs(n)).Return(nil),
		)
	}
	e.p.RemoveSurplus(context.Background(), vms, counts, map[Key]int{k: 1, {V1: true, Model: "shared.infra/debian12"}: 1})
	for _, n := range []string{"provision-v2-8k2m4x", "provision-v1-debian12-abc123-0"} {
		d, ok := e.p.Life.Get(n)
		require.True(t, ok, n)
		assert.Equal(t, lifecycle.Destroyed, d.Phase, n)
	}
	for _, n := range []string{"provision-v2-up", "provision-v2-half", fresh.Name} {
		_, ok := e.p.Life.Get(n)
		assert.False(t, ok, "%s untouched", n)
	}
}
