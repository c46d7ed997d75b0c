package vsphere_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25/mo"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// benchModeSpec is the benchmark's reference mode, the baseline: the
// spec's design, which lists every VM as whole `name, summary, guest,
// config` objects in every decision that reads VMs (CanSpawn,
// CanAllocateResources, the claim, the IP choice, both cleanup loops, the
// worker pool, metrics). It exists only here, as a test inventory: the
// product's "listing" mode already asks for leaf properties only.
const benchModeSpec = "spec"

// specWholeProperties are the properties the whole-object baseline
// retrieves (docs/inventory-watch.md compares it with the product's modes).
var specWholeProperties = []string{"name", "summary", "guest", "config"}

// specListingInventory lists the datacenter's VMs as whole objects on every
// read, through one ContainerView (as the product does), and converts them
// to the hatchery's view. lists counts the listings.
type specListingInventory struct {
	client *vcenter.Client
	lists  atomic.Int64

	once    sync.Once
	view    *view.ContainerView
	viewErr error
}

// VMs lists every VM now, whole objects.
func (s *specListingInventory) VMs(ctx context.Context) ([]inventory.VM, error) {
	s.once.Do(func() {
		folders, err := s.client.Datacenter().Folders(ctx)
		if err != nil {
			s.viewErr = fmt.Errorf("read folders: %w", err)
			return
		}
		s.view, s.viewErr = view.NewManager(s.client.Vim25()).CreateContainerView(ctx, folders.VmFolder.Reference(), []string{"VirtualMachine"}, true)
	})
	if s.viewErr != nil {
		return nil, s.viewErr
	}
	s.lists.Add(1)
	var objs []mo.VirtualMachine
	if err := s.view.Retrieve(ctx, []string{"VirtualMachine"}, specWholeProperties, &objs); err != nil {
		return nil, fmt.Errorf("spec listing: %w", err)
	}
	out := make([]inventory.VM, 0, len(objs))
	for _, o := range objs {
		out = append(out, inventory.VMFromInfo(vim.VMInfoOf(o)))
	}
	return out, nil
}

// Invalidate does nothing: every read is fresh.
func (*specListingInventory) Invalidate(...vctypes.Ref) {}
