package vcenter

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// scratchTimeout bounds one call on a scratch folder (its lookup, a
// create, a listing or an empty folder's delete task): folder metadata,
// answered by a healthy vCenter in well under a second.
const scratchTimeout = 30 * time.Second

// ScratchFolder is a folder of `vcenter check` (docs/vcenter-check.md):
// its name, reference and the VMs directly in it with their properties
// (VMProperties: the name, the annotation holding the check's record,
// the power state), and the number of its other children.
type ScratchFolder struct {
	Name   string
	Ref    vctypes.Ref
	VMs    []vctypes.VMInfo
	Others int
}

// CreateScratchFolder creates the folder name directly in the folder new
// VMs go to (LoadFolder) and returns it; DuplicateName (classified) when
// an object of that name is there. One CreateFolder request.
func (c *Client) CreateScratchFolder(ctx context.Context, name string) (vctypes.Ref, error) {
	if err := c.notConnected(); err != nil {
		return vctypes.Ref{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.scaled(scratchTimeout))
	defer cancel()
	parent, err := c.loadFolder(ctx)
	if err != nil {
		return vctypes.Ref{}, Classify(fmt.Errorf("create folder %q: %w", name, err))
	}
	f, err := object.NewFolder(c.vim, parent).CreateFolder(ctx, name)
	if err != nil {
		return vctypes.Ref{}, Classify(fmt.Errorf("create folder %q: %w", name, err))
	}
	return vim.RefOf(f.Reference()), nil
}

// ScratchFolders lists the folders directly in the folder new VMs go to
// whose name starts with prefix, each with the VMs it holds (read with
// RetrieveVirtualMachines) and the count of its other children.
func (c *Client) ScratchFolders(ctx context.Context, prefix string) ([]ScratchFolder, error) {
	if err := c.notConnected(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.scaled(scratchTimeout))
	defer cancel()
	parent, err := c.loadFolder(ctx)
	if err != nil {
		return nil, Classify(fmt.Errorf("list folders %q: %w", prefix+"*", err))
	}
	folders, err := c.childFolders(ctx, parent)
	if err != nil {
		return nil, Classify(fmt.Errorf("list folders %q: %w", prefix+"*", err))
	}
	var out []ScratchFolder
	for name, ref := range folders {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		var f mo.Folder
		if err := c.pc.RetrieveOne(ctx, ref, []string{"childEntity"}, &f); err != nil {
			if vim.IsNotFound(err) {
				continue
			}
			return nil, Classify(fmt.Errorf("read folder %q: %w", name, err))
		}
		sf := ScratchFolder{Name: name, Ref: vim.RefOf(ref)}
		var vms []types.ManagedObjectReference
		for _, ch := range f.ChildEntity {
			if ch.Type == "VirtualMachine" {
				vms = append(vms, ch)
			} else {
				sf.Others++
			}
		}
		if len(vms) > 0 {
			objs, err := c.retrieveVirtualMachines(ctx, vms)
			sf.VMs = vim.VMInfosOf(objs)
			if err != nil {
				return nil, Classify(fmt.Errorf("read the vms of folder %q: %w", name, err))
			}
		}
		out = append(out, sf)
	}
	return out, nil
}

// DeleteEmptyFolder destroys folder when it holds nothing (a folder's
// destroy destroys what it holds: a folder that is not empty is an error
// and is left alone); already gone is success.
func (c *Client) DeleteEmptyFolder(ctx context.Context, folder vctypes.Ref) error {
	return Classify(c.deleteLock(ctx, vim.MORef(folder)))
}

// GuestToolsStatus reads the VM's guest.toolsStatus (toolsNotInstalled,
// toolsNotRunning, toolsOld, toolsOk; "" when vCenter reports none). One
// request, bounded by the client's request timeout.
func (c *Client) GuestToolsStatus(ctx context.Context, vm vctypes.Ref) (vctypes.ToolsStatus, error) {
	if err := c.notConnected(); err != nil {
		return "", err
	}
	var m mo.VirtualMachine
	if err := c.pc.RetrieveOne(ctx, vim.MORef(vm), []string{"guest.toolsStatus"}, &m); err != nil {
		return "", Classify(fmt.Errorf("read tools status of vm %s: %w", c.vmName(vim.MORef(vm)), err))
	}
	if m.Guest == nil {
		return "", nil
	}
	return vctypes.ToolsStatus(m.Guest.ToolsStatus), nil
}
