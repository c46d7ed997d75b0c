package vcenter

import (
	"context"
	"fmt"
	"strings"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/vmware/govmomi/object"
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

// scopeRoots resolves the scope's folders (the collector's
// CollectorConfig.Roots: it makes a view over each), without duplicates (a template
// or placement folder that is the hatchery's own folder counts once). A folder nested
// in another is kept: its VMs come twice and callers drop the duplicates.
func (c *Client) scopeRoots(ctx context.Context) ([]vim.ScopeRoot, error) {
	folders, err := c.dc.Folders(ctx)
	if err != nil {
		return nil, fmt.Errorf("read folders of datacenter %q: %w", c.dc.Name(), err)
	}
	top := vim.ScopeRoot{Ref: folders.VmFolder.Reference(), Name: "the datacenter's VM folder (its top level)"}
	explicit := false // adding templateFolders entries
	var roots []vim.ScopeRoot
	add := func(r vim.ScopeRoot) {
		if r.Ref == top.Ref && !explicit {
			// The VM folder itself as the hatchery's or a placement's
			// folder: its subtree is every team's, its top level ours.
			r = top
		}
		for i, o := range roots {
			if o.Ref == r.Ref {
				roots[i].Recursive = o.Recursive || r.Recursive
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
		add(vim.ScopeRoot{Ref: own, Name: c.cfg.Folder, Recursive: true})
	default:
		own, err := c.loadFolder(ctx) // a name: the finder's search
		if err != nil {
			return nil, err
		}
		add(vim.ScopeRoot{Ref: own, Name: c.cfg.Folder, Recursive: true})
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
		add(vim.ScopeRoot{Ref: f, Name: p.Folder, Recursive: true})
	}
	if !c.TemplateFoldersSet() {
		add(top)
		for _, f := range c.col.Found() {
			add(vim.ScopeRoot{Ref: f, Name: "the folder of a template found by name (" + f.Value + ")"})
		}
		return roots, nil
	}
	for i, path := range c.cfg.TemplateFolders {
		f, err := c.folderByPath(ctx, path, fmt.Sprintf("templateFolders[%d]", i))
		if err != nil {
			return nil, err
		}
		explicit = true // the operator's own choice, whole VM folder included
		add(vim.ScopeRoot{Ref: f, Name: path, Recursive: true})
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

// ErrOutOfScope is wrapped by LoadVirtualMachine's error when templateFolders
// is set and no VM of that name (or path) is in the hatchery's folder or
// templateFolders: a VM elsewhere in the datacenter is never used
// (vim.ErrOutOfScope).
var ErrOutOfScope = vim.ErrOutOfScope

// ErrNoSuchVM is wrapped by LoadVirtualMachine's error when templateFolders
// is unset and no VM of that name (or path) is in any folder of the
// datacenter (vim.ErrNoSuchVM).
var ErrNoSuchVM = vim.ErrNoSuchVM
