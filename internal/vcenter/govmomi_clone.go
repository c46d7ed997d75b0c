package vcenter

import (
	"context"
	"fmt"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// LoadTemplate reads what a clone needs of template (devices and
// snapshots, one RetrievePropertiesEx) in the project's terms; the read
// is kept (templateDevicesTTL) for the template's clones.
func (c *Client) LoadTemplate(ctx context.Context, template vctypes.Ref) (vctypes.Template, error) {
	info, err := c.templates.Load(ctx, vim.MORef(template), c.readTemplateInfo)
	if err != nil {
		return vctypes.Template{}, Classify(err)
	}
	return info.Template, nil
}

// readTemplateInfo reads a template's devices and snapshots.
func (c *Client) readTemplateInfo(ctx context.Context, template types.ManagedObjectReference) (vim.TemplateInfo, error) {
	o, err := c.readTemplate(ctx, template)
	if err != nil {
		return vim.TemplateInfo{}, err
	}
	info := vim.TemplateInfo{Template: vim.TemplateOf(template, o)}
	if o.Config != nil {
		info.Devices = object.VirtualDeviceList(o.Config.Hardware.Device)
	}
	return info, nil
}

// CloneVirtualMachine makes req's clone: its specification built from
// req and the template's devices (cloneSpec; a failure there is a
// *vctypes.PrepError, nothing sent), then the clone task
// (cloneTaskTimeout). A failed clone drops what was kept of the template
// (it may have changed). Errors are classified.
func (c *Client) CloneVirtualMachine(ctx context.Context, req vctypes.Clone) (vctypes.Ref, error) {
	if err := c.notConnected(); err != nil {
		return vctypes.Ref{}, err
	}
	template := vim.MORef(req.Template)
	spec, err := c.cloneSpec(ctx, req)
	if err != nil {
		c.templates.Forget(template)
		return vctypes.Ref{}, Classify(err)
	}
	ref, err := c.cloneVirtualMachine(ctx, template, vim.MORef(req.Folder), req.Name, spec)
	if err != nil {
		c.templates.Forget(template)
		return vctypes.Ref{}, Classify(err)
	}
	return vim.RefOf(*ref), nil
}

// cloneSpec builds req's specification: the template's devices (kept, or
// read), its first card moved to req's network (the backing read,
// SetupEthernetCard), the rest from req (vim.CloneSpecOf). Every failure is a
// *vctypes.PrepError naming its step.
func (c *Client) cloneSpec(ctx context.Context, req vctypes.Clone) (*types.VirtualMachineCloneSpec, error) {
	info, err := c.templates.Load(ctx, vim.MORef(req.Template), c.readTemplateInfo)
	if err != nil {
		return nil, &vctypes.PrepError{Step: "load template", Err: Classify(err)}
	}
	spec, card, err := vim.CloneSpecOf(req, info.Devices)
	if err != nil {
		return nil, &vctypes.PrepError{Step: "prepare clone spec", Err: err}
	}
	if req.Network != nil {
		if err := c.SetupEthernetCard(ctx, card, req.Network.CardType, req.Network.Name); err != nil {
			return nil, &vctypes.PrepError{Step: fmt.Sprintf("set up network card on network %q", req.Network.Name), Err: Classify(err)}
		}
	}
	c.log.Debug("clone spec", logkey.VM, req.Name, "linked", !req.Snapshot.IsZero())
	return spec, nil
}
