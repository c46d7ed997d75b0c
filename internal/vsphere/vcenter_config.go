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
		MaxConcurrentTasks: c.MaxConcurrentTasks,
	}
}
