package warmpool

import (
	"testing"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestModelKeyIsThePoolOfItsVMs: the key of a model is the pool its
// provisioned VMs belong to (flavor aside), and its quarantine key is the
// one its spawns and its provisionings share.
func TestModelKeyIsThePoolOfItsVMs(t *testing.T) {
	t.Parallel()
	v2 := poolVM(Key{Model: "debian12"}.SlotName(0), "debian12", "large", 0)
	v1 := poolVM(Key{V1: true, Model: "grp/m1"}.SlotName(0), "", "", 0, func(v *inventory.VM) {
		v.Annotation.VMwareModelPath, v.Annotation.WorkerModelPath = "", "grp/m1"
	})
	for _, tc := range []struct {
		name, quarantine string
		key              Key
		vm               inventory.VM
	}{
		{name: "v2", key: ModelKey(v2Model("debian12")), vm: v2, quarantine: "template debian12"},
		{name: "v1", key: ModelKey(v1Model("grp", "m1")), vm: v1, quarantine: "model grp/m1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := keyOf(testHatchery, tc.vm)
			require.True(t, ok, "a provisioned vm of ours")
			assert.Equal(t, got.V1, tc.key.V1)
			assert.Equal(t, got.Model, tc.key.Model)
			assert.Empty(t, tc.key.Flavor, "a model's key names no flavor")
			assert.Equal(t, tc.quarantine, tc.key.QuarantineKey())
		})
	}
	assert.Empty(t, ModelKey(v2Model("")).Model, "a v2 model without spec.image names no pool")
}
