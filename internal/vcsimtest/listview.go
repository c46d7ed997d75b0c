package vcsimtest

import (
	"slices"
	"sync"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// The simulator's list views, made to change while a property collector
// waits on a filter over them, as vCenter allows: VMware's SDK guide
// describes a ListView whose contents the client adds to and removes from
// (ModifyListView) under one long-lived filter, which reports the objects
// entering and leaving; the hatchery's wait collector works so
// (internal/vcenter/vim/waits.go).
//
// Govmomi's simulator v0.56.0 deadlocks on it: ModifyListView runs holding
// the view's lock and, to tell the filters, takes each filter's lock,
// while a WaitForUpdatesEx applying queued changes holds its filter's lock
// and takes the view's to read its contents (the ContainerView watch's
// lock-order bug, docs/inventory-watch.md).
//
// unlockedListView is the session's list view with a ModifyListView that
// changes the contents under the view's lock (the one the simulator's
// property collection takes to read them) and tells the filters after
// releasing it: no lock is held while another is taken. The simulator's
// dispatch lock on the view is opted out of (Lock and Unlock do nothing),
// so the call holds nothing when it begins.
type unlockedListView struct {
	*simulator.ListView
	listed *listedRefs // the simulator's objects ever listed (pollscope.go)
}

// listViewAdditions suffixes the view's reference in the change that
// reports an addition alone (ModifyListView).
const listViewAdditions = "/additions"

// Lock opts the view out of the simulator's dispatch lock.
func (*unlockedListView) Lock() {}

// Unlock opts the view out of the simulator's dispatch lock.
func (*unlockedListView) Unlock() {}

// ModifyListView adds and removes objects as the simulator does (an object
// it cannot find is returned, and added all the same), then reports the
// view's new contents to the property collectors.
func (v *unlockedListView) ModifyListView(ctx *simulator.Context, req *types.ModifyListView) soap.HasFault {
	body := &methods.ModifyListViewBody{Res: new(types.ModifyListViewResponse)}
	var view []types.ManagedObjectReference
	// Listed before they are in the view: the collectors hear of their
	// changes from then on (pollscope.go).
	v.listed.add(req.Add)
	ctx.Map.WithLock(ctx, v.Self, func() {
		for _, ref := range req.Add {
			if ctx.Session.Get(ref) == nil {
				body.Res.Returnval = append(body.Res.Returnval, ref)
			}
			v.View = append(v.View, ref)
		}
		for _, ref := range req.Remove {
			simulator.RemoveReference(&v.View, ref)
		}
		view = slices.Clone(v.View)
	})
	if len(req.Add) == 0 && len(req.Remove) == 0 {
		return body
	}
	// The change is applied to a copy: the registry writes the value into
	// the object it is given, and the view itself may be read meanwhile;
	// the filters and collectors only look at the reference and the
	// change. With removals, the copy bears the view's reference: the
	// simulator then reports every object of the view again (vCenter
	// reports the removed ones leaving). Additions alone bear another
	// reference: the collectors, which look for new objects at every
	// change, report only the added ones entering, as vCenter does.
	shadow := &simulator.ListView{}
	shadow.Self = v.Self
	if len(req.Remove) == 0 {
		shadow.Self.Value += listViewAdditions
	}
	ctx.Update(shadow, []types.PropertyChange{{Name: "view", Val: view}})
	return body
}

// listViewGuard is the method hook that puts an unlockedListView in place
// of a session's list view before a call reaches it (the session's
// registry is where the simulator looks the view up), and lists the
// objects a new view is made with. It never answers a call itself.
type listViewGuard struct {
	mu     sync.Mutex
	listed *listedRefs
}

func (g *listViewGuard) handle(ctx *simulator.Context, m *simulator.Method) (mo.Reference, types.BaseMethodFault) {
	if req, ok := m.Body.(*types.CreateListView); ok {
		// A new view's objects are listed as ModifyListView's additions
		// are (pollscope.go).
		g.listed.add(req.Obj)
		return nil, nil
	}
	if ctx.Session == nil || m.This.Type != "ListView" {
		return nil, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if lv, ok := ctx.Session.Get(m.This).(*simulator.ListView); ok {
		ctx.Session.Registry.Put(&unlockedListView{ListView: lv, listed: g.listed})
	}
	return nil, nil
}
