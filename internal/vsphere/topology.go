package vsphere

import (
	"context"
	"fmt"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
)

// TopologyRequest is what vcenter.Client.CheckTopology resolves for c
// besides the pool and folder of the client's own configuration
// (VCenterConfig): the datastore, the network and every template the
// configuration names, each with its key relative to config.KeyPrefix
// (the V2 templates of guestCredentials / models entries and of V2 warm
// pools; a V1 model's template is built by its registration, and the
// image it is built from is the model's, read from the CDS API), and the
// features whose privileges are checked.
func TopologyRequest(c *config.Config) vcenter.TopologyRequest {
	req := vcenter.TopologyRequest{
		Datastore:       c.DatastoreString,
		Network:         c.NetworkString,
		StaticIPs:       c.IPRange != "" || len(c.Networks) > 0,
		BuildsTemplates: c.CommonConfiguration.API.Token != "",
	}
	for _, f := range c.Flavors {
		if f.DiskSizeGB > 0 {
			req.GrowsDisks = true
		}
	}
	add := func(key, name string) {
		if name != "" {
			req.Templates = append(req.Templates, vcenter.ConfiguredTemplate{Key: key, Name: name})
		}
	}
	for i, g := range c.GuestCredentials {
		add(fmt.Sprintf("guestCredentials[%d].modelVMWare", i), g.ModelVMWare)
	}
	for _, g := range append(append([]config.GuestCredential(nil), c.GuestCredentials...), c.Models...) {
		if g.IsInstant() {
			req.InstantClones = true
		}
	}
	for i, g := range c.Models {
		add(fmt.Sprintf("models[%d].modelVMWare", i), g.ModelVMWare)
	}
	for i, w := range c.WorkerProvisioning {
		add(fmt.Sprintf("workerProvisioning[%d].modelVMWare", i), w.ModelVMWare)
	}
	return req
}

// CheckTopology checks c's topology on vCenter through vc (connected):
// every problem as a config.FieldError with its full key path, and the
// notes on what vCenter could not say. Its error is a failure to ask.
func CheckTopology(ctx context.Context, vc *vcenter.Client, c *config.Config) (config.Errors, vcenter.TopologyReport, error) {
	rep, err := vc.CheckTopology(ctx, TopologyRequest(c))
	var es config.Errors
	for _, p := range rep.Problems {
		es = append(es, config.FieldError{Key: config.KeyPrefix + "." + p.Key, Problem: p.Problem})
	}
	return es, rep, err
}
