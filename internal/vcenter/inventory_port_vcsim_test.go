package vcenter_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// TestInventorySourceSpeaksVocabulary drives InventorySource through the
// port's face (adapter_port.go): what it returns is the govmomi-level
// read converted once (vocabulary.go), and the change watch's values
// arrive in the project's types (a power state as a vctypes.PowerState).
func TestInventorySourceSpeaksVocabulary(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{ForeignVMs: 2})
	ctx := watchCtx(t)
	c := env.Client
	worker := vim.RefOf(cloneWorker(t, ctx, env, "worker-1", ""))

	listed, err := c.ListVirtualMachines(ctx)
	require.NoError(t, err)
	raw, err := c.ListVirtualMachineObjects(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, vim.VMInfosOf(raw), listed)
	var refs []vctypes.Ref
	found := false
	for _, v := range listed {
		refs = append(refs, v.Ref)
		if v.Ref == worker {
			found = true
			a := inventory.VMFromInfo(v).Annotation
			require.NotNil(t, a, "the record is read from the listing's notes")
			assert.Equal(t, "worker-1", a.WorkerName)
			mirror, ok := vctypes.OptionValue(v.Options, inventory.AnnotationMirrorKey)
			assert.True(t, ok, "the mirror is among the options")
			assert.Equal(t, a.Marshal(), mirror, "the record comes from its mirror when the notes lack it")
		}
	}
	require.True(t, found, "worker-1 listed")

	pool, err := c.LoadResourcePool(ctx)
	require.NoError(t, err)
	probed, rt, err := c.ProbeInventory(ctx, &pool)
	require.NoError(t, err)
	assert.ElementsMatch(t, refs, probed)
	require.NotNil(t, rt, "the pool's runtime with the probe")
	assert.Positive(t, rt.MemoryMaxBytes)
	_, rt, err = c.ProbeInventory(ctx, nil)
	require.NoError(t, err)
	assert.Nil(t, rt, "no pool, no runtime")

	got, err := c.RetrieveVirtualMachines(ctx, refs)
	require.NoError(t, err)
	assert.ElementsMatch(t, listed, got, "the same properties as the listing")

	require.NoError(t, c.ResetVirtualMachineWatch(ctx))
	require.NoError(t, c.WatchVirtualMachines(ctx, []vctypes.Ref{worker}))
	drainEnters(t, ctx, env, c, []types.ManagedObjectReference{vim.MORef(worker)})
	require.NoError(t, c.StartVirtualMachine(ctx, worker))
	var power any
	require.NoError(t, pollUntil(ctx, func() bool {
		ups, err := c.VirtualMachineChanges(ctx)
		require.NoError(t, err)
		for _, u := range ups {
			if u.Ref != worker || u.Kind != vctypes.UpdateModify {
				continue
			}
			for _, ch := range u.Changes {
				if ch.Name == "runtime.powerState" {
					power = ch.Value
				}
			}
		}
		return power != nil
	}))
	assert.Equal(t, vctypes.PoweredOn, power)
	require.NoError(t, c.UnwatchVirtualMachines(ctx, []vctypes.Ref{worker}))
}
