package vcsimtest

import (
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

// SetClusterPoolRuntime edits the runtime of the root resource pool of the
// cluster named cluster (ClusterA, ClusterB: Options.Placements) under the
// pool's lock, as SetResourcePoolRuntime does for ResourcePoolPath; the
// change is visible over the API at once. vcsim gives a cluster it creates
// the static runtime of its ESX model (about 1 GB of unreserved memory),
// where a real cluster's root pool shows the memory and CPU its hosts have
// left: the demo gives each cluster a finite capacity with it.
func (e *Env) SetClusterPoolRuntime(cluster string, edit func(*types.ResourcePoolRuntimeInfo)) {
	e.t.Helper()
	m := e.Model.Map()
	sctx := e.SimContext()
	var pool *types.ManagedObjectReference
	for _, o := range m.All("ClusterComputeResource") {
		c, ok := o.(*simulator.ClusterComputeResource)
		if !ok {
			continue
		}
		sctx.WithLock(c, func() {
			if c.Name == cluster {
				pool = c.ResourcePool
			}
		})
	}
	if pool == nil {
		e.t.Fatalf("no cluster %q with a resource pool", cluster)
		return
	}
	rp, ok := m.Get(*pool).(*simulator.ResourcePool)
	if !ok {
		e.t.Fatalf("cluster %q: root pool %s is no resource pool", cluster, pool.Value)
		return
	}
	sctx.WithLock(rp, func() {
		rt := rp.Runtime
		edit(&rt)
		sctx.Update(rp, []types.PropertyChange{{Name: "runtime", Val: rt}})
	})
}
