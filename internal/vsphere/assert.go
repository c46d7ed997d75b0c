package vsphere

import "github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"

// The hatchery implements the framework's interface.
var _ hatchery.InterfaceWithModels = (*HatcheryVSphere)(nil)

// Its admission hands the framework what it reserved.
var _ hatchery.ResourceAllocator = (*HatcheryVSphere)(nil)
