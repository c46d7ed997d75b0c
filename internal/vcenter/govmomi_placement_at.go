package vcenter

import (
	"context"
	"errors"
	"fmt"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// PlacementKeys is what one [[placements]] entry names itself (empty
// where the entry inherits a top-level key): a lookup of one of these
// values reports its problem under the entry's key path
// (placements[i].resourcePool, placements[i].datastores[j],
// placements[i].folder, placements[i].network) instead of the top-level
// key (Config.Placements, placementSetting).
type PlacementKeys struct {
	ResourcePool string
	Datastores   []string
	Folder       string
	Network      string
}

// folderAt the VM folder at path (an inventory path
// or name); "" is LoadFolder's folder (Folder, else the datacenter's VM
// folder). None or several are a *PlacementError naming the key that
// holds path (placementSetting), cached with a back-off as LoadFolder's.
func (c *Client) folderAt(ctx context.Context, path string) (types.ManagedObjectReference, error) {
	if err := c.notConnected(); err != nil {
		return types.ManagedObjectReference{}, err
	}
	if path == "" {
		path = c.cfg.Folder
	}
	f, err := cachedLookup(ctx, c.placement, "folder", path, func() (*object.Folder, error) {
		if path == "" {
			folders, err := c.dc.Folders(ctx)
			if err != nil {
				return nil, fmt.Errorf("read vm folder of datacenter %q: %w", c.dc.Name(), err)
			}
			return folders.VmFolder, nil
		}
		f, err := c.findNames().Folder(ctx, path)
		if err != nil {
			return nil, c.unresolved(ctx, err, "folder", c.placementSetting("folder", path), path, c.folderPaths)
		}
		return f, nil
	})
	if err != nil {
		return types.ManagedObjectReference{}, err
	}
	return f.Reference(), nil
}

// resourcePoolAt the resource pool at path, a
// pool's inventory path or name, or a cluster's (or standalone host's)
// path or name, which stands for its root pool
// (ComputeResource.resourcePool); "" is LoadResourcePool's pool
// (defaultPoolPath: ResourcePool, else the first [[placements]] entry's
// pool, else the datacenter's default pool). None or several are
// a *PlacementError naming the key that holds path (placementSetting) and
// the candidates (ErrAmbiguous when several), cached with a back-off.
func (c *Client) resourcePoolAt(ctx context.Context, path string) (types.ManagedObjectReference, error) {
	if err := c.notConnected(); err != nil {
		return types.ManagedObjectReference{}, err
	}
	if path == "" {
		path = c.defaultPoolPath()
	}
	p, err := cachedLookup(ctx, c.placement, "pool", path, func() (*object.ResourcePool, error) {
		setting := c.placementSetting("pool", path)
		if path == "" {
			p, err := c.findNames().DefaultResourcePool(ctx)
			if err != nil {
				return nil, c.unresolved(ctx, err, "resource pool", setting, "", c.poolPaths)
			}
			return p, nil
		}
		// A pool's path, or a compute resource's path (the finder lists
		// its root pool as its contents).
		p, err := c.findNames().ResourcePool(ctx, path)
		var nf *find.NotFoundError
		if errors.As(err, &nf) {
			// A cluster's or host's name (not a path): its root pool.
			if rp, cerr := c.computeResourcePool(ctx, path); cerr == nil {
				return rp, nil
			} else if !errors.As(cerr, &nf) {
				return nil, c.unresolved(ctx, cerr, "resource pool", setting, path, c.poolPaths)
			}
		}
		if err != nil {
			return nil, c.unresolved(ctx, err, "resource pool", setting, path, c.poolPaths)
		}
		return p, nil
	})
	if err != nil {
		return types.ManagedObjectReference{}, err
	}
	return p.Reference(), nil
}

// defaultPoolPath is the pool "" stands for: ResourcePool
// (resourcePoolString) when set; else, with [[placements]] entries (which
// leave resourcePoolString unset), the first entry's pool, so that the
// readers of "the hatchery's pool" (the inventory's probe, the resource
// pool gauges) read a pool the hatchery clones to rather than the
// datacenter's default pool, which is ambiguous on most datacenters and
// would be logged as a topology problem nothing configured; else "" (the
// datacenter's default pool).
func (c *Client) defaultPoolPath() string {
	if c.cfg.ResourcePool != "" || len(c.cfg.Placements) == 0 {
		return c.cfg.ResourcePool
	}
	return c.cfg.Placements[0].ResourcePool
}

// computeResourcePool returns the root resource pool of the compute
// resource (a cluster or a standalone host) at path: one finder walk and
// one read of its resourcePool.
func (c *Client) computeResourcePool(ctx context.Context, path string) (*object.ResourcePool, error) {
	cr, err := c.findNames().ComputeResource(ctx, path)
	if err != nil {
		return nil, err
	}
	var m mo.ComputeResource
	if err := c.pc.RetrieveOne(ctx, cr.Reference(), []string{"resourcePool"}, &m); err != nil {
		return nil, fmt.Errorf("read root pool of %q: %w", cr.InventoryPath, err)
	}
	if m.ResourcePool == nil {
		return nil, &find.NotFoundError{}
	}
	rp := object.NewResourcePool(c.vim, *m.ResourcePool)
	rp.InventoryPath = cr.InventoryPath + "/Resources"
	return rp, nil
}

// datastoreSpace reads the datastore's summary (name,
// free space, capacity, accessibility) in one RetrieveProperties, read
// fresh at each call (never cached: it moves with every clone), bounded
// by the request timeout.
func (c *Client) datastoreSpace(ctx context.Context, ds types.ManagedObjectReference) (*types.DatastoreSummary, error) {
	if err := c.notConnected(); err != nil {
		return nil, err
	}
	var d mo.Datastore
	if err := c.pc.RetrieveOne(ctx, ds, []string{"summary"}, &d); err != nil {
		return nil, fmt.Errorf("read space of datastore %q: %w", ds.Value, err)
	}
	return &d.Summary, nil
}

// placementSetting is the configuration key whose value a lookup of kind
// ("pool", "folder", "datastore", "network") resolves: the first
// [[placements]] entry naming value for that kind
// ("placements[1].resourcePool", "placements[0].datastores[2]"), else the
// top-level key (settingOf).
func (c *Client) placementSetting(kind, value string) string {
	if value != "" {
		for i, p := range c.cfg.Placements {
			switch kind {
			case "pool":
				if p.ResourcePool == value {
					return fmt.Sprintf("placements[%d].resourcePool", i)
				}
			case "folder":
				if p.Folder == value {
					return fmt.Sprintf("placements[%d].folder", i)
				}
			case "network":
				if p.Network == value {
					return fmt.Sprintf("placements[%d].network", i)
				}
			case "datastore":
				for j, d := range p.Datastores {
					if d == value {
						return fmt.Sprintf("placements[%d].datastores[%d]", i, j)
					}
				}
			}
		}
	}
	return settingOf(kind)
}
