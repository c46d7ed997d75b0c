package vim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// The views over the inventory's scope (docs/inventory-watch.md, "Scope"):
// the folders are the adapter's to resolve (internal/vcenter,
// govmomi_scope.go: the hatchery's folder, the [[placements]] entries'
// folders, the template folders), handed over as ScopeRoots by
// CollectorConfig.Roots; the collector makes one ContainerView of VMs per
// folder, keeps them for the session generation and the scope they were
// made for, and reads through them: the listing (ListVirtualMachines),
// the probe (probe.go) and the membership filter (members.go).

// ScopeRoot is one folder of the scope: its reference, the name errors
// use, and whether its subtree is included.
type ScopeRoot struct {
	Ref       types.ManagedObjectReference
	Name      string
	Recursive bool
}

// ScopeView is the reused set of ContainerViews over the inventory's
// scope, valid for the session generation it was created in (views are
// session-scoped: a re-login loses them) and the scope it covers
// (CollectorConfig.ScopeVersion when they were made).
type ScopeView struct {
	views []*view.ContainerView
	gen   int64
	found int
}

// View returns the current views, creating them when none exist for this
// session and scope. The mutex is never held across a round trip.
func (c *Collector) View(ctx context.Context) (*ScopeView, error) {
	gen := c.gen()
	found := c.scopeVersion()
	c.viewsMu.Lock()
	v := c.views
	c.viewsMu.Unlock()
	if v != nil && v.gen == gen && v.found == found {
		return v, nil
	}
	// The scope's version before the views: a template folder found
	// meanwhile makes them stale, and the next call makes them again.
	views, err := c.newScopeViews(ctx)
	if err != nil {
		return nil, err
	}
	nv := &ScopeView{views: views, gen: gen, found: found}
	c.viewsMu.Lock()
	if cur := c.views; cur != nil && cur.gen == gen && cur.found == found {
		c.viewsMu.Unlock()
		// Lost a race with another caller: use its views, which other
		// callers may be reading through, and destroy ours, which nobody
		// else has seen.
		destroyViews(ctx, views)
		return cur, nil
	}
	c.views = nv
	c.viewsMu.Unlock()
	return nv, nil
}

// DropView forgets v if it is still the current view (lost with its
// session: the next View makes new ones).
func (c *Collector) DropView(v *ScopeView) {
	c.viewsMu.Lock()
	if c.views == v {
		c.views = nil
	}
	c.viewsMu.Unlock()
}

// ResetViews destroys the current views when they cover an older scope
// than CollectorConfig.ScopeVersion says (a template folder joined it): a
// reader still on them fails once with not-found and makes the new views
// (ListVirtualMachines, ProbeInventory).
func (c *Collector) ResetViews(ctx context.Context) {
	found := c.scopeVersion()
	c.viewsMu.Lock()
	old := c.views
	if old != nil && old.found != found {
		c.views = nil
	} else {
		old = nil
	}
	c.viewsMu.Unlock()
	if old != nil {
		destroyViews(ctx, old.views)
	}
}

// newScopeViews creates one ContainerView of VMs per scope folder
// (recursive or not, as ScopeRoot says). On error, the views already made are destroyed (best
// effort; they would die with the session anyway).
func (c *Collector) newScopeViews(ctx context.Context) ([]*view.ContainerView, error) {
	roots, err := c.roots(ctx)
	if err != nil {
		return nil, err
	}
	m := view.NewManager(c.vim)
	views := make([]*view.ContainerView, 0, len(roots))
	for _, root := range roots {
		cv, err := m.CreateContainerView(ctx, root.Ref, []string{"VirtualMachine"}, root.Recursive)
		if err != nil {
			destroyViews(ctx, views)
			return nil, fmt.Errorf("create container view over %q: %w", root.Name, err)
		}
		views = append(views, cv)
	}
	return views, nil
}

// destroyViews destroys views, best effort (a view dies with its session).
func destroyViews(ctx context.Context, views []*view.ContainerView) {
	for _, v := range views {
		_ = v.Destroy(ctx) //nolint:errcheck // best effort: the view dies with the session anyway
	}
}

// scopeSpec is the filter spec that reads props of every VM of the
// scope's views: one ObjectSpec per view, traversing its `view`. It is
// what view.ContainerView.Retrieve sends, for several views at once.
func scopeSpec(v *ScopeView, props []string) types.PropertyFilterSpec {
	spec := types.PropertyFilterSpec{
		PropSet: []types.PropertySpec{{Type: "VirtualMachine", PathSet: props}},
	}
	for _, cv := range v.views {
		spec.ObjectSet = append(spec.ObjectSet, types.ObjectSpec{
			Obj:       cv.Reference(),
			Skip:      types.NewBool(true),
			SelectSet: []types.BaseSelectionSpec{&types.TraversalSpec{Type: cv.Reference().Type, Path: "view"}},
		})
	}
	return spec
}

// RetrieveScope reads props of every VM of the scope's views v in one
// RetrievePropertiesEx (continued while vCenter pages), each VM once.
func (c *Collector) RetrieveScope(ctx context.Context, v *ScopeView, props []string) ([]mo.VirtualMachine, error) {
	res, err := c.pc.RetrieveProperties(ctx, types.RetrieveProperties{SpecSet: []types.PropertyFilterSpec{scopeSpec(v, props)}})
	if err != nil {
		return nil, err
	}
	var vms []mo.VirtualMachine
	if err := mo.LoadObjectContent(res.Returnval, &vms); err != nil {
		return nil, fmt.Errorf("decode %d virtual machines: %w", len(res.Returnval), err)
	}
	seen := make(map[types.ManagedObjectReference]bool, len(vms))
	return slices.DeleteFunc(vms, func(o mo.VirtualMachine) bool {
		dup := seen[o.Self]
		seen[o.Self] = true
		return dup
	}), nil
}

// ListVirtualMachines lists every VM and template of the inventory's
// scope through the reused ContainerViews, reading only VMProperties. Cost: one
// RetrieveProperties per call (plus a CreateContainerView per scope
// folder after a login).
func (c *Collector) ListVirtualMachines(ctx context.Context) ([]mo.VirtualMachine, error) {
	for attempt := 0; ; attempt++ {
		v, err := c.View(ctx)
		if err != nil {
			return nil, err
		}
		vms, err := c.RetrieveScope(ctx, v, VMProperties)
		if err == nil {
			c.learnNames(vms)
			return vms, nil
		}
		if attempt == 0 && IsNotFound(err) {
			// The view vanished with its session: build a new one once.
			c.DropView(v)
			continue
		}
		return nil, fmt.Errorf("list virtual machines of datacenter %q: %w", c.dc, err)
	}
}

// destroyScopeViews destroys the current views at Close, best effort.
func (c *Collector) destroyScopeViews(ctx context.Context) {
	c.viewsMu.Lock()
	v := c.views
	c.views = nil
	c.viewsMu.Unlock()
	if v == nil {
		return
	}
	for _, cv := range v.views {
		if err := cv.Destroy(ctx); err != nil {
			c.log.Debug("destroy vm container view", logkey.Err, err)
		}
	}
}

// FindInScope finds a VM or template by name, or by inventory path, among
// the scope's VMs: one listing of the scope's names, plus a finder lookup
// for a path. None is ErrOutOfScope; several of that name ErrAmbiguous.
func (c *Collector) FindInScope(ctx context.Context, name string) (types.ManagedObjectReference, error) {
	var vms []mo.VirtualMachine
	for attempt := 0; ; attempt++ {
		v, err := c.View(ctx)
		if err != nil {
			return types.ManagedObjectReference{}, err
		}
		vms, err = c.RetrieveScope(ctx, v, []string{"name"})
		if err == nil {
			break
		}
		if attempt == 0 && IsNotFound(err) {
			c.DropView(v) // lost with its session: once more
			continue
		}
		return types.ManagedObjectReference{}, fmt.Errorf("list vm names of the inventory's scope: %w", err)
	}
	if strings.Contains(name, "/") {
		ref, err := c.vmByPath(ctx, name)
		if err != nil {
			return types.ManagedObjectReference{}, err
		}
		if !slices.ContainsFunc(vms, func(o mo.VirtualMachine) bool { return o.Self == ref }) {
			return types.ManagedObjectReference{}, fmt.Errorf("%w: %q is outside the hatchery's folder and template folders", ErrOutOfScope, name)
		}
		return ref, nil
	}
	var found []types.ManagedObjectReference
	for _, o := range vms {
		if o.Name == name {
			found = append(found, o.Self)
		}
	}
	switch len(found) {
	case 0:
		return types.ManagedObjectReference{}, fmt.Errorf("%w: no vm named %q in the hatchery's folder or template folders", ErrOutOfScope, name)
	case 1:
		return found[0], nil
	default:
		return types.ManagedObjectReference{}, fmt.Errorf("%w: %d vms named %q in the hatchery's folder and template folders; give its inventory path", ErrAmbiguous, len(found), name)
	}
}

// vmByPath resolves a VM's inventory path: absolute ("/<datacenter>/vm/…")
// or relative to the datacenter's VM folder, with one
// SearchIndex.FindByInventoryPath (a reference only).
func (c *Collector) vmByPath(ctx context.Context, name string) (types.ManagedObjectReference, error) {
	p := strings.TrimPrefix(name, "/")
	if !strings.HasPrefix(name, "/") {
		p = strings.TrimPrefix(c.datacenter.InventoryPath, "/") + "/vm/" + name
	}
	ref, err := object.NewSearchIndex(c.vim).FindByInventoryPath(ctx, p)
	switch {
	case err != nil:
		return types.ManagedObjectReference{}, fmt.Errorf("find vm %q: %w", name, err)
	case ref == nil || ref.Reference().Type != "VirtualMachine":
		return types.ManagedObjectReference{}, fmt.Errorf("%w: %q in datacenter %q", ErrNoSuchVM, name, c.dc)
	}
	return ref.Reference(), nil
}

// Discover finds a VM (a template, in practice) by name or path outside
// the scope, templateFolders unset, without reading any other VM: a path
// is resolved by vmByPath; a name by one RetrieveProperties listing the VM
// folder's folders (the traversal passes through VMs but returns Folder
// objects only), then one SearchIndex.FindChild per folder, whose answer
// names only a VM of that name. Found and a template, its folder joins the scope (top
// level only: found) and the scope's views are made again at the next
// read, so that the inventory holds the template from then on and this
// search runs once per template and process. None is ErrNoSuchVM;
// several ErrAmbiguous.
func (c *Collector) Discover(ctx context.Context, name string) (types.ManagedObjectReference, error) {
	var ref, folder types.ManagedObjectReference
	if strings.Contains(name, "/") {
		r, err := c.vmByPath(ctx, name)
		if err != nil {
			return types.ManagedObjectReference{}, err
		}
		var o mo.VirtualMachine
		if err := c.pc.RetrieveOne(ctx, r, []string{"parent"}, &o); err != nil {
			return types.ManagedObjectReference{}, fmt.Errorf("read folder of vm %q: %w", name, err)
		}
		if o.Parent == nil {
			return types.ManagedObjectReference{}, fmt.Errorf("read folder of vm %q: none", name)
		}
		ref, folder = r, *o.Parent
	} else {
		folders, err := c.vmFolders(ctx)
		if err != nil {
			return types.ManagedObjectReference{}, err
		}
		si := object.NewSearchIndex(c.vim)
		n := 0
		for _, f := range folders {
			r, err := si.FindChild(ctx, f, name)
			if err != nil {
				return types.ManagedObjectReference{}, fmt.Errorf("find vm %q in folder %s: %w", name, f.Value, err)
			}
			if r == nil || r.Reference().Type != "VirtualMachine" {
				continue
			}
			ref, folder = r.Reference(), f
			n++
		}
		switch {
		case n == 0:
			return types.ManagedObjectReference{}, fmt.Errorf("%w: %q in any folder of datacenter %q", ErrNoSuchVM, name, c.dc)
		case n > 1:
			return types.ManagedObjectReference{}, fmt.Errorf("%w: %d vms named %q in datacenter %q; give its inventory path", ErrAmbiguous, n, name, c.dc)
		}
	}
	// Only a template's folder joins the scope: a plain VM of that name
	// (a model naming the wrong image) is returned, as the finder
	// returned it, without reading its folder from then on.
	var o mo.VirtualMachine
	if err := c.pc.RetrieveOne(ctx, ref, []string{"config.template"}, &o); err != nil {
		return types.ManagedObjectReference{}, fmt.Errorf("read template flag of vm %q: %w", name, err)
	}
	if o.Config == nil || !o.Config.Template {
		return ref, nil
	}
	c.foundMu.Lock()
	grown := !slices.Contains(c.found, folder)
	if grown {
		c.found = append(c.found, folder)
	}
	c.foundMu.Unlock()
	if grown {
		// The views cover the scope without it: destroyed, and made again
		// at the next read.
		c.ResetViews(ctx)
	}
	c.log.Info("template found outside the hatchery's folder: its folder joins the inventory's scope", logkey.VM, name, "folder", folder.Value)
	return ref, nil
}

// vmFolders lists the folders of the datacenter's VM folder, itself
// included, in one RetrieveProperties whose answer holds Folder objects
// only (their names; no VM is returned).
func (c *Collector) vmFolders(ctx context.Context) ([]types.ManagedObjectReference, error) {
	dcf, err := c.datacenter.Folders(ctx)
	if err != nil {
		return nil, fmt.Errorf("read folders of datacenter %q: %w", c.dc, err)
	}
	spec := types.PropertyFilterSpec{
		PropSet: []types.PropertySpec{{Type: "Folder", PathSet: []string{"name"}}},
		ObjectSet: []types.ObjectSpec{{
			Obj: dcf.VmFolder.Reference(),
			SelectSet: []types.BaseSelectionSpec{&types.TraversalSpec{
				SelectionSpec: types.SelectionSpec{Name: "folders"},
				Type:          "Folder",
				Path:          "childEntity",
				SelectSet:     []types.BaseSelectionSpec{&types.SelectionSpec{Name: "folders"}},
			}},
		}},
	}
	res, err := c.pc.RetrieveProperties(ctx, types.RetrieveProperties{SpecSet: []types.PropertyFilterSpec{spec}})
	if err != nil {
		return nil, fmt.Errorf("list vm folders of datacenter %q: %w", c.dc, err)
	}
	out := make([]types.ManagedObjectReference, 0, len(res.Returnval))
	for _, oc := range res.Returnval {
		if oc.Obj.Type == "Folder" {
			out = append(out, oc.Obj)
		}
	}
	return out, nil
}

// ErrOutOfScope is wrapped by FindInScope's error (the adapter's
// LoadVirtualMachine's) when templateFolders
// is set and no VM of that name (or path) is in the hatchery's folder or
// templateFolders: a VM elsewhere in the datacenter is never used.
var ErrOutOfScope = errors.New("not in the hatchery's folder or template folders")

// ErrNoSuchVM is wrapped by Discover's error (the adapter's
// LoadVirtualMachine's, templateFolders unset) when no VM of that name (or path) is in any folder of the
// datacenter.
var ErrNoSuchVM = errors.New("no such vm")

// ErrAmbiguous marks a name that resolves to several objects: a VM name
// several VMs of the scope or the datacenter bear (FindInScope, Discover),
// or a placement setting that resolves to several objects (or none was set
// and the datacenter has several: internal/vcenter's *PlacementError
// saying so wraps it).
var ErrAmbiguous = errors.New("ambiguous vsphere placement")

// Found returns the folders of templates found outside the configured
// scope by name (Discover): part of the scope from then on, top level
// only (CollectorConfig.Roots adds them).
func (c *Collector) Found() []types.ManagedObjectReference {
	c.foundMu.Lock()
	defer c.foundMu.Unlock()
	return slices.Clone(c.found)
}

// scopeVersion is the scope's version: the number of template folders
// found by name, which only grows.
func (c *Collector) scopeVersion() int {
	c.foundMu.Lock()
	defer c.foundMu.Unlock()
	return len(c.found)
}
