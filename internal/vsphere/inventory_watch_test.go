package vsphere

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"
)

func TestApplyUpdateSet(t *testing.T) {
	ref := func(v string) types.ManagedObjectReference {
		return types.ManagedObjectReference{Type: "VirtualMachine", Value: v}
	}
	assign := func(name string, val any) types.PropertyChange {
		return types.PropertyChange{Name: name, Op: types.PropertyChangeOpAssign, Val: val}
	}
	set := func(us ...types.ObjectUpdate) *types.UpdateSet {
		return &types.UpdateSet{FilterSet: []types.PropertyFilterUpdate{{ObjectSet: us}}}
	}
	state := map[types.ManagedObjectReference]*watchedVM{}

	require.True(t, applyUpdateSet(state, set(
		types.ObjectUpdate{Obj: ref("vm-1"), Kind: types.ObjectUpdateKindEnter, ChangeSet: []types.PropertyChange{
			assign("name", "a"), assign("runtime.powerState", types.VirtualMachinePowerStatePoweredOff),
			assign("config.hardware.numCPU", int32(2)), assign("guest.ipAddress", "10.0.0.5"),
		}},
		types.ObjectUpdate{Obj: ref("vm-2"), Kind: types.ObjectUpdateKindEnter, ChangeSet: []types.PropertyChange{assign("name", "b")}},
	)))
	require.Len(t, state, 2)
	require.Equal(t, "a", state[ref("vm-1")].vm.Name)
	require.Equal(t, int32(2), state[ref("vm-1")].vm.NumCPU)
	require.Equal(t, []string{"10.0.0.5"}, state[ref("vm-1")].vm.IPAddresses)

	require.True(t, applyUpdateSet(state, set(
		types.ObjectUpdate{Obj: ref("vm-1"), Kind: types.ObjectUpdateKindModify, ChangeSet: []types.PropertyChange{
			assign("name", "a-renamed"), assign("runtime.powerState", types.VirtualMachinePowerStatePoweredOn),
			{Name: "guest.ipAddress", Op: types.PropertyChangeOpRemove},
		}},
		types.ObjectUpdate{Obj: ref("vm-2"), Kind: types.ObjectUpdateKindLeave},
	)))
	require.Len(t, state, 1)
	v := state[ref("vm-1")].vm
	require.Equal(t, "a-renamed", v.Name)
	require.True(t, v.PoweredOn())
	require.Equal(t, int32(2), v.NumCPU, "properties not in the change set are kept")
	require.Empty(t, v.IPAddresses)

	require.False(t, applyUpdateSet(state, set(
		types.ObjectUpdate{Obj: ref("vm-9"), Kind: types.ObjectUpdateKindModify, ChangeSet: []types.PropertyChange{assign("name", "x")}},
	)), "a change of a vm never entered puts the watch out of step")
}
