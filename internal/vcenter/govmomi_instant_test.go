package vcenter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/cloudinit"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// instantSpec is a child's request in the hatchery's folder (the parent's
// pool), with the cloud-init guestinfo of a static ip.
func instantSpec(t *testing.T, ctx context.Context, c *vcenter.Client, name, ip string) vctypes.InstantClone {
	t.Helper()
	folder, err := c.LoadFolder(ctx)
	require.NoError(t, err)
	opts, err := cloudinit.Options(name+"-instance", name, &cloudinit.Address{IP: ip, SubnetMask: "255.255.255.0"}, cloudinit.Boot{Script: "true", CDSConfig: name})
	require.NoError(t, err)
	return vctypes.InstantClone{Name: name, Folder: folder, Options: opts}
}

// TestInstantCloneVirtualMachine: the child of a running parent is
// returned powered on, named as asked; its guest becomes ready with the
// address of its own guestinfo, which the client's waits see.
func TestInstantCloneVirtualMachine(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testCtx(t)
	c := env.Client
	parent := cloneWorker(t, ctx, env, "parent", "10.0.0.10")
	require.NoError(t, c.StartVirtualMachine(ctx, vim.RefOf(parent)))

	child, err := c.InstantCloneVirtualMachine(ctx, vim.RefOf(parent), instantSpec(t, ctx, c, "child", "10.0.0.11"))
	require.NoError(t, err)
	require.False(t, child.IsZero())
	st := env.MustInspect("child")
	assert.Equal(t, vim.RefOf(st.Ref), child)
	assert.Equal(t, types.VirtualMachinePowerStatePoweredOn, st.PowerState, "created running: no power-on")
	require.NoError(t, c.WaitForGuestOperationsReady(ctx, child))
	ip, err := c.WaitForVirtualMachineIP(ctx, child, "10.0.0.11")
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.11", ip)
	assert.Equal(t, "10.0.0.10", env.MustInspect("parent").IPAddress, "the parent keeps its address")
}

// TestInstantCloneVirtualMachineFaults: a powered-off parent fails with
// an error naming the child and the parent, classified
// vctypes.FaultInvalidPowerState; a taken name with FaultDuplicateName.
func TestInstantCloneVirtualMachineFaults(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testCtx(t)
	c := env.Client
	parent := cloneWorker(t, ctx, env, "parent", "10.0.0.10")

	_, err := c.InstantCloneVirtualMachine(ctx, vim.RefOf(parent), instantSpec(t, ctx, c, "child", "10.0.0.11"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `instant clone "child" from parent "parent"`)
	assert.True(t, errors.Is(vcenter.Classify(err), vctypes.FaultInvalidPowerState), "got %v", err)
	_, exists := env.Inspect("child")
	assert.False(t, exists)

	require.NoError(t, c.StartVirtualMachine(ctx, vim.RefOf(parent)))
	_, err = c.InstantCloneVirtualMachine(ctx, vim.RefOf(parent), instantSpec(t, ctx, c, "child", "10.0.0.11"))
	require.NoError(t, err)
	_, err = c.InstantCloneVirtualMachine(ctx, vim.RefOf(parent), instantSpec(t, ctx, c, "child", "10.0.0.12"))
	assert.True(t, errors.Is(vcenter.Classify(err), vctypes.FaultDuplicateName), "got %v", err)
}

// TestInstantCloneVirtualMachineWaitsForATaskSlot: the instant clone takes
// one of the client's task slots (MaxConcurrentTasks, 1 in tests) before
// it starts its task: while another task holds the only slot it starts
// nothing and gives up when its context ends; once the slot is free it
// runs.
func TestInstantCloneVirtualMachineWaitsForATaskSlot(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testCtx(t)
	c := env.Client
	parent := cloneWorker(t, ctx, env, "parent", "10.0.0.10")
	require.NoError(t, c.StartVirtualMachine(ctx, vim.RefOf(parent)))
	spec := instantSpec(t, ctx, c, "child", "10.0.0.11")

	holding, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := c.RunTask(ctx, time.Minute, func(context.Context) (*object.Task, error) {
			close(holding)
			<-release
			return nil, errors.New("slot holder starts no task")
		})
		done <- err
	}()
	<-holding
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err := c.InstantCloneVirtualMachine(short, vim.RefOf(parent), spec)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "task slot")
	_, exists := env.Inspect("child")
	assert.False(t, exists, "no task started without a slot")

	close(release)
	require.Error(t, <-done)
	child, err := c.InstantCloneVirtualMachine(ctx, vim.RefOf(parent), spec)
	require.NoError(t, err)
	assert.Equal(t, vim.RefOf(env.MustInspect("child").Ref), child)
}
