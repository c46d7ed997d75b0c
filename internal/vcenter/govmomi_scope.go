package vcenter

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

// The inventory's scope (docs/inventory-watch.md, "Scope"): the folders
// whose VMs the inventory lists and probes, and where LoadVirtualMachine
// looks for a template. There is always one, so that the inventory's
// vCenter cost and memory follow the hatchery's own VMs and templates,
// never the datacenter's size (VMs of other teams' folders are never
// listed, probed, read nor watched):
//
//   - the hatchery's folder, where its clones go (LoadFolder):
//     folderString with its subtree; with folderString empty (or naming
//     the datacenter's VM folder itself, whose subtree is every team's),
//     the VM folder's top level only (its direct VMs:
//     where every version of the hatchery has put its clones by default,
//     so an upgrade moves nothing and loses sight of nothing);
//   - each [[placements]] entry's own folder, subtree included (its
//     clones), as the hatchery's folder is;
//   - the template folders: templateFolders when set (subtrees included:
//     the operator's explicit scope, templates looked for there only);
//     unset, the VM folder's top level (where templates and VMs sit when
//     nothing else is said) and the folder of each template found by name
//     elsewhere (discoverVM: found), top level only.
//
// A folder of its own by default (created by the hatchery) was not chosen:
// it needs the Folder.Create privilege, it moves where clones land on an
// upgrade (the operator's permissions and tooling know the old place),
// and the VMs already made would have to be moved or watched apart. The
// VM folder's top level costs what other teams keep there: put their VMs
// in folders, or set folderString.

// TemplateFoldersSet tells whether templateFolders is set: the template
// folders are then the operator's and a template elsewhere is never used.
// Unset, the scope is derived (see above) and a template named but not
// in it is looked for by name (discoverVM).
func (c *Client) TemplateFoldersSet() bool { return len(c.cfg.TemplateFolders) > 0 }

// scopeRoot is one folder of the scope: its reference, the name errors
// use, and whether its subtree is included.
type scopeRoot struct {
	ref       types.ManagedObjectReference
	name      string
	recursive bool
}

// scopeRoots resolves the scope's folders, without duplicates (a template
// or placement folder that is the hatchery's own folder counts once). A folder nested
// in another is kept: its VMs come twice and callers drop the duplicates.
func (c *Client) scopeRoots(ctx context.Context) ([]scopeRoot, error) {
	folders, err := c.dc.Folders(ctx)
	if err != nil {
		return nil, fmt.Errorf("read folders of datacenter %q: %w", c.dc.Name(), err)
	}
	top := scopeRoot{ref: folders.VmFolder.Reference(), name: "the datacenter's VM folder (its top level)"}
	explicit := false // adding templateFolders entries
	var roots []scopeRoot
	add := func(r scopeRoot) {
		if r.ref == top.ref && !explicit {
			// The VM folder itself as the hatchery's or a placement's
			// folder: its subtree is every team's, its top level ours.
			r = top
		}
		for i, o := range roots {
			if o.ref == r.ref {
				roots[i].recursive = o.recursive || r.recursive
				return
			}
		}
		roots = append(roots, r)
	}
	switch {
	case c.cfg.Folder == "":
		add(top)
	case strings.HasPrefix(c.cfg.Folder, "/"):
		own, err := c.folderByPath(ctx, c.cfg.Folder, "folderString")
		if err != nil {
			return nil, err
		}
		add(scopeRoot{ref: own, name: c.cfg.Folder, recursive: true})
	default:
		own, err := c.loadFolder(ctx) // a name: the finder's search
		if err != nil {
			return nil, err
		}
		add(scopeRoot{ref: own, name: c.cfg.Folder, recursive: true})
	}
	// The [[placements]] entries' own folders: their clones live there.
	for i, p := range c.cfg.Placements {
		if p.Folder == "" {
			continue
		}
		var f types.ManagedObjectReference
		if strings.HasPrefix(p.Folder, "/") {
			f, err = c.folderByPath(ctx, p.Folder, fmt.Sprintf("placements[%d].folder", i))
		} else {
			f, err = c.folderAt(ctx, p.Folder) // a name: the finder's search
		}
		if err != nil {
			return nil, err
		}
		add(scopeRoot{ref: f, name: p.Folder, recursive: true})
	}
	if !c.TemplateFoldersSet() {
		add(top)
		c.vmsMu.Lock()
		found := slices.Clone(c.found)
		c.vmsMu.Unlock()
		for _, f := range found {
			add(scopeRoot{ref: f, name: "the folder of a template found by name (" + f.Value + ")"})
		}
		return roots, nil
	}
	for i, path := range c.cfg.TemplateFolders {
		f, err := c.folderByPath(ctx, path, fmt.Sprintf("templateFolders[%d]", i))
		if err != nil {
			return nil, err
		}
		explicit = true // the operator's own choice, whole VM folder included
		add(scopeRoot{ref: f, name: path, recursive: true})
	}
	return roots, nil
}

// folderByPath resolves the absolute inventory path of a folder with one
// SearchIndex.FindByInventoryPath, which returns a reference only. The
// finder would read every sibling folder on the way as a whole object
// (childEntity included: a reference per VM of each other team's
// folder). setting names the configuration key in errors.
func (c *Client) folderByPath(ctx context.Context, path, setting string) (types.ManagedObjectReference, error) {
	ref, err := object.NewSearchIndex(c.vim).FindByInventoryPath(ctx, strings.TrimPrefix(path, "/"))
	switch {
	case err != nil:
		return types.ManagedObjectReference{}, fmt.Errorf("find folder %q (%s): %w", path, setting, err)
	case ref == nil:
		return types.ManagedObjectReference{}, fmt.Errorf("find folder %q (%s): no such inventory path", path, setting)
	case ref.Reference().Type != "Folder":
		return types.ManagedObjectReference{}, fmt.Errorf("find folder %q (%s): it is a %s, not a folder", path, setting, ref.Reference().Type)
	}
	return ref.Reference(), nil
}

// newScopeViews creates one ContainerView of VMs per scope folder
// (recursive or not, as scopeRoot says). On error, the views already made are destroyed (best
// effort; they would die with the session anyway).
func (c *Client) newScopeViews(ctx context.Context) ([]*view.ContainerView, error) {
	roots, err := c.scopeRoots(ctx)
	if err != nil {
		return nil, err
	}
	m := view.NewManager(c.vim)
	views := make([]*view.ContainerView, 0, len(roots))
	for _, root := range roots {
		cv, err := m.CreateContainerView(ctx, root.ref, []string{"VirtualMachine"}, root.recursive)
		if err != nil {
			destroyViews(ctx, views)
			return nil, fmt.Errorf("create container view over %q: %w", root.name, err)
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
func scopeSpec(v *vmView, props []string) types.PropertyFilterSpec {
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

// retrieveScope reads props of every VM of the scope in one
// RetrievePropertiesEx (continued while vCenter pages), each VM once.
func (c *Client) retrieveScope(ctx context.Context, v *vmView, props []string) ([]mo.VirtualMachine, error) {
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

// findInScope finds a VM or template by name, or by inventory path, among
// the scope's VMs: one listing of the scope's names, plus a finder lookup
// for a path. None is ErrOutOfScope; several of that name ErrAmbiguous.
func (c *Client) findInScope(ctx context.Context, name string) (types.ManagedObjectReference, error) {
	var vms []mo.VirtualMachine
	for attempt := 0; ; attempt++ {
		v, err := c.vmContainerView(ctx)
		if err != nil {
			return types.ManagedObjectReference{}, err
		}
		vms, err = c.retrieveScope(ctx, v, []string{"name"})
		if err == nil {
			break
		}
		if attempt == 0 && isNotFound(err) {
			c.dropView(v) // lost with its session: once more
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
func (c *Client) vmByPath(ctx context.Context, name string) (types.ManagedObjectReference, error) {
	p := strings.TrimPrefix(name, "/")
	if !strings.HasPrefix(name, "/") {
		p = strings.TrimPrefix(c.dc.InventoryPath, "/") + "/vm/" + name
	}
	ref, err := object.NewSearchIndex(c.vim).FindByInventoryPath(ctx, p)
	switch {
	case err != nil:
		return types.ManagedObjectReference{}, fmt.Errorf("find vm %q: %w", name, err)
	case ref == nil || ref.Reference().Type != "VirtualMachine":
		return types.ManagedObjectReference{}, fmt.Errorf("%w: %q in datacenter %q", ErrNoSuchVM, name, c.dc.Name())
	}
	return ref.Reference(), nil
}

// discoverVM finds a VM (a template, in practice) by name or path outside
// the scope, templateFolders unset, without reading any other VM: a path
// is resolved by vmByPath; a name by one RetrieveProperties listing the VM
// folder's folders (the traversal passes through VMs but returns Folder
// objects only), then one SearchIndex.FindChild per folder, whose answer
// names only a VM of that name. Found and a template, its folder joins the scope (top
// level only: found) and the scope's views are made again at the next
// read, so that the inventory holds the template from then on and this
// search runs once per template and process. None is ErrNoSuchVM;
// several ErrAmbiguous.
func (c *Client) discoverVM(ctx context.Context, name string) (types.ManagedObjectReference, error) {
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
			return types.ManagedObjectReference{}, fmt.Errorf("%w: %q in any folder of datacenter %q", ErrNoSuchVM, name, c.dc.Name())
		case n > 1:
			return types.ManagedObjectReference{}, fmt.Errorf("%w: %d vms named %q in datacenter %q; give its inventory path", ErrAmbiguous, n, name, c.dc.Name())
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
	c.vmsMu.Lock()
	grown := !slices.Contains(c.found, folder)
	if grown {
		c.found = append(c.found, folder)
	}
	old := c.vmsView
	if grown {
		c.vmsView = nil
	}
	c.vmsMu.Unlock()
	if grown && old != nil {
		// A reader still on them fails once with not-found and makes the
		// new views (ListVirtualMachines, ProbeInventory).
		destroyViews(ctx, old.views)
	}
	c.log.Info("template found outside the hatchery's folder: its folder joins the inventory's scope", logkey.VM, name, "folder", folder.Value)
	return ref, nil
}

// vmFolders lists the folders of the datacenter's VM folder, itself
// included, in one RetrieveProperties whose answer holds Folder objects
// only (their names; no VM is returned).
func (c *Client) vmFolders(ctx context.Context) ([]types.ManagedObjectReference, error) {
	dcf, err := c.dc.Folders(ctx)
	if err != nil {
		return nil, fmt.Errorf("read folders of datacenter %q: %w", c.dc.Name(), err)
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
		return nil, fmt.Errorf("list vm folders of datacenter %q: %w", c.dc.Name(), err)
	}
	out := make([]types.ManagedObjectReference, 0, len(res.Returnval))
	for _, oc := range res.Returnval {
		if oc.Obj.Type == "Folder" {
			out = append(out, oc.Obj)
		}
	}
	return out, nil
}

// ErrOutOfScope is wrapped by LoadVirtualMachine's error when templateFolders
// is set and no VM of that name (or path) is in the hatchery's folder or
// templateFolders: a VM elsewhere in the datacenter is never used.
var ErrOutOfScope = errors.New("not in the hatchery's folder or template folders")

// ErrNoSuchVM is wrapped by LoadVirtualMachine's error when templateFolders
// is unset and no VM of that name (or path) is in any folder of the
// datacenter.
var ErrNoSuchVM = errors.New("no such vm")
