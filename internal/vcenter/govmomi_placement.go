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

// LoadFolder returns the folder new VMs go to: Folder (folderString, an
// inventory path or name) else the datacenter's VM folder.
func (c *Client) LoadFolder(ctx context.Context) (types.ManagedObjectReference, error) {
	if err := c.notConnected(); err != nil {
		return types.ManagedObjectReference{}, err
	}
	f, err := cachedLookup(ctx, c.placement, "folder", c.cfg.Folder, func() (*object.Folder, error) {
		if c.cfg.Folder == "" {
			folders, err := c.dc.Folders(ctx)
			if err != nil {
				return nil, fmt.Errorf("read vm folder of datacenter %q: %w", c.dc.Name(), err)
			}
			return folders.VmFolder, nil
		}
		f, err := c.find().Folder(ctx, c.cfg.Folder)
		if err != nil {
			return nil, fmt.Errorf("find folder %q (folderString): %w", c.cfg.Folder, ambiguity(err, "folderString"))
		}
		return f, nil
	})
	if err != nil {
		return types.ManagedObjectReference{}, err
	}
	return f.Reference(), nil
}

// LoadResourcePool returns the pool new VMs go to: ResourcePool
// (resourcePoolString, an inventory path or name) else the datacenter's
// default pool. Several candidates are an error naming the setting.
func (c *Client) LoadResourcePool(ctx context.Context) (types.ManagedObjectReference, error) {
	if err := c.notConnected(); err != nil {
		return types.ManagedObjectReference{}, err
	}
	p, err := cachedLookup(ctx, c.placement, "pool", c.cfg.ResourcePool, func() (*object.ResourcePool, error) {
		if c.cfg.ResourcePool == "" {
			p, err := c.find().DefaultResourcePool(ctx)
			if err != nil {
				return nil, fmt.Errorf("find default resource pool of datacenter %q: %w", c.dc.Name(), ambiguity(err, "resourcePoolString"))
			}
			return p, nil
		}
		p, err := c.find().ResourcePool(ctx, c.cfg.ResourcePool)
		if err != nil {
			return nil, fmt.Errorf("find resource pool %q (resourcePoolString): %w", c.cfg.ResourcePool, ambiguity(err, "resourcePoolString"))
		}
		return p, nil
	})
	if err != nil {
		return types.ManagedObjectReference{}, err
	}
	return p.Reference(), nil
}

// loadNetwork finds a network by name or path; "" is the default network.
func (c *Client) loadNetwork(ctx context.Context, name string) (object.NetworkReference, error) {
	return cachedLookup(ctx, c.placement, "network", name, func() (object.NetworkReference, error) {
		if name == "" {
			n, err := c.find().DefaultNetwork(ctx)
			if err != nil {
				return nil, fmt.Errorf("find default network of datacenter %q: %w", c.dc.Name(), ambiguity(err, "networkString"))
			}
			return n, nil
		}
		n, err := c.find().Network(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("find network %q: %w", name, ambiguity(err, "networkString"))
		}
		return n, nil
	})
}

// LoadDatastore finds a datastore by name or path; "" is the default datastore.
func (c *Client) LoadDatastore(ctx context.Context, name string) (types.ManagedObjectReference, error) {
	if err := c.notConnected(); err != nil {
		return types.ManagedObjectReference{}, err
	}
	d, err := cachedLookup(ctx, c.placement, "datastore", name, func() (*object.Datastore, error) {
		if name == "" {
			d, err := c.find().DefaultDatastore(ctx)
			if err != nil {
				return nil, fmt.Errorf("find default datastore of datacenter %q: %w", c.dc.Name(), ambiguity(err, "datastoreString"))
			}
			return d, nil
		}
		d, err := c.find().Datastore(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("find datastore %q: %w", name, ambiguity(err, "datastoreString"))
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

// ResourcePoolRuntime reads the pool's runtime.
func (c *Client) ResourcePoolRuntime(ctx context.Context, pool types.ManagedObjectReference) (*types.ResourcePoolRuntimeInfo, error) {
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
// (or none was set and the datacenter has several).
var ErrAmbiguous = errors.New("ambiguous vsphere placement")

// ambiguity adds a hint naming setting when err says several objects match.
func ambiguity(err error, setting string) error {
	var dm find.DefaultMultipleFoundError
	var dmp *find.DefaultMultipleFoundError
	var mf *find.MultipleFoundError
	if errors.As(err, &dm) || errors.As(err, &dmp) || errors.As(err, &mf) {
		return fmt.Errorf("%w: %w; set %s to one inventory path", ErrAmbiguous, err, setting)
	}
	return err
}
