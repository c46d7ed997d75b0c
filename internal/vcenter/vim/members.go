package vim

import (
	"context"
	"slices"

	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/vmware/govmomi/vim25/types"
)

// The scope's membership, learnt from notifications
// (docs/inventory-watch.md, "One refresh"): the VM change watch's collector
// also holds one filter on the `view` of the scope's container views. A VM
// made in, moved into, moved out of or destroyed in the scope changes a
// view, and the change comes with the watch's next VirtualMachineChanges;
// ProbeInventory then answers the scope's VMs from what was reported and
// reads only the resource pool, instead of every view's references at
// each refresh.

// vmMembers is the membership filter of one watch. Guarded by
// Collector.watchMu.
type vmMembers struct {
	view   *ScopeView // the views the filter lists
	filter types.ManagedObjectReference
	// refs is each view's contents as last reported; complete once every
	// view of view has reported.
	refs map[types.ManagedObjectReference][]types.ManagedObjectReference
	// broken is set by a report the watch cannot read (a view left the
	// filter, a change other than an assignment of the whole `view`): the
	// membership is not trusted until the next watch, and ProbeInventory
	// reads the views.
	broken bool
}

// watchedMembers returns the scope's VMs as the watch's membership filter
// reported them for the views v, and true; false when there is no such
// filter, it has not reported every view yet, or cannot be trusted.
func (c *Collector) watchedMembers(v *ScopeView) ([]types.ManagedObjectReference, bool) {
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	w := c.watch
	if w == nil || w.gen != c.gen() || !w.abandoned.IsZero() || w.members == nil {
		return nil, false
	}
	m := w.members
	if m.view != v || m.broken || len(m.refs) != len(v.views) {
		return nil, false
	}
	seen := map[types.ManagedObjectReference]bool{}
	var refs []types.ManagedObjectReference
	for _, cv := range v.views {
		for _, ref := range m.refs[cv.Reference()] {
			if ref.Type == "VirtualMachine" && !seen[ref] {
				seen[ref] = true
				refs = append(refs, ref)
			}
		}
	}
	return refs, true
}

// watchMembers makes the membership filter of the current watch for the
// views v when it has none for them (the views were made again: a
// template folder joined the scope), destroying the previous one. Best
// effort: without it, ProbeInventory keeps reading the views. Cost: one
// CreateFilter (and one DestroyPropertyFilter), once per watch and views.
func (c *Collector) watchMembers(ctx context.Context, v *ScopeView) {
	c.watchMu.Lock()
	w := c.watch
	if w == nil || w.gen != c.gen() || !w.abandoned.IsZero() || len(v.views) == 0 ||
		(w.members != nil && w.members.view == v) {
		c.watchMu.Unlock()
		return
	}
	old := w.members
	w.members = nil
	c.watchMu.Unlock()
	if old != nil {
		c.destroyWatchFilters(ctx, w, []types.ManagedObjectReference{old.filter})
	}
	objs := make([]types.ObjectSpec, len(v.views))
	for i, cv := range v.views {
		objs[i] = types.ObjectSpec{Obj: cv.Reference(), Skip: types.NewBool(false)}
	}
	f, err := w.pc.CreateFilter(ctx, types.CreateFilter{Spec: types.PropertyFilterSpec{
		ObjectSet: objs,
		PropSet:   []types.PropertySpec{{Type: v.views[0].Reference().Type, PathSet: []string{"view"}}},
	}})
	if err != nil {
		c.log.Debug("watch the inventory's scope: its views are read at each refresh", logkey.Err, err)
		return
	}
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	if c.watch != w {
		return // the collector and its filter go with the old watch
	}
	w.members = &vmMembers{view: v, filter: f.Reference(), refs: map[types.ManagedObjectReference][]types.ManagedObjectReference{}}
}

// applyMemberUpdate records one update of a container view of the
// membership filter. The caller holds watchMu and w is current.
func (w *vmWatch) applyMemberUpdate(ou types.ObjectUpdate) {
	m := w.members
	if m == nil {
		return
	}
	if ou.Kind == types.ObjectUpdateKindLeave {
		m.broken = true
		return
	}
	for _, ch := range ou.ChangeSet {
		a, ok := ch.Val.(types.ArrayOfManagedObjectReference)
		switch {
		case ch.Name == "view" && ch.Op == types.PropertyChangeOpAssign && ok:
			m.refs[ou.Obj] = slices.Clone(a.ManagedObjectReference)
		case ch.Name == "view" && ch.Op == types.PropertyChangeOpAssign && ch.Val == nil:
			m.refs[ou.Obj] = nil // an empty view
		default:
			m.broken = true
		}
	}
}
