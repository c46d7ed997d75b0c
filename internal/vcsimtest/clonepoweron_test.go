package vcsimtest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// powerOnGate is a registry handler that holds the power-on of the first
// of two named VMs (inside the power-on, where the simulator holds that
// VM's lock, and holds the template's as well when it powers a clone on
// inside the clone task) until the second one powers on, or until bound.
type powerOnGate struct {
	names map[string]bool
	bound time.Duration
	both  chan struct{}

	mu   sync.Mutex
	seen []string
	// overlapped: the first power-on saw the second start while it was
	// still running.
	overlapped bool
}

func (g *powerOnGate) Reference() types.ManagedObjectReference {
	return types.ManagedObjectReference{Type: "VcsimtestPowerOnGate", Value: "gate"}
}

func (g *powerOnGate) PutObject(*simulator.Context, mo.Reference) {}

func (g *powerOnGate) RemoveObject(*simulator.Context, types.ManagedObjectReference) {}

func (g *powerOnGate) UpdateObject(ctx *simulator.Context, obj mo.Reference, changes []types.PropertyChange) {
	if obj.Reference().Type != "VirtualMachine" {
		return
	}
	on := false
	for _, ch := range changes {
		if s, ok := ch.Val.(types.VirtualMachinePowerState); ok && ch.Name == "runtime.powerState" && s == types.VirtualMachinePowerStatePoweredOn {
			on = true
		}
	}
	if !on {
		return
	}
	vm, ok := ctx.Map.Get(obj.Reference()).(*simulator.VirtualMachine)
	if !ok || !g.names[vm.Name] { // the power task holds vm's lock
		return
	}
	g.mu.Lock()
	g.seen = append(g.seen, vm.Name)
	n := len(g.seen)
	g.mu.Unlock()
	switch n {
	case 1:
		timer := time.NewTimer(g.bound)
		defer timer.Stop()
		select {
		case <-g.both:
			g.mu.Lock()
			g.overlapped = true
			g.mu.Unlock()
		case <-timer.C: // the second clone never powered on meanwhile
		}
	case 2:
		close(g.both)
	}
}

// TestClonePowerOnUnlockedOverlapsClonesOfOneTemplate: with
// Options.ClonePowerOnUnlocked (a simulator extension to vCenter's
// behaviour, see clonepoweron.go), two clones of one template that power
// their VMs on do so concurrently: the first power-on is held until the
// second one has happened, which it does. vcsim v0.56.0 alone powers the
// clone on inside the clone task, holding the template's lock, so the
// second clone cannot even copy until the first power-on ends: the gate
// then waits out its bound and the test fails (checked by setting the
// option to false).
func TestClonePowerOnUnlockedOverlapsClonesOfOneTemplate(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{ClonePowerOnUnlocked: true})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tpl, folder, pool := cloneFixture(ctx, t, env)
	gate := &powerOnGate{names: map[string]bool{"overlap-a": true, "overlap-b": true}, bound: 10 * time.Second, both: make(chan struct{})}
	env.Model.Map().AddHandler(gate)

	spec := types.VirtualMachineCloneSpec{Location: types.VirtualMachineRelocateSpec{Pool: &pool}, PowerOn: true}
	var tasks []*object.Task
	for _, name := range []string{"overlap-a", "overlap-b"} {
		task, err := tpl.Clone(ctx, folder, name, spec)
		require.NoError(t, err)
		tasks = append(tasks, task)
	}
	for _, task := range tasks {
		_, err := task.WaitForResult(ctx)
		require.NoError(t, err)
	}
	gate.mu.Lock()
	defer gate.mu.Unlock()
	assert.Len(t, gate.seen, 2, "both clones powered on")
	assert.True(t, gate.overlapped, "the second clone powered on while the first clone's power-on was still running")
	for _, name := range []string{"overlap-a", "overlap-b"} {
		assert.Equal(t, types.VirtualMachinePowerStatePoweredOn, env.MustInspect(name).PowerState, name)
	}
}

// TestClonePowerOnUnlockedKeepsTheCloneTask: the extension's clone task is
// the simulator's clone task as the client sees it: same name,
// description and entity (the template) as a clone the extension lets
// through (no power-on), the new VM's reference as its result, the VM
// powered on, and the clone's faults: a second clone of the same name
// fails with DuplicateName naming the first.
func TestClonePowerOnUnlockedKeepsTheCloneTask(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{ClonePowerOnUnlocked: true})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tpl, folder, pool := cloneFixture(ctx, t, env)

	plain, err := tpl.Clone(ctx, folder, "plain", types.VirtualMachineCloneSpec{Location: types.VirtualMachineRelocateSpec{Pool: &pool}})
	require.NoError(t, err)
	plainInfo, err := plain.WaitForResult(ctx)
	require.NoError(t, err)

	spec := types.VirtualMachineCloneSpec{Location: types.VirtualMachineRelocateSpec{Pool: &pool}, PowerOn: true}
	task, err := tpl.Clone(ctx, folder, "powered", spec)
	require.NoError(t, err)
	info, err := task.WaitForResult(ctx)
	require.NoError(t, err)
	st := env.MustInspect("powered")
	assert.Equal(t, st.Ref, info.Result, "the result is the new VM")
	assert.Equal(t, types.VirtualMachinePowerStatePoweredOn, st.PowerState)
	require.NotNil(t, info.Entity)
	assert.Equal(t, tpl.Reference(), *info.Entity, "the task's entity is the template")
	assert.Equal(t, plainInfo.Name, info.Name)
	assert.Equal(t, plainInfo.DescriptionId, info.DescriptionId)
	assert.Equal(t, plainInfo.EntityName, info.EntityName)
	assert.Equal(t, task.Reference().Value, info.Key)
	assert.NotNil(t, info.StartTime)
	assert.NotNil(t, info.CompleteTime)

	dup, err := tpl.Clone(ctx, folder, "powered", spec)
	require.NoError(t, err)
	_, err = dup.WaitForResult(ctx)
	require.Error(t, err)
	require.True(t, fault.Is(err, &types.DuplicateName{}), "a duplicate name fails with DuplicateName: %v", err)
	var dn *types.DuplicateName
	_, ok := fault.As(err, &dn)
	require.True(t, ok)
	assert.Equal(t, "powered", dn.Name)
	assert.Equal(t, st.Ref, dn.Object, "the fault names the VM already there")
}

// TestClonePowerOnUnlockedRefusedWithSerialTasks: SerialTasks gives its
// queue back when the clone task it saw put on the template ends; with the
// extension a clone puts two such tasks (the simulator's and the one the
// client waits on), so New refuses the two options together.
func TestClonePowerOnUnlockedRefusedWithSerialTasks(t *testing.T) {
	t.Parallel()
	env, err := vcsimtest.New(vcsimtest.Options{SerialTasks: true, ClonePowerOnUnlocked: true})
	if env != nil {
		env.Close()
	}
	require.Error(t, err)
	assert.Contains(t, err.Error(), "SerialTasks and ClonePowerOnUnlocked")
}
