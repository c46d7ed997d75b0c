package vcsimtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// TestVMsWaitsForACreateInProgress: the simulator registers a cloned VM in
// its folder, then writes the VM's fields holding the folder's lock (the
// create task's). The test holds the resource pool's lock, which that task
// takes after it has registered the VM (to add it to the pool), so the
// clone stops half made; Env.VMs must not return that VM before its task
// is done: it returns only once the pool is released, with the clone
// complete (its host set).
func TestVMsWaitsForACreateInProgress(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tpl, folder, poolRef := cloneFixture(ctx, t, env)

	reg := env.Model.Map()
	release := reg.AcquireLock(env.SimContext(), poolRef)
	released := false
	defer func() {
		if !released {
			release()
		}
	}()
	before := map[types.ManagedObjectReference]bool{}
	for _, o := range reg.All("VirtualMachine") {
		before[o.Reference()] = true
	}
	task, err := tpl.Clone(ctx, folder, "half-made", types.VirtualMachineCloneSpec{Location: types.VirtualMachineRelocateSpec{Pool: &poolRef}})
	require.NoError(t, err)
	registered := func() bool {
		for _, o := range reg.All("VirtualMachine") {
			if !before[o.Reference()] { // the reference only: no field of a VM being created
				return true
			}
		}
		return false
	}
	require.Eventually(t, registered, 30*time.Second, 5*time.Millisecond, "the clone registered, its task held at the pool's lock")

	got := make(chan []*simulator.VirtualMachine, 1)
	go func() { got <- env.VMs() }()
	select {
	case vms := <-got:
		t.Fatalf("VMs returned %d VMs while a clone was half made", len(vms))
	case <-time.After(300 * time.Millisecond): // nothing to signal "still waiting"
	}
	release()
	released = true
	var vms []*simulator.VirtualMachine
	select {
	case vms = <-got:
	case <-ctx.Done():
		t.Fatal("VMs never returned after the clone was let through")
	}
	require.NoError(t, task.Wait(ctx))
	st, ok := env.Inspect("half-made")
	require.True(t, ok, "the clone is listed")
	assert.Equal(t, "half-made", st.Name)
	found := false
	for _, vm := range vms {
		env.SimContext().WithLock(vm, func() {
			if vm.Name == "half-made" {
				found = true
				assert.NotNil(t, vm.Runtime.Host, "the clone's host is set: its create task was done")
			}
		})
	}
	assert.True(t, found, "VMs returned the clone")
}
