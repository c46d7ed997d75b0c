package vcenter

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// loadFolder returns the folder new VMs go to: Folder (folderString, an
// inventory path or name) else the datacenter's VM folder. A folder that
// does not exist, or several, is a *PlacementError listing the candidates,
// cached with a back-off (placementCache). It is FolderAt("").
func (c *Client) loadFolder(ctx context.Context) (types.ManagedObjectReference, error) {
	return c.folderAt(ctx, "")
}

// loadResourcePool returns the pool new VMs go to: ResourcePool
// (resourcePoolString, an inventory path or name), else the first
// [[placements]] entry's pool (defaultPoolPath), else the datacenter's
// default pool. None or several candidates are a *PlacementError naming
// the setting and the candidates (ErrAmbiguous when several), cached
// with a back-off (placementCache). It is ResourcePoolAt("").
func (c *Client) loadResourcePool(ctx context.Context) (types.ManagedObjectReference, error) {
	return c.resourcePoolAt(ctx, "")
}

// loadNetwork finds a network by name or path; "" is the default network.
func (c *Client) loadNetwork(ctx context.Context, name string) (object.NetworkReference, error) {
	return cachedLookup(ctx, c.placement, "network", name, func() (object.NetworkReference, error) {
		var n object.NetworkReference
		var err error
		if name == "" {
			n, err = c.findNames().DefaultNetwork(ctx)
		} else {
			n, err = c.findNames().Network(ctx, name)
		}
		if err != nil {
			return nil, c.unresolved(ctx, err, "network", c.placementSetting("network", name), name, c.networkPaths)
		}
		return n, nil
	})
}

// loadDatastore finds a datastore by name or path; "" is the default
// datastore. None or several are a *PlacementError (see LoadResourcePool).
func (c *Client) loadDatastore(ctx context.Context, name string) (types.ManagedObjectReference, error) {
	if err := c.notConnected(); err != nil {
		return types.ManagedObjectReference{}, err
	}
	d, err := cachedLookup(ctx, c.placement, "datastore", name, func() (*object.Datastore, error) {
		var d *object.Datastore
		var err error
		if name == "" {
			d, err = c.findNames().DefaultDatastore(ctx)
		} else {
			d, err = c.findNames().Datastore(ctx, name)
		}
		if err != nil {
			return nil, c.unresolved(ctx, err, "datastore", c.placementSetting("datastore", name), name, c.datastorePaths)
		}
		return d, nil
	})
	if err != nil {
		return types.ManagedObjectReference{}, err
	}
	return d.Reference(), nil
}

// SetupEthernetCard sets card's backing to the network named networkName
// ("" is the default network), as a card of type ethernetCardName (e.g.
// "vmxnet3", "e1000").
func (c *Client) SetupEthernetCard(ctx context.Context, card *types.VirtualEthernetCard, ethernetCardName, networkName string) error {
	if err := c.notConnected(); err != nil {
		return err
	}
	if card == nil {
		return errors.New("set up ethernet card: nil card")
	}
	network, err := c.loadNetwork(ctx, networkName)
	if err != nil {
		return err
	}
	// The backing names the network (one round trip for a standard
	// network, more for a distributed port group): cached with the
	// placement, shared read-only by the clone specs that use it.
	ref := network.Reference()
	backing, err := cachedLookup(ctx, c.placement, "backing", ref.Type+":"+ref.Value, func() (types.BaseVirtualDeviceBackingInfo, error) {
		return network.EthernetCardBackingInfo(ctx)
	})
	if err != nil {
		return fmt.Errorf("read backing of network %q: %w", network.GetInventoryPath(), err)
	}
	device, err := object.EthernetCardTypes().CreateEthernetCard(ethernetCardName, backing)
	if err != nil {
		return fmt.Errorf("create ethernet card %q: %w", ethernetCardName, err)
	}
	card.Backing = device.(types.BaseVirtualEthernetCard).GetVirtualEthernetCard().Backing
	return nil
}

// resourcePoolRuntime reads the pool's runtime.
func (c *Client) resourcePoolRuntime(ctx context.Context, pool types.ManagedObjectReference) (*types.ResourcePoolRuntimeInfo, error) {
	if err := c.notConnected(); err != nil {
		return nil, err
	}
	var p mo.ResourcePool
	if err := c.pc.RetrieveOne(ctx, pool, []string{"runtime"}, &p); err != nil {
		return nil, fmt.Errorf("read runtime of resource pool %q: %w", pool.Value, err)
	}
	return &p.Runtime, nil
}

// ErrAmbiguous marks a placement setting that resolves to several objects
// (or none was set and the datacenter has several; the *PlacementError
// saying so wraps it), or a VM name several VMs bear: vim.ErrAmbiguous.
var ErrAmbiguous = vim.ErrAmbiguous

// unresolved turns a finder's answer that no object, or several, match
// value into a *PlacementError of setting, listing the candidates: the
// matches when several matched, else what paths lists (the objects of that
// kind), each bounded by vim.MaxCandidates. Other errors (transport, context)
// are returned as they are. The listing is one more walk of the
// inventory's names; the error it builds is cached with a back-off.
func (c *Client) unresolved(ctx context.Context, err error, what, setting, value string, paths func(ctx context.Context, pattern string) ([]string, error)) error {
	var dm find.DefaultMultipleFoundError
	var dmp *find.DefaultMultipleFoundError
	var mf *find.MultipleFoundError
	var nf *find.NotFoundError
	var dnf *find.DefaultNotFoundError
	pe := &PlacementError{What: what, Setting: setting, Value: value, Err: err}
	var listed []string
	var lerr error
	switch {
	case errors.As(err, &dm) || errors.As(err, &dmp) || errors.As(err, &mf):
		pe.Ambiguous = true
		pe.Err = fmt.Errorf("%w: %w", ErrAmbiguous, err)
		listed, lerr = paths(ctx, value)
	case errors.As(err, &nf) || errors.As(err, &dnf):
		listed, lerr = paths(ctx, "")
	default:
		return err
	}
	if lerr != nil {
		c.log.Debug("list candidates of a placement setting", "setting", setting, logkey.Err, lerr)
	}
	sort.Strings(listed)
	pe.Candidates, pe.More = vim.Bounded(listed)
	return pe
}

// findNames returns a finder scoped to the datacenter that reads only what
// a lookup needs of each object it walks (its name, and the links it
// follows), not whole objects: govmomi's finder built with all = true
// read every property of each host and cluster it passed (~840 KB per
// lookup of the default pool at 1,000 VMs).
func (c *Client) findNames() *find.Finder {
	f := find.NewFinder(c.vim, false)
	if c.dc != nil {
		f.SetDatacenter(c.dc)
	}
	return f
}

// poolPaths lists the inventory paths of the resource pools pattern
// matches, or ("") the root pools of the datacenter's hosts and clusters
// and their children.
func (c *Client) poolPaths(ctx context.Context, pattern string) ([]string, error) {
	patterns := []string{pattern}
	if pattern == "" {
		patterns = []string{"*/Resources", "*/Resources/*"}
	}
	var out []string
	var errs []error
	for _, p := range patterns {
		ps, err := c.findNames().ResourcePoolList(ctx, p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, rp := range ps {
			out = append(out, rp.InventoryPath)
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	return nil, errors.Join(errs...)
}

// folderPaths lists the folders pattern matches, or ("") the folders of
// the datacenter's VM folder.
func (c *Client) folderPaths(ctx context.Context, pattern string) ([]string, error) {
	if pattern == "" {
		folders, err := c.dc.Folders(ctx)
		if err != nil {
			return nil, fmt.Errorf("read vm folder of datacenter %q: %w", c.dc.Name(), err)
		}
		pattern = folders.VmFolder.InventoryPath + "/*"
	}
	fs, err := c.findNames().FolderList(ctx, pattern)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		out = append(out, f.InventoryPath)
	}
	return out, nil
}

// datastorePaths lists the datastores pattern matches ("": all).
func (c *Client) datastorePaths(ctx context.Context, pattern string) ([]string, error) {
	if pattern == "" {
		pattern = "*"
	}
	ds, err := c.findNames().DatastoreList(ctx, pattern)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(ds))
	for _, d := range ds {
		out = append(out, d.InventoryPath)
	}
	return out, nil
}

// networkPaths lists the networks pattern matches ("": all).
func (c *Client) networkPaths(ctx context.Context, pattern string) ([]string, error) {
	if pattern == "" {
		pattern = "*"
	}
	ns, err := c.findNames().NetworkList(ctx, pattern)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(ns))
	for _, n := range ns {
		out = append(out, n.GetInventoryPath())
	}
	return out, nil
}
