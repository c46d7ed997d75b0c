package vcsimtest

import (
	"strings"
	"sync"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// The simulator's property collectors, made to hear only of the changes
// their filters can report, so that a poll costs what its own filters'
// objects changed, not what the whole inventory did.
//
// Govmomi's simulator v0.56.0 queues every change of every object of the
// model on every collector that has polled once (the collector is a
// handler of the model's registry), and its WaitForUpdatesEx then, for
// each of the collector's filters and each queued change, collects every
// filter of the collector again (a deep copy of each object's properties
// through XML): a poll's cost grows as filters × filters × changes ×
// objects, every clone's tasks, events and folder changes included.
// Under the race detector on two shared cores, a poll of the hatchery's
// VM change watch (internal/vcenter/vim/watch.go: its VM filter and
// its filter on the scope's views, two filters) with a few hundred changes
// queued took 13 s to 67 s (measured in internal/e2e's
// TestTwoInstancesOneStoppedHard, docs/inventory-watch.md); the next poll
// then had that much more queued, and the inventory stayed stale until a
// request timeout abandoned the poll. vCenter's collector reports the
// same updates at a cost that follows the filters' own objects.
//
// A session's guardedCollector keeps the scope of its filters
// (pollScope: the objects they list, and the properties they ask) and,
// once the simulator made the collector listen to changes (its first
// poll), takes its place among the registry's handlers (collectorUpdates,
// under the collector's reference): a change reaches the collector only
// when some filter lists the object and asks a property the change
// touches, or when a filter traverses (a SelectSet: every change may
// matter) or asks every property of a type. A filter whose only traversal
// is a ListView's contents (the hatchery's wait collector,
// internal/vcenter/vim/waits.go) lists the view and the objects that
// went into it: a change reaches the collector when it is the view's own
// (its contents changed: the simulator computes the objects entering) or
// when it is one of an object ever added to a list view of the simulator
// (listedRefs, a superset of the view's contents) and touches a property
// a filter asks. Without it, every change of the simulator reached the
// wait collector, and each made its next poll collect the whole view
// again (the simulator's collection per queued change): in a burst of
// spawns, the clones' and claims' every change. What a poll reports is
// unchanged: a change dropped so is one no filter of the collector
// reports, and the simulator's own re-collection, which only ever adds
// objects a filter lists and has not reported yet, sees them at the next
// change that does reach the collector or at the new filter's own queued
// change (CreateFilter).

// pollScope is what a collector's filters list and ask, as added by
// CreateFilter; it only grows (a destroyed filter's objects stay, which
// only lets more changes through).
type pollScope struct {
	mu    sync.Mutex
	objs  map[types.ManagedObjectReference]bool // objects some filter lists
	paths map[string]bool                       // properties some filter asks
	// every: a filter traverses (otherwise than a list view's contents)
	// or asks every property: every change reaches the collector.
	every bool
	// views: list views whose contents a filter traverses; listed: the
	// objects ever added to a list view of the simulator (nil: none is
	// traversed).
	views  map[types.ManagedObjectReference]bool
	listed *listedRefs
}

// listedRefs are the objects ever added to a list view of one simulator
// (ModifyListView, listview.go): a superset of any view's contents, which
// only lets more changes through.
type listedRefs struct {
	mu   sync.Mutex
	refs map[types.ManagedObjectReference]bool
}

func newListedRefs() *listedRefs {
	return &listedRefs{refs: map[types.ManagedObjectReference]bool{}}
}

// add records refs as listed.
func (l *listedRefs) add(refs []types.ManagedObjectReference) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range refs {
		l.refs[r] = true
	}
}

// has tells whether ref was ever added to a list view.
func (l *listedRefs) has(ref types.ManagedObjectReference) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.refs[ref]
}

// listViewContents tells whether o traverses exactly a list view's
// contents: its object is a ListView and its only selection is the
// "view" property, with no further traversal.
func listViewContents(o types.ObjectSpec) bool {
	if o.Obj.Type != "ListView" || len(o.SelectSet) != 1 {
		return false
	}
	t, ok := o.SelectSet[0].(*types.TraversalSpec)
	return ok && t.Type == "ListView" && t.Path == "view" && len(t.SelectSet) == 0
}

// add records the objects and properties of a new filter's spec.
func (s *pollScope) add(spec types.PropertyFilterSpec) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range spec.ObjectSet {
		s.objs[o.Obj] = true
		switch {
		case s.listed != nil && listViewContents(o):
			if s.views == nil {
				s.views = map[types.ManagedObjectReference]bool{}
			}
			s.views[o.Obj] = true
		case len(o.SelectSet) != 0:
			s.every = true
		}
	}
	for _, p := range spec.PropSet {
		if p.All != nil && *p.All {
			s.every = true
		}
		for _, path := range p.PathSet {
			if s.paths == nil {
				s.paths = map[string]bool{}
			}
			s.paths[path] = true
		}
	}
}

// lists tells whether a change of ref's existence (made, moved, destroyed)
// may be reported by a filter of the collector.
func (s *pollScope) lists(ref types.ManagedObjectReference) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.every || s.objs[ref] || s.inViewLocked(ref)
}

// inViewLocked tells whether ref may be in a list view a filter
// traverses: ever listed, while some filter traverses one. s.mu is held.
func (s *pollScope) inViewLocked(ref types.ManagedObjectReference) bool {
	return len(s.views) > 0 && s.listed.has(ref)
}

// isViewLocked tells whether ref is a traversed list view, or the
// reference its ModifyListView reports an addition under (listview.go).
// s.mu is held.
func (s *pollScope) isViewLocked(ref types.ManagedObjectReference) bool {
	if ref.Type != "ListView" {
		return false
	}
	ref.Value = strings.TrimSuffix(ref.Value, listViewAdditions)
	return s.views[ref]
}

// touches tells whether changes of ref may be reported: ref is listed and
// a change's property is one a filter asks, a part of one, or contains one
// (the simulator's own matching, taken wider: "config" and
// "config.template" both match either way).
func (s *pollScope) touches(ref types.ManagedObjectReference, changes []types.PropertyChange) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.every || s.isViewLocked(ref) {
		return true
	}
	if !s.objs[ref] && !s.inViewLocked(ref) {
		return false
	}
	if len(changes) == 0 {
		return true
	}
	for _, c := range changes {
		for path := range s.paths {
			if strings.HasPrefix(c.Name, path) || strings.HasPrefix(path, c.Name) {
				return true
			}
		}
	}
	return false
}

// collectorUpdates is a guardedCollector's handler of the registry's
// changes, under the collector's reference: it passes on to the
// simulator's collector the changes its scope may report (see above).
type collectorUpdates struct {
	self  types.ManagedObjectReference
	pc    *simulator.PropertyCollector
	scope *pollScope
}

// Reference implements mo.Reference: the collector's, so that it takes the
// collector's place among the handlers (and leaves with it at its
// destroy).
func (u *collectorUpdates) Reference() types.ManagedObjectReference { return u.self }

// PutObject passes on an object made or moved that a filter lists.
func (u *collectorUpdates) PutObject(ctx *simulator.Context, obj mo.Reference) {
	if u.scope.lists(obj.Reference()) {
		u.pc.PutObject(ctx, obj)
	}
}

// UpdateObject passes on the changes a filter may report.
func (u *collectorUpdates) UpdateObject(ctx *simulator.Context, obj mo.Reference, changes []types.PropertyChange) {
	if u.scope.touches(obj.Reference(), changes) {
		u.pc.UpdateObject(ctx, obj, changes)
	}
}

// RemoveObject passes on the destroy of an object a filter lists.
func (u *collectorUpdates) RemoveObject(ctx *simulator.Context, ref types.ManagedObjectReference) {
	if u.scope.lists(ref) {
		u.pc.RemoveObject(ctx, ref)
	}
}

// listen puts the collector's collectorUpdates in the place the
// simulator's first poll gave the collector itself among the registry's
// handlers; nothing for a collector without a scope or being destroyed
// (its destroy removes the handler: it must not come back).
func (g *guardedCollector) listen(ctx *simulator.Context) {
	if g.scope == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.destroyed {
		return
	}
	ctx.Map.AddHandler(&collectorUpdates{self: g.PropertyCollector.Self, pc: g.PropertyCollector, scope: g.scope})
}
