package lifecycle

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClaimedVMKeepsItsPhaseWhenRenamed: a pool VM claimed and prepared
// under its worker name is one entry, keyed by its reference: a lagging
// snapshot that still shows it under its pool name finds it Running, never
// idle, and a second claim of it is refused. Keyed by name, the pool name
// would read Gone (claimable) once the entry moved to the worker name.
func TestClaimedVMKeepsItsPhaseWhenRenamed(t *testing.T) {
	now := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	tb := New(func() time.Time { return now })
	require.NoError(t, tb.Move("provision-a", Gone, Provisioning))
	require.NoError(t, tb.Move("provision-a", Provisioning, Idle, WithRef("vm-7"), WithDeadline(now.Add(time.Minute))))
	_, err := tb.MoveFrom("provision-a", Claimable(), Claimed, WithRef("vm-7"))
	require.NoError(t, err)
	require.NoError(t, tb.Move("worker-1", Claimed, Preparing, WithRef("vm-7"), WithJob("42")))
	require.NoError(t, tb.Move("worker-1", Preparing, Running))

	lagging := VM{Ref: "vm-7", Name: "provision-a"}
	fresh := VM{Ref: "vm-7", Name: "worker-1"}
	assert.Equal(t, Running, tb.PhaseOf(lagging), "the pool name of a lagging snapshot")
	assert.Equal(t, Running, tb.PhaseOf(fresh))
	assert.Equal(t, Running, tb.Phase("worker-1"))
	assert.False(t, tb.InVM(lagging, Claimable()...))
	assert.Equal(t, map[Phase]int{Running: 1}, tb.Counts(), "one entry per VM")
	e, ok := tb.GetVM(lagging)
	require.True(t, ok)
	assert.Equal(t, "worker-1", e.Name)
	assert.Equal(t, "42", e.Job)

	_, err = tb.MoveFrom("provision-a", Claimable(), Claimed, WithRef("vm-7"))
	require.ErrorIs(t, err, ErrWrongPhase, "claimed again through a lagging snapshot")

	// The inventory shows it under its worker name: the entry leaves, and
	// both names are free.
	require.NoError(t, tb.Drop("worker-1", Running, WithRef("vm-7")))
	assert.Equal(t, Gone, tb.PhaseOf(lagging))
	assert.Equal(t, Gone, tb.Phase("provision-a"))
	assert.Empty(t, tb.Snapshot())
}

// TestAnotherVMUnderADestroyedName: a VM destroyed by this run keeps its
// entry under its reference while a new VM takes its name (a V1 model's
// registration VM cloned again): the new clone is another entry, and each
// VM reads its own phase.
func TestAnotherVMUnderADestroyedName(t *testing.T) {
	tb := New(nil)
	require.NoError(t, tb.Move("mymodel-tmp", Gone, Deleting, WithRef("vm-1")))
	require.NoError(t, tb.Move("mymodel-tmp", Deleting, Destroyed))
	require.NoError(t, tb.Move("mymodel-tmp", Gone, Cloning), "the name is free for a new VM")
	assert.Equal(t, Destroyed, tb.PhaseOf(VM{Ref: "vm-1", Name: "mymodel-tmp"}))
	assert.Equal(t, Cloning, tb.Phase("mymodel-tmp"))
	require.NoError(t, tb.Move("mymodel-tmp", Cloning, Gone))
	require.NoError(t, tb.Move("mymodel-tmp", Gone, Running, WithRef("vm-2")))
	assert.Equal(t, Running, tb.PhaseOf(VM{Ref: "vm-2", Name: "mymodel-tmp"}))
	assert.Equal(t, Destroyed, tb.PhaseOf(VM{Ref: "vm-1", Name: "mymodel-tmp"}))
	// A deletion of the new VM is its own: the destroyed one is not
	// deleted again.
	require.NoError(t, tb.Move("mymodel-tmp", Running, Deleting, WithRef("vm-2")))
	assert.Equal(t, Destroyed, tb.PhaseOf(VM{Ref: "vm-1", Name: "mymodel-tmp"}))
	require.NoError(t, tb.Drop("mymodel-tmp", Destroyed, WithRef("vm-1")))
	assert.Equal(t, Deleting, tb.Phase("mymodel-tmp"))
}

// TestRenameOntoAnotherVMsName: a claimed VM never takes a name another
// VM's entry bears; the move is refused and changes nothing.
func TestRenameOntoAnotherVMsName(t *testing.T) {
	tb := New(nil)
	require.NoError(t, tb.Move("worker-x", Gone, Marked))
	require.NoError(t, tb.Move("provision-a", Gone, Claimed, WithRef("vm-7")))
	err := tb.Move("worker-x", Claimed, Preparing, WithRef("vm-7"))
	require.ErrorIs(t, err, ErrNameTaken)
	assert.Equal(t, Marked, tb.Phase("worker-x"))
	assert.Equal(t, Claimed, tb.PhaseOf(VM{Ref: "vm-7", Name: "provision-a"}))
}

// TestForgetTheNameNeverTaken: a preparation that failed before the rename
// marks the VM under its pool name and frees the worker name.
func TestForgetTheNameNeverTaken(t *testing.T) {
	tb := New(nil)
	require.NoError(t, tb.Move("provision-a", Gone, Claimed, WithRef("vm-7")))
	require.NoError(t, tb.Move("worker-1", Claimed, Preparing, WithRef("vm-7")))
	require.NoError(t, tb.Move("provision-a", Preparing, Marked, WithRef("vm-7"), Forget("worker-1")))
	assert.Equal(t, Marked, tb.Phase("provision-a"))
	assert.Equal(t, Gone, tb.Phase("worker-1"))
	e, _ := tb.Get("provision-a")
	assert.Equal(t, "provision-a", e.Name)
}

// TestLearnTheReference: an entry made before its VM existed (a clone, a
// provisioning) is found by name, and takes the reference the first move
// or Set that gives it; from then on the reference finds it.
func TestLearnTheReference(t *testing.T) {
	tb := New(nil)
	require.NoError(t, tb.Move("w", Gone, Running))
	assert.Equal(t, Running, tb.PhaseOf(VM{Ref: "vm-3", Name: "w"}), "no reference yet: by name")
	assert.True(t, tb.Set("w", Running, WithRef("vm-3")))
	assert.True(t, tb.RefIn("vm-3", Running))
	assert.Equal(t, Running, tb.PhaseOf(VM{Ref: "vm-3", Name: "renamed-by-someone"}))
	assert.Equal(t, Gone, tb.PhaseOf(VM{Ref: "vm-4", Name: "w"}), "another VM bearing the name")
}

// TestSlotNameOfAClaimedVMIsFreeForTheRefill: once a claimed pool VM
// moved under its worker name, its slot's name is free for the refill: a
// move naming no reference by that name starts a new entry (a provisioning)
// and leaves the claimed VM's entry as it was, still found by its
// reference and its worker name. Before, the move found the worker's entry
// by the name it bore and was refused (it is running), so a pool whose VM
// was claimed was never refilled while the worker lived.
func TestSlotNameOfAClaimedVMIsFreeForTheRefill(t *testing.T) {
	now := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	tb := New(func() time.Time { return now })
	require.NoError(t, tb.Move("provision-a", Gone, Provisioning))
	require.NoError(t, tb.Move("provision-a", Provisioning, Idle, WithRef("vm-7")))
	_, err := tb.MoveFrom("provision-a", Claimable(), Claimed, WithRef("vm-7"))
	require.NoError(t, err)
	require.NoError(t, tb.Move("worker-1", Claimed, Preparing, WithRef("vm-7")))
	require.NoError(t, tb.Move("worker-1", Preparing, Running))

	require.NoError(t, tb.Move("provision-a", Gone, Provisioning), "the refill takes the slot's name")
	assert.Equal(t, Provisioning, tb.Phase("provision-a"))
	assert.Equal(t, Running, tb.Phase("worker-1"))
	assert.Equal(t, Running, tb.PhaseOf(VM{Ref: "vm-7", Name: "provision-a"}), "the claimed VM is still found by its reference")
	assert.Equal(t, map[Phase]int{Running: 1, Provisioning: 1}, tb.Counts())
}
