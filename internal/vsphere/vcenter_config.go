package vsphere

import (
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
)

// VCenterConfig maps the hatchery configuration to the vCenter adapter's
// configuration (internal/vcenter imports no configuration package).
func VCenterConfig(c *config.Config) vcenter.Config {
	return vcenter.Config{
		Endpoint:           c.Endpoint,
		User:               c.User,
		Password:           c.Password,
		Insecure:           c.Insecure,
		CAFile:             c.CAFile,
		Datacenter:         c.DatacenterString,
		ResourcePool:       c.ResourcePoolString,
		Folder:             c.FolderString,
		TemplateFolders:    c.TemplateFolders,
		Placements:         placementKeys(c),
		MaxConcurrentTasks: c.MaxConcurrentTasks,
	}
}

// placementKeys are the keys each [[placements]] entry sets itself, by
// index (nil without entries: the top-level keys are the one placement).
// A folder or network the entry inherits from folderString or
// networkString (EffectivePlacements) is left empty, so that a problem
// of it is reported under the top-level key the operator wrote.
func placementKeys(c *config.Config) []vcenter.PlacementKeys {
	if len(c.Placements) == 0 {
		return nil
	}
	eff := c.EffectivePlacements()
	out := make([]vcenter.PlacementKeys, len(eff))
	for i, p := range eff {
		k := vcenter.PlacementKeys{ResourcePool: p.ResourcePool, Datastores: p.Datastores}
		if c.Placements[i].Folder != "" {
			k.Folder = p.Folder
		}
		if c.Placements[i].Network != "" {
			k.Network = p.Network
		}
		out[i] = k
	}
	return out
}
