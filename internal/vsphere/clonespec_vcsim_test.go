package vsphere_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vsphere"
)

// TestVcsimSpawnV2Placement: a V2 job spawned through SpawnWorker
// gives a VM on the configured network (a distributed port group, not the
// template's "VM Network"), in the configured resource pool (a child pool,
// not the template's) and datastore, cloned as a linked clone, named after
// the worker, annotated in Notes (post-launch reconfigure) and in the
// ExtraConfig mirror, customized with the first free IP of the range, and
// the fake guest got the worker script and its config. Another hatchery's
// VM (holding the range's first IP) and a foreign VM are untouched.
//
// Not parallel: vcsim v0.56.0's CreateResourcePool writes the summary that
// every simulated resource pool shares (esx.ResourcePool): a data race with
// any other simulator reading its pools.
func TestVcsimSpawnV2Placement(t *testing.T) {
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := env.Context()
	const hatch = "hatch-vi-v2"

	// A child pool for workers and a distributed port group as network:
	// both differ from where the template lives.
	finder := viFinder(t, env)
	parent, err := finder.ResourcePool(ctx, env.ResourcePool)
	require.NoError(t, err)
	workersPool, err := parent.Create(ctx, "vi-workers", types.DefaultResourceConfigSpec())
	require.NoError(t, err)
	poolPath := env.ResourcePool + "/vi-workers"
	const network = "DC0_DVPG0"
	dvpg, err := finder.Network(ctx, network)
	require.NoError(t, err)
	ds, err := finder.Datastore(ctx, env.Datastore)
	require.NoError(t, err)

	strangers := viStrangers(t, env, "192.168.77.10")
	before := map[string]viSnapshot{}
	for _, n := range strangers {
		before[n] = viSnap(t, env, n)
	}

	client := &viRecordingClient{Port: env.NewClient(func(c *vcenter.Config) { c.ResourcePool = poolPath })}
	cfg := env.Config()
	cfg.CommonConfiguration.Name = hatch
	cfg.NetworkString = network
	cfg.ResourcePoolString = poolPath
	cfg.IPRange, cfg.Gateway, cfg.SubnetMask, cfg.DNS = "192.168.77.10/24", "192.168.77.1", "255.255.255.0", "192.168.77.2"
	h, err := vsphere.New(vsphere.Options{Config: cfg, Client: client})
	require.NoError(t, err)

	args := viV2Args(hatch, "vi-worker-v2", "run-v2", "")
	require.NoError(t, h.SpawnWorker(ctx, args))

	// The clone spec as sent: placement and linked clone (vcsim does not
	// keep the disk move type).
	rec := client.clone(t, "vi-worker-v2")
	require.NoError(t, rec.Err)
	tpl := env.MustInspect(vcsimtest.DefaultTemplate)
	assert.Equal(t, tpl.Ref, rec.Source, "cloned from the model's image")
	assert.Equal(t, vim.RefOf(workersPool.Reference()), rec.Req.Pool)
	assert.Equal(t, vim.RefOf(ds.Reference()), rec.Req.Datastore)
	assert.True(t, rec.Req.Snapshot.IsZero(), "full: the template has no snapshot")
	assert.True(t, rec.Req.PowerOn)
	require.NotNil(t, rec.Req.Customization)
	require.Len(t, rec.Req.Customization.NICs, 1)
	assert.Equal(t, "192.168.77.11", rec.Req.Customization.NICs[0].IP, "fixed ip customization; first free ip: .10 is held by another hatchery's vm")

	// What the simulator holds.
	st := env.MustInspect("vi-worker-v2")
	assert.False(t, st.Template)
	assert.Equal(t, types.VirtualMachinePowerStatePoweredOn, st.PowerState)
	assert.Equal(t, int32(2), st.NumCPU, "no flavor: the template's resources")
	assert.Equal(t, int32(4096), st.MemoryMB)
	notes, err := inventory.ParseAnnotation(st.Annotation)
	require.NoError(t, err, "Notes written by the post-launch reconfigure: %q", st.Annotation)
	mirror, err := inventory.ParseAnnotation(st.ExtraConfig[inventory.AnnotationMirrorKey])
	require.NoError(t, err, "ExtraConfig mirror")
	for _, a := range []*inventory.Annotation{notes, mirror} {
		assert.Equal(t, hatch, a.HatcheryName)
		assert.Equal(t, "vi-worker-v2", a.WorkerName)
		assert.Equal(t, "run-v2", a.JobID)
		assert.Equal(t, vcsimtest.DefaultTemplate, a.VMwareModelPath)
		assert.Equal(t, "192.168.77.11", a.IPAddress)
		assert.NotNil(t, a.WorkerStarted, "worker start recorded")
	}
	assert.Contains(t, st.GuestNetIPs, "192.168.77.11", "customization ip in guest.net")
	assert.Equal(t, "192.168.77.11", st.IPAddress)

	pl := viReadPlacement(t, env, st.Ref)
	assert.Equal(t, workersPool.Reference(), pl.Pool, "vm in the configured pool")
	assert.Equal(t, []types.ManagedObjectReference{ds.Reference()}, pl.Datastores, "vm on the configured datastore")
	nics := pl.Devices.SelectByType((*types.VirtualEthernetCard)(nil))
	require.Len(t, nics, 1)
	backing, ok := nics[0].(types.BaseVirtualEthernetCard).GetVirtualEthernetCard().Backing.(*types.VirtualEthernetCardDistributedVirtualPortBackingInfo)
	require.True(t, ok, "nic backed by the distributed port group, got %T", nics[0].(types.BaseVirtualEthernetCard).GetVirtualEthernetCard().Backing)
	assert.Equal(t, dvpg.Reference().Value, backing.Port.PortgroupKey)
	// The template itself is unchanged: only the clone moved.
	tplPl := viReadPlacement(t, env, tpl.Ref)
	tplNics := tplPl.Devices.SelectByType((*types.VirtualEthernetCard)(nil))
	require.Len(t, tplNics, 1)
	_, tplOnStd := tplNics[0].(types.BaseVirtualEthernetCard).GetVirtualEthernetCard().Backing.(*types.VirtualEthernetCardNetworkBackingInfo)
	assert.True(t, tplOnStd, "template still on the standard network")
	assert.NotEqual(t, workersPool.Reference(), tplPl.Pool)

	launch := viLaunch(t, env, "vi-worker-v2")
	assert.Equal(t, "-n ;./worker --name=vi-worker-v2", launch.Arguments)
	assert.Equal(t, vcsimtest.DefaultGuestUser, launch.User)
	assert.Equal(t, args.WorkerConfig, viDecodeConfig(t, launch))

	for _, n := range strangers {
		assert.Equal(t, before[n], viSnap(t, env, n), "vm %q untouched", n)
		assert.Empty(t, env.Guest.CallsFor(n), "no guest operation in %q", n)
	}
}
