package daemon

import (
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
)

// VCenterConfig maps the hatchery configuration to the vCenter adapter's
// configuration (internal/vcenter imports no configuration package). The
// daemon wires the client with it, and `config check --online` dials with
// it (cmd/hatchery-vsphere).
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

// SOAPCounts converts the adapter's per-method SOAP counters to what the
// metrics collector reads (metrics.Metrics.SOAP): requests, and request plus
// response body bytes.
func SOAPCounts(s vcenter.SOAPStats) map[string]metrics.SOAPCount {
	out := make(map[string]metrics.SOAPCount, len(s))
	for method, m := range s {
		out[method] = metrics.SOAPCount{Requests: m.Requests, Bytes: m.RequestBytes + m.ResponseBytes}
	}
	return out
}

// SOAPHook returns the metrics.Metrics.SOAP hook of a client: a snapshot of its
// cumulative SOAP counters by method, for cds/hatchery/vsphere/soap_requests
// and soap_bytes. Run wires it once, before the metrics loop starts.
func SOAPHook(c *vcenter.Client) func() map[string]metrics.SOAPCount {
	return func() map[string]metrics.SOAPCount { return SOAPCounts(c.Stats()) }
}
