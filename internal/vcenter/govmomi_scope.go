package vcenter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// The inventory's scope (docs/inventory-watch.md, "Scope"): the folders
// whose VMs the inventory lists and probes, and where LoadVirtualMachine
// looks for a template. Unscoped (Config.TemplateFolders empty), it is the
// datacenter's VM folder: every VM, as before templateFolders existed.
// Scoped, it is the folder new VMs go to (LoadFolder), each [[placements]]
// entry's own folder (Config.Placements) and each template folder,
// subtrees included: VMs elsewhere (other teams' folders on a
// shared vCenter) are never listed, probed, read nor watched, so the
// inventory's idle cost follows the hatchery's VMs, not the datacenter's.

// Scoped tells whether the client's inventory is limited to its folder and
// Config.TemplateFolders.
func (c *Client) Scoped() bool { return len(c.cfg.TemplateFolders) > 0 }

// scopeRoots resolves the scope's folders, without duplicates (a template
// or placement folder that is the hatchery's own folder counts once). A folder nested
// in another is kept: its VMs come twice and callers drop the duplicates.
func (c *Client) scopeRoots(ctx context.Context) ([]types.ManagedObjectReference, []string, error) {
	if !c.Scoped() {
		folders, err := c.dc.Folders(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("read folders of datacenter %q: %w", c.dc.Name(), err)
		}
		return []types.ManagedObjectReference{folders.VmFolder.Reference()}, []string{folders.VmFolder.InventoryPath}, nil
	}
	var own types.ManagedObjectReference
	var err error
	if strings.HasPrefix(c.cfg.Folder, "/") {
		own, err = c.folderByPath(ctx, c.cfg.Folder, "folderString")
	} else {
		own, err = c.loadFolder(ctx) // a name: the finder's search
	}
	if err != nil {
		return nil, nil, err
	}
	ownName := c.cfg.Folder
	if ownName == "" {
		ownName = "the datacenter's VM folder"
	}
	refs := []types.ManagedObjectReference{own}
	names := []string{ownName}
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
			return nil, nil, err
		}
		if !slices.Contains(refs, f) {
			refs = append(refs, f)
			names = append(names, p.Folder)
		}
	}
	for i, path := range c.cfg.TemplateFolders {
		f, err := c.folderByPath(ctx, path, fmt.Sprintf("templateFolders[%d]", i))
		if err != nil {
			return nil, nil, err
		}
		if !slices.Contains(refs, f) {
			refs = append(refs, f)
			names = append(names, path)
		}
	}
	return refs, names, nil
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
// (recursive). On error, the views already made are destroyed (best
// effort; they would die with the session anyway).
func (c *Client) newScopeViews(ctx context.Context) ([]*view.ContainerView, error) {
	roots, names, err := c.scopeRoots(ctx)
	if err != nil {
		return nil, err
	}
	m := view.NewManager(c.vim)
	views := make([]*view.ContainerView, 0, len(roots))
	for i, root := range roots {
		cv, err := m.CreateContainerView(ctx, root, []string{"VirtualMachine"}, true)
		if err != nil {
			destroyViews(ctx, views)
			return nil, fmt.Errorf("create container view over %q: %w", names[i], err)
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
// the scope's VMs (scoped clients only): one listing of the scope's names,
// plus a finder lookup for a path. None, or several of that name, is an
// error naming templateFolders.
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
		return types.ManagedObjectReference{}, fmt.Errorf("list vm names of the hatchery's folder and templateFolders: %w", err)
	}
	if strings.Contains(name, "/") {
		vm, err := c.find().VirtualMachine(ctx, name)
		if err != nil {
			return types.ManagedObjectReference{}, err
		}
		if !slices.ContainsFunc(vms, func(o mo.VirtualMachine) bool { return o.Self == vm.Reference() }) {
			return types.ManagedObjectReference{}, fmt.Errorf("%w: %q is outside the hatchery's folder and templateFolders", ErrOutOfScope, name)
		}
		return vm.Reference(), nil
	}
	var found []types.ManagedObjectReference
	for _, o := range vms {
		if o.Name == name {
			found = append(found, o.Self)
		}
	}
	switch len(found) {
	case 0:
		return types.ManagedObjectReference{}, fmt.Errorf("%w: no vm named %q in the hatchery's folder or templateFolders", ErrOutOfScope, name)
	case 1:
		return found[0], nil
	default:
		return types.ManagedObjectReference{}, fmt.Errorf("%w: %d vms named %q in the hatchery's folder and templateFolders; give its inventory path", ErrAmbiguous, len(found), name)
	}
}

// ErrOutOfScope is wrapped by LoadVirtualMachine's error when a scoped
// client finds no VM of that name (or path) in its folder and
// templateFolders: a VM elsewhere in the datacenter is never used.
var ErrOutOfScope = errors.New("not in the hatchery's folder or templateFolders")
