package vcsimtest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
)

// Names of the inventory Options.Placements adds to the datacenter: two
// clusters of two hosts each and two datastores, each mounted on one
// cluster's hosts; DatastoreName (LocalDS_0) is mounted on every host.
const (
	ClusterA = "cluster-a"
	ClusterB = "cluster-b"
	// DatastoreA is mounted on ClusterA's hosts only.
	DatastoreA = "LocalDS_1"
	// DatastoreB is mounted on ClusterB's hosts only.
	DatastoreB = "LocalDS_2"
	// PlacementHosts is how many hosts each of ClusterA and ClusterB has.
	PlacementHosts = 2
)

// ClusterPath is the inventory path of the cluster named cluster in the
// datacenter ("/DC0/host/cluster-a").
func (e *Env) ClusterPath(cluster string) string {
	return "/" + e.Datacenter + "/host/" + cluster
}

// ClusterPoolPath is the inventory path of the root resource pool of the
// cluster named cluster ("/DC0/host/cluster-a/Resources").
func (e *Env) ClusterPoolPath(cluster string) string {
	return e.ClusterPath(cluster) + "/Resources"
}

// PlacementConfigs are two [[placements]] entries over Options.Placements'
// inventory: "a" by ClusterA's path on DatastoreA, "b" by ClusterB's root
// pool path on DatastoreB, both in the hatchery's folder (Folder) on the
// Network. Tests edit the copies they get.
func (e *Env) PlacementConfigs() []config.Placement {
	return []config.Placement{
		{Name: "a", ResourcePool: e.ClusterPath(ClusterA), Datastores: []string{DatastoreA}, Folder: e.Folder, Network: e.Network},
		{Name: "b", ResourcePool: e.ClusterPoolPath(ClusterB), Datastores: []string{DatastoreB}, Folder: e.Folder, Network: e.Network},
	}
}

// buildPlacements adds Options.Placements' inventory through the admin
// API, before any template exists: for each of ClusterA and ClusterB a
// cluster of PlacementHosts hosts, each host mounting DatastoreName and
// the cluster's own datastore (a directory of its own, removed at Close).
func (e *Env) buildPlacements(ctx context.Context) error {
	// vcsim v0.56.0 licenses each new host and cluster with its
	// package-level EvalLicense, which every model's creation rewrites:
	// adding them while another Env starts races (seen under -race in
	// TestPlacementsFailingCluster), so they are added under the lock the
	// Envs' creation holds.
	newServerMu.Lock()
	defer newServerMu.Unlock()
	c := e.Admin.Client
	finder := newFinder(c)
	dc, err := finder.Datacenter(ctx, e.Datacenter)
	if err != nil {
		return err
	}
	finder.SetDatacenter(dc)
	folders, err := dc.Folders(ctx)
	if err != nil {
		return err
	}
	shared, err := finder.Datastore(ctx, DatastoreName)
	if err != nil {
		return err
	}
	var sharedMo mo.Datastore
	if err := shared.Properties(ctx, shared.Reference(), []string{"info"}, &sharedMo); err != nil {
		return fmt.Errorf("read datastore %q: %w", DatastoreName, err)
	}
	sharedURL := sharedMo.Info.GetDatastoreInfo().Url
	for _, cl := range []struct{ name, ds string }{{ClusterA, DatastoreA}, {ClusterB, DatastoreB}} {
		cluster, err := folders.HostFolder.CreateCluster(ctx, cl.name, types.ClusterConfigSpecEx{})
		if err != nil {
			return fmt.Errorf("create cluster %q: %w", cl.name, err)
		}
		dir, err := os.MkdirTemp("", "vcsimtest-"+cl.ds+"-")
		if err != nil {
			return err
		}
		e.tempDirs = append(e.tempDirs, dir)
		for i := range PlacementHosts {
			name := fmt.Sprintf("%s-h%d", cl.name, i)
			task, err := cluster.AddHost(ctx, types.HostConnectSpec{HostName: name}, true, nil, nil)
			if err != nil {
				return fmt.Errorf("add host %q: %w", name, err)
			}
			info, err := task.WaitForResult(ctx)
			if err != nil {
				return fmt.Errorf("add host %q: %w", name, err)
			}
			host := object.NewHostSystem(c, info.Result.(types.ManagedObjectReference))
			dss, err := host.ConfigManager().DatastoreSystem(ctx)
			if err != nil {
				return err
			}
			if _, err := dss.CreateLocalDatastore(ctx, DatastoreName, sharedURL); err != nil {
				return fmt.Errorf("mount %q on %q: %w", DatastoreName, name, err)
			}
			if _, err := dss.CreateLocalDatastore(ctx, cl.ds, dir); err != nil {
				return fmt.Errorf("mount %q on %q: %w", cl.ds, name, err)
			}
		}
	}
	return nil
}

// Placed is where a VM is: its host, the host's cluster (or standalone
// compute resource) and its datastores, by name.
type Placed struct {
	Host, Cluster string
	Datastores    []string
}

// PlacedOn returns where the VM or template named name is (false when
// there is none).
func (e *Env) PlacedOn(name string) (Placed, bool) {
	sctx := e.SimContext()
	var host *types.ManagedObjectReference
	var dss []types.ManagedObjectReference
	found := false
	for _, vm := range e.VMs() {
		sctx.WithLock(vm, func() {
			if vm.Name != name || found {
				return
			}
			found = true
			host = vm.Runtime.Host
			dss = slices.Clone(vm.Datastore)
		})
	}
	if !found {
		return Placed{}, false
	}
	var p Placed
	if host != nil {
		if h, ok := e.Model.Map().Get(*host).(*simulator.HostSystem); ok {
			var parent *types.ManagedObjectReference
			sctx.WithLock(h, func() { p.Host, parent = h.Name, h.Parent })
			if parent != nil {
				p.Cluster = entityName(sctx, *parent)
			}
		}
	}
	for _, ds := range dss {
		p.Datastores = append(p.Datastores, entityName(sctx, ds))
	}
	return p, true
}

// entityName reads the name of the managed entity ref under its lock.
func entityName(sctx *simulator.Context, ref types.ManagedObjectReference) string {
	obj := sctx.Map.Get(ref)
	e, ok := obj.(mo.Entity)
	if !ok {
		return ""
	}
	var name string
	sctx.WithLock(obj, func() { name = e.Entity().Name })
	return name
}

// FillDatastore sets the free space of the datastore named name to
// freeBytes (its summary.freeSpace and info.freeSpace read that), and
// from then on a clone into it whose disks do not fit fails with vCenter's
// NoDiskSpace fault (see placementHook). Each clone let in lowers the
// figure by its disks, as the simulator does for every datastore.
func (e *Env) FillDatastore(name string, freeBytes int64) {
	e.t.Helper()
	ds := e.datastoreNamed(name)
	if ds == nil {
		e.t.Fatalf("fill datastore %q: no such datastore", name)
		return
	}
	sctx := e.SimContext()
	sctx.WithLock(ds, func() {
		ds.Info.GetDatastoreInfo().FreeSpace = freeBytes
		sctx.Update(ds, []types.PropertyChange{{Name: "summary.freeSpace", Val: freeBytes}})
	})
	e.placements.mu.Lock()
	e.placements.filled[ds.Self] = true
	e.placements.mu.Unlock()
}

// datastoreNamed is the simulator's datastore named name, nil when none.
func (e *Env) datastoreNamed(name string) *simulator.Datastore {
	sctx := e.SimContext()
	for _, o := range e.Model.Map().All("Datastore") {
		ds, ok := o.(*simulator.Datastore)
		if !ok {
			continue
		}
		match := false
		sctx.WithLock(ds, func() { match = ds.Name == name })
		if match {
			return ds
		}
	}
	return nil
}

// FailClonesInto makes every clone whose target pool (RelocateSpec.Pool)
// belongs to a cluster fail with HostNotConnected, as vCenter answers a
// clone into a cluster whose hosts are all down, until HealClonesInto.
// clusterOrPool is a cluster's name or inventory path, or the path of a
// resource pool of it.
func (e *Env) FailClonesInto(clusterOrPool string) {
	e.t.Helper()
	cr := e.computeResourceOf(clusterOrPool)
	e.placements.mu.Lock()
	e.placements.failing[cr] = true
	e.placements.mu.Unlock()
}

// HealClonesInto ends FailClonesInto for the same cluster: its clones
// work again.
func (e *Env) HealClonesInto(clusterOrPool string) {
	e.t.Helper()
	cr := e.computeResourceOf(clusterOrPool)
	e.placements.mu.Lock()
	delete(e.placements.failing, cr)
	e.placements.mu.Unlock()
}

// computeResourceOf resolves a cluster's name or path, or a pool's path,
// to the cluster (compute resource) it belongs to; it fails the test when
// nothing matches.
func (e *Env) computeResourceOf(clusterOrPool string) types.ManagedObjectReference {
	e.t.Helper()
	finder := newFinder(e.Admin.Client)
	dc, err := finder.Datacenter(e.ctx, e.Datacenter)
	if err != nil {
		e.t.Fatalf("datacenter %q: %v", e.Datacenter, err)
		return types.ManagedObjectReference{}
	}
	finder.SetDatacenter(dc)
	if cr, err := finder.ClusterComputeResource(e.ctx, clusterOrPool); err == nil {
		return cr.Reference()
	}
	rp, err := finder.ResourcePool(e.ctx, clusterOrPool)
	if err != nil {
		e.t.Fatalf("no cluster or pool %q: %v", clusterOrPool, err)
		return types.ManagedObjectReference{}
	}
	owner, _ := poolOwner(e.SimContext(), rp.Reference())
	if owner.Value == "" {
		e.t.Fatalf("pool %q has no owner", clusterOrPool)
	}
	return owner
}

// poolOwner returns the compute resource (cluster or standalone host) the
// resource pool or vApp ref belongs to. It reads the owner without the
// pool's lock: the simulator sets it when it creates the pool and never
// writes it again, and a clone must not wait for the pool's lock here (a
// create holds it while it adds its VM; TestVMsWaitsForACreateInProgress
// holds it).
func poolOwner(ctx *simulator.Context, ref types.ManagedObjectReference) (types.ManagedObjectReference, bool) {
	var owner types.ManagedObjectReference
	switch p := ctx.Map.Get(ref).(type) {
	case *simulator.ResourcePool:
		owner = p.Owner
	case *simulator.VirtualApp:
		owner = p.Owner
	default:
		return owner, false
	}
	return owner, owner.Value != ""
}

// placementHook extends the simulator's CloneVM_Task to vCenter's
// placement of a clone, which vcsim v0.56.0 does not model:
//
//   - A clone whose target pool (RelocateSpec.Pool) is in another cluster
//     than the source's host, without a RelocateSpec.Host, runs on a host
//     of the target pool's cluster that mounts the target datastore
//     (RelocateSpec.Datastore, else the source's), as vCenter (DRS, or its
//     initial placement) chooses one: here the one running the fewest VMs.
//     vcsim keeps the source's host, so a clone into another cluster ran
//     on the template's host. When no host of the cluster mounts the
//     datastore the clone fails with DatastoreNotWritableOnHost (an
//     InvalidDatastore), as vCenter refuses a datastore the target host
//     does not see.
//   - A clone into a cluster given to Env.FailClonesInto fails with
//     HostNotConnected, as vCenter answers when the cluster's hosts are
//     down.
//   - A clone into a datastore given to Env.FillDatastore whose source's
//     disks (their capacity) exceed the datastore's free space fails with
//     NoDiskSpace naming the datastore, as vCenter does; vcsim lets a
//     datastore's free space go below zero. Datastores FillDatastore never
//     set are not checked: the simulator's synthetic capacity must not
//     bound the other tests' clones.
//
// A refused clone is a task that fails with the fault, as on vCenter (the
// call itself succeeds). It is always installed, before the hooks that
// answer clones themselves (clonePowerOn, the SerialTasks gate): a clone
// it refuses never reaches them; one it places reaches them with its host
// set.
type placementHook struct {
	mu      sync.Mutex
	failing map[types.ManagedObjectReference]bool // compute resources
	filled  map[types.ManagedObjectReference]bool // datastores
	next    atomic.Int64
}

func newPlacementHook() *placementHook {
	return &placementHook{failing: map[types.ManagedObjectReference]bool{}, filled: map[types.ManagedObjectReference]bool{}}
}

// handle is a method hook (installHooks): it refuses or places a clone
// into a pool, and lets every other call through (nil, nil).
func (p *placementHook) handle(ctx *simulator.Context, method *simulator.Method) (mo.Reference, types.BaseMethodFault) {
	if method.Name != "CloneVM_Task" {
		return nil, nil
	}
	req, ok := method.Body.(*types.CloneVM_Task)
	if !ok || req.Spec.Location.Pool == nil {
		return nil, nil
	}
	src, ok := ctx.Map.Get(method.This).(*simulator.VirtualMachine)
	if !ok {
		return nil, nil
	}
	var srcHost *types.ManagedObjectReference
	var srcDS []types.ManagedObjectReference
	var disks int64
	ctx.WithLock(src, func() {
		srcHost = src.Runtime.Host
		srcDS = slices.Clone(src.Datastore)
		if src.Config != nil {
			for _, d := range src.Config.Hardware.Device {
				if disk, ok := d.(*types.VirtualDisk); ok {
					disks += diskBytes(disk)
				}
			}
		}
	})
	owner, ok := poolOwner(ctx, *req.Spec.Location.Pool)
	if !ok {
		return nil, nil
	}
	p.mu.Lock()
	failing := p.failing[owner]
	p.mu.Unlock()
	if failing {
		return p.refuse(ctx, method, src, &types.HostNotConnected{})
	}

	var target types.ManagedObjectReference
	switch {
	case req.Spec.Location.Datastore != nil:
		target = *req.Spec.Location.Datastore
	case len(srcDS) > 0:
		target = srcDS[0]
	}
	ds, _ := ctx.Map.Get(target).(*simulator.Datastore)
	var dest *types.ManagedObjectReference
	if req.Spec.Location.Host == nil && ds != nil {
		hosts := computeResourceHosts(ctx, owner)
		mounted := mountedOn(ctx, ds)
		if srcHost == nil || !slices.Contains(hosts, *srcHost) || !mounted[*srcHost] {
			var candidates []types.ManagedObjectReference
			for _, h := range hosts {
				if mounted[h] {
					candidates = append(candidates, h)
				}
			}
			if len(candidates) == 0 {
				var name string
				ctx.WithLock(ds, func() { name = ds.Name })
				f := &types.DatastoreNotWritableOnHost{InvalidDatastore: types.InvalidDatastore{Datastore: &target, Name: name}}
				if len(hosts) > 0 {
					f.Host = hosts[0]
				}
				return p.refuse(ctx, method, src, f)
			}
			h := leastLoaded(ctx, candidates)
			dest = &h
		}
	}
	if ds != nil {
		p.mu.Lock()
		filled := p.filled[target]
		p.mu.Unlock()
		if filled {
			var free int64
			var name string
			ctx.WithLock(ds, func() { free, name = ds.Summary.FreeSpace, ds.Name })
			if disks > free {
				return p.refuse(ctx, method, src, &types.NoDiskSpace{Datastore: name})
			}
		}
	}
	if dest != nil {
		// A copy: the caller's request is left as it was sent.
		placed := *req
		placed.Spec.Location.Host = dest
		method.Body = &placed
	}
	return nil, nil
}

// diskBytes is a virtual disk's capacity in bytes.
func diskBytes(d *types.VirtualDisk) int64 {
	if d.CapacityInBytes != 0 {
		return d.CapacityInBytes
	}
	return d.CapacityInKB * 1024
}

// computeResourceHosts lists the hosts of a cluster or of a standalone
// host's compute resource.
func computeResourceHosts(ctx *simulator.Context, cr types.ManagedObjectReference) []types.ManagedObjectReference {
	var hosts []types.ManagedObjectReference
	switch o := ctx.Map.Get(cr).(type) {
	case *simulator.ClusterComputeResource:
		ctx.WithLock(o, func() { hosts = slices.Clone(o.Host) })
	case *mo.ComputeResource:
		ctx.WithLock(o, func() { hosts = slices.Clone(o.Host) })
	}
	return hosts
}

// mountedOn is the set of hosts that mount ds.
func mountedOn(ctx *simulator.Context, ds *simulator.Datastore) map[types.ManagedObjectReference]bool {
	out := map[types.ManagedObjectReference]bool{}
	ctx.WithLock(ds, func() {
		for _, m := range ds.Host {
			out[m.Key] = true
		}
	})
	return out
}

// leastLoaded is the host of hosts (not empty) that runs the fewest VMs,
// the first of them on a tie.
func leastLoaded(ctx *simulator.Context, hosts []types.ManagedObjectReference) types.ManagedObjectReference {
	best, bestN := hosts[0], -1
	for _, ref := range hosts {
		h, ok := ctx.Map.Get(ref).(*simulator.HostSystem)
		if !ok {
			continue
		}
		var n int
		ctx.WithLock(h, func() { n = len(h.Vm) })
		if bestN < 0 || n < bestN {
			best, bestN = ref, n
		}
	}
	return best
}

// refuse answers the clone with a task of the source VM that fails with
// fault, as vCenter fails a clone task it cannot place.
func (p *placementHook) refuse(_ *simulator.Context, method *simulator.Method, src *simulator.VirtualMachine, fault types.BaseMethodFault) (mo.Reference, types.BaseMethodFault) {
	h := &refusedClone{
		Self:  types.ManagedObjectReference{Type: "VcsimtestRefusedClone", Value: fmt.Sprintf("refused-clone-%d", p.next.Add(1))},
		src:   src,
		fault: fault,
	}
	// As clonePowerOn does: a reference no registry knows leaves the
	// handler ours.
	method.This = h.Self
	return h, nil
}

// refusedClone answers one CloneVM_Task with a failing task.
type refusedClone struct {
	Self  types.ManagedObjectReference
	src   *simulator.VirtualMachine
	fault types.BaseMethodFault
}

// Reference implements mo.Reference.
func (h *refusedClone) Reference() types.ManagedObjectReference { return h.Self }

// Lock implements sync.Locker: nothing to lock (the task takes the
// source's lock while it runs, as the simulator's clone does).
func (h *refusedClone) Lock() {}

// Unlock implements sync.Locker.
func (h *refusedClone) Unlock() {}

// CloneVMTask starts the clone task on the source VM, which fails with
// the fault.
func (h *refusedClone) CloneVMTask(ctx *simulator.Context, _ *types.CloneVM_Task) soap.HasFault {
	fault := h.fault
	task := simulator.CreateTask(h.src, "cloneVm", func(*simulator.Task) (types.AnyType, types.BaseMethodFault) {
		return nil, fault
	})
	return &methods.CloneVM_TaskBody{Res: &types.CloneVM_TaskResponse{Returnval: task.Run(ctx)}}
}
