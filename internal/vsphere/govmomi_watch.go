package vsphere

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/types"
)

// watchDestroyTimeout bounds the destruction of a replaced watch collector:
// it is best effort and must not delay the resync that replaces it.
const watchDestroyTimeout = 2 * time.Second

// ErrWatchLost means the watch's property collector is gone (the session
// it was created in ended, or it was never created): the caller resyncs by
// asking again with an empty version.
var ErrWatchLost = errors.New("vm watch collector lost")

// vmWatch is the property collector and filter of WaitForVirtualMachineUpdates,
// valid for the session generation it was created in.
type vmWatch struct {
	pc  *property.Collector
	gen int64
}

// vmWatchFilter selects every VirtualMachine under the datacenter's VM
// folder with VMProperties, by traversal (Datacenter.vmFolder, then
// Folder.childEntity recursively, and the VMs of vApps), without a
// ContainerView.
//
// The filter's root is the datacenter, not the VM folder, on purpose: vcsim
// v0.56.0 locks a filter whenever its root object (when it has a traversal)
// is updated, from inside the updater's lock on that object, while a
// pending WaitForUpdatesEx holds the filter and locks the objects it
// traverses. A root that every clone updates (the VM folder's childEntity,
// or a ContainerView) deadlocks the simulator — seen with the VM folder as
// root: CreateVMTask holding the folder waits for the filter, the wait
// holding the filter waits for the folder. The datacenter is not updated
// when VMs come and go.
func vmWatchFilter(dc types.ManagedObjectReference) types.CreateFilter {
	const toFolder, folders, vapps = "hatcheryDatacenterVMs", "hatcheryFolders", "hatcheryVApps"
	folderSpec := &types.TraversalSpec{
		SelectionSpec: types.SelectionSpec{Name: folders},
		Type:          "Folder",
		Path:          "childEntity",
		SelectSet: []types.BaseSelectionSpec{
			&types.SelectionSpec{Name: folders},
			&types.SelectionSpec{Name: vapps},
		},
	}
	return types.CreateFilter{
		Spec: types.PropertyFilterSpec{
			ObjectSet: []types.ObjectSpec{{
				Obj:  dc,
				Skip: types.NewBool(true),
				SelectSet: []types.BaseSelectionSpec{
					&types.TraversalSpec{
						SelectionSpec: types.SelectionSpec{Name: toFolder},
						Type:          "Datacenter",
						Path:          "vmFolder",
						SelectSet:     []types.BaseSelectionSpec{&types.SelectionSpec{Name: folders}},
					},
					folderSpec,
					&types.TraversalSpec{
						SelectionSpec: types.SelectionSpec{Name: vapps},
						Type:          "VirtualApp",
						Path:          "vm",
					},
				},
			}},
			PropSet: []types.PropertySpec{{Type: "VirtualMachine", PathSet: VMProperties}},
		},
		PartialUpdates: false,
	}
}

// WaitForVirtualMachineUpdates watches the datacenter's VMs and templates
// (VMProperties) through a property collector of its own (never the
// session's default one, which tasks and waits use), created for this
// watch.
//
// With version "", it drops the previous watch collector (best effort),
// creates a collector and a filter, and returns the whole current state:
// every VM as an "enter" update. Otherwise it waits up to maxWait for
// changes since version and returns them; nil with no error when nothing
// changed. A set marked Truncated continues at once with its version.
// When the collector is gone (a new session: vCenter forgot it) it returns
// ErrWatchLost; on that or any other error the caller resyncs with "".
// One caller at a time (the inventory's owner): a collector serves one
// wait at once.
func (c *GovmomiClient) WaitForVirtualMachineUpdates(ctx context.Context, version string, maxWait time.Duration) (*types.UpdateSet, error) {
	if version == "" {
		w, err := c.newVMWatch(ctx)
		if err != nil {
			return nil, err
		}
		return c.waitVMWatch(ctx, w, "", 0)
	}
	c.vmsMu.Lock()
	w := c.watch
	c.vmsMu.Unlock()
	if w == nil || w.gen != c.rl.generation() {
		return nil, ErrWatchLost
	}
	return c.waitVMWatch(ctx, w, version, maxWait)
}

// waitVMWatch runs one WaitForUpdatesEx on w.
func (c *GovmomiClient) waitVMWatch(ctx context.Context, w *vmWatch, version string, maxWait time.Duration) (*types.UpdateSet, error) {
	secs := int32(maxWait / time.Second)
	if secs < 0 {
		secs = 0
	}
	req := types.WaitForUpdatesEx{
		This:    w.pc.Reference(),
		Version: version,
		Options: &types.WaitOptions{MaxWaitSeconds: &secs},
	}
	res, err := methods.WaitForUpdatesEx(ctx, c.vim, &req)
	if err != nil {
		if isNotFound(err) || w.gen != c.rl.generation() {
			c.dropVMWatch(w)
			return nil, fmt.Errorf("wait for vm updates: %w: %w", ErrWatchLost, err)
		}
		return nil, fmt.Errorf("wait for vm updates of datacenter %q: %w", c.dc.Name(), err)
	}
	return res.Returnval, nil
}

// newVMWatch replaces the watch collector: the old one is destroyed (best
// effort: it may have died with its session), a new one made with its
// filter.
func (c *GovmomiClient) newVMWatch(ctx context.Context) (*vmWatch, error) {
	c.vmsMu.Lock()
	old := c.watch
	c.watch = nil
	c.vmsMu.Unlock()
	if old != nil && old.gen == c.rl.generation() {
		// Best effort, briefly: a collector whose wait failed may still be
		// busy on the server (vcsim serialises calls on a collector), and
		// it dies with the session anyway.
		dctx, cancel := context.WithTimeout(ctx, watchDestroyTimeout)
		if err := old.pc.Destroy(dctx); err != nil {
			c.log.Debug("destroy vm watch collector", "error", err)
		}
		cancel()
	}
	gen := c.rl.generation()
	pc, err := c.pc.Create(ctx)
	if err != nil {
		return nil, fmt.Errorf("create vm watch collector: %w", err)
	}
	if _, err := pc.CreateFilter(ctx, vmWatchFilter(c.dc.Reference())); err != nil {
		_ = pc.Destroy(ctx) //nolint:errcheck // best effort: it dies with the session anyway
		return nil, fmt.Errorf("create vm watch filter over datacenter %q: %w", c.dc.Name(), err)
	}
	w := &vmWatch{pc: pc, gen: gen}
	c.vmsMu.Lock()
	c.watch = w
	c.vmsMu.Unlock()
	return w, nil
}

// dropVMWatch forgets w if it is still the current watch.
func (c *GovmomiClient) dropVMWatch(w *vmWatch) {
	c.vmsMu.Lock()
	if c.watch == w {
		c.watch = nil
	}
	c.vmsMu.Unlock()
}

// closeVMWatch destroys the watch collector (Close).
func (c *GovmomiClient) closeVMWatch(ctx context.Context) {
	c.vmsMu.Lock()
	w := c.watch
	c.watch = nil
	c.vmsMu.Unlock()
	if w != nil {
		if err := w.pc.Destroy(ctx); err != nil {
			c.log.Debug("destroy vm watch collector", "error", err)
		}
	}
}
