package vim

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// retrieveMaxRefs is the most VMs one RetrievePropertiesEx of
// RetrieveVirtualMachines asks for. VMProperties come to a few KB per VM
// (extraConfig, guest.net): 1,000 VMs are a response of a few MB, read
// well inside the request timeout; more VMs take more requests.
const retrieveMaxRefs = 1000

// ProbeInventory reads, in one RetrievePropertiesEx, the `view` of each
// container view of the inventory's scope (every VM and template of the
// datacenter's VM folder, or of the hatchery's folder and templateFolders:
// internal/vcenter's govmomi_scope.go) and, when pool is not nil, the pool's runtime. No
// object spec has a SelectSet. Views lost with their session are made
// again once, as ListVirtualMachines does. With a VM change watch, the
// first probe also makes the watch's filter on the views
// (members.go); once it has reported every view, the VMs come from
// its notifications and only the pool is read (nothing without a pool).
func (c *Collector) ProbeInventory(ctx context.Context, pool *types.ManagedObjectReference) ([]types.ManagedObjectReference, *types.ResourcePoolRuntimeInfo, error) {
	for attempt := 0; ; attempt++ {
		v, err := c.View(ctx)
		if err != nil {
			return nil, nil, err
		}
		if refs, ok := c.watchedMembers(v); ok {
			// The scope's VMs as the watch reported them: only the
			// pool is read.
			if pool == nil {
				return refs, nil, nil
			}
			_, rt, err := c.probe(ctx, &ScopeView{}, pool)
			if err != nil {
				return nil, nil, fmt.Errorf("probe inventory of datacenter %q and resource pool %q: %w", c.dc, poolName(pool), err)
			}
			return refs, rt, nil
		}
		refs, rt, err := c.probe(ctx, v, pool)
		if err == nil {
			c.watchMembers(ctx, v)
			return refs, rt, nil
		}
		if attempt == 0 && IsNotFound(err) {
			// The view vanished with its session: build a new one once.
			c.DropView(v)
			continue
		}
		if pool != nil {
			return nil, nil, fmt.Errorf("probe inventory of datacenter %q and resource pool %q: %w", c.dc, poolName(pool), err)
		}
		return nil, nil, fmt.Errorf("probe inventory of datacenter %q: %w", c.dc, err)
	}
}

func (c *Collector) probe(ctx context.Context, v *ScopeView, pool *types.ManagedObjectReference) ([]types.ManagedObjectReference, *types.ResourcePoolRuntimeInfo, error) {
	var spec types.PropertyFilterSpec
	isView := make(map[types.ManagedObjectReference]bool, len(v.views))
	for _, cv := range v.views {
		ref := cv.Reference()
		isView[ref] = true
		spec.ObjectSet = append(spec.ObjectSet, types.ObjectSpec{Obj: ref})
	}
	if len(v.views) > 0 {
		spec.PropSet = []types.PropertySpec{{Type: v.views[0].Reference().Type, PathSet: []string{"view"}}}
	}
	var poolRef types.ManagedObjectReference
	if pool != nil {
		poolRef = *pool
		spec.ObjectSet = append(spec.ObjectSet, types.ObjectSpec{Obj: poolRef})
		spec.PropSet = append(spec.PropSet, types.PropertySpec{Type: poolRef.Type, PathSet: []string{"runtime"}})
	}
	res, err := c.pc.RetrieveProperties(ctx, types.RetrieveProperties{SpecSet: []types.PropertyFilterSpec{spec}})
	if err != nil {
		return nil, nil, err
	}
	var (
		refs     []types.ManagedObjectReference
		rt       *types.ResourcePoolRuntimeInfo
		views    int
		poolMiss error
	)
	seen := map[types.ManagedObjectReference]bool{}
	for _, oc := range res.Returnval {
		switch {
		case isView[oc.Obj]:
			if len(oc.MissingSet) > 0 {
				return nil, nil, fmt.Errorf("read view of container view %s: %w", oc.Obj.Value, missingFault(oc.MissingSet[0]))
			}
			views++
			for _, p := range oc.PropSet {
				if p.Name != "view" {
					continue
				}
				if a, ok := p.Val.(types.ArrayOfManagedObjectReference); ok {
					for _, ref := range a.ManagedObjectReference {
						if ref.Type == "VirtualMachine" && !seen[ref] {
							seen[ref] = true
							refs = append(refs, ref)
						}
					}
				}
			}
		case pool != nil && oc.Obj == poolRef:
			if len(oc.MissingSet) > 0 {
				poolMiss = missingFault(oc.MissingSet[0])
			}
			for _, p := range oc.PropSet {
				if r, ok := p.Val.(types.ResourcePoolRuntimeInfo); ok && p.Name == "runtime" {
					rt = &r
				}
			}
		}
	}
	if views != len(v.views) {
		return nil, nil, fmt.Errorf("container views of the inventory: %d of %d returned their view", views, len(v.views))
	}
	if pool != nil && rt == nil {
		if poolMiss == nil {
			poolMiss = errors.New("no runtime returned")
		}
		return nil, nil, fmt.Errorf("read runtime of resource pool %q: %w", poolName(pool), poolMiss)
	}
	return refs, rt, nil
}

// RetrieveVirtualMachines reads VMProperties of the given VMs by reference
// (explicit object specs, no SelectSet, retrieveMaxRefs per request). VMs
// that no longer exist are left out. No refs, no request.
func (c *Collector) RetrieveVirtualMachines(ctx context.Context, refs []types.ManagedObjectReference) ([]mo.VirtualMachine, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	var vms []mo.VirtualMachine
	for chunk := range slices.Chunk(refs, retrieveMaxRefs) {
		objs := make([]types.ObjectSpec, len(chunk))
		for i, ref := range chunk {
			objs[i] = types.ObjectSpec{Obj: ref, Skip: types.NewBool(false)}
		}
		res, err := c.pc.RetrieveProperties(ctx, types.RetrieveProperties{SpecSet: []types.PropertyFilterSpec{{
			ObjectSet:                     objs,
			PropSet:                       []types.PropertySpec{{Type: "VirtualMachine", PathSet: VMProperties}},
			ReportMissingObjectsInResults: types.NewBool(true),
		}}})
		if err != nil {
			return nil, fmt.Errorf("retrieve %d virtual machines of datacenter %q: %w", len(chunk), c.dc, err)
		}
		content := slices.DeleteFunc(res.Returnval, func(oc types.ObjectContent) bool {
			return slices.ContainsFunc(oc.MissingSet, func(m types.MissingProperty) bool { return objectGone(m.Fault) })
		})
		var part []mo.VirtualMachine
		if err := mo.LoadObjectContent(content, &part); err != nil {
			return nil, fmt.Errorf("decode %d virtual machines of datacenter %q: %w", len(content), c.dc, err)
		}
		c.learnNames(part)
		vms = append(vms, part...)
	}
	return vms, nil
}

// missingFault turns a missing property into an error.
func missingFault(m types.MissingProperty) error {
	if m.Fault.Fault == nil {
		return fmt.Errorf("property %q missing", m.Path)
	}
	return fmt.Errorf("property %q missing: %w", m.Path, soap.WrapVimFault(m.Fault.Fault))
}

// poolName names a pool in errors without a round trip: its reference.
func poolName(pool *types.ManagedObjectReference) string {
	return pool.Value
}
