package vcenter

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// lockTimeout bounds one lock call (create, list or delete), the folder
// lookup and the delete's task included. A lock is folder metadata: a
// healthy vCenter answers in well under a second. A spawn waits for its
// address's lock before it clones, so a vCenter that does not answer
// fails the reservation within this bound rather than holding the spawn
// for a whole clone timeout.
const lockTimeout = 30 * time.Second

// LockFolderName is the folder that holds the lock folders, created once
// inside the folder new VMs go to (LoadFolder). The locks live apart from
// the VMs: an operator sees them in one place, a listing of locks reads
// no VM, and creating or deleting a lock never changes the folder clones
// go to (docs/high-availability.md, "Static IPs").
const LockFolderName = "hatchery-vsphere-locks"

// createLock creates an empty folder named name in the lock folder
// (LockFolderName). vCenter keeps the names of a folder's children
// unique: a second create of one name is refused with DuplicateName,
// classified here as vctypes.ErrLockTaken. It is one CreateFolder request (after
// the lock folder's lookup, cached), not a task: it takes no task slot.
func (c *Client) createLock(ctx context.Context, name string) (types.ManagedObjectReference, error) {
	if err := c.notConnected(); err != nil {
		return types.ManagedObjectReference{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.scaled(lockTimeout))
	defer cancel()
	parent, err := c.lockFolder(ctx)
	if err != nil {
		return types.ManagedObjectReference{}, fmt.Errorf("create lock %q: %w", name, err)
	}
	f, err := object.NewFolder(c.vim, parent).CreateFolder(ctx, name)
	if err != nil {
		if vim.FaultKindOf(err) == vctypes.FaultDuplicateName {
			return types.ManagedObjectReference{}, fmt.Errorf("create lock %q: %w: %w", name, vctypes.ErrLockTaken, err)
		}
		return types.ManagedObjectReference{}, fmt.Errorf("create lock %q: %w", name, err)
	}
	return f.Reference(), nil
}

// listLocks returns the folders directly in the lock folder whose name
// starts with prefix. One RetrieveProperties (after the lock folder's
// lookup, cached).
func (c *Client) listLocks(ctx context.Context, prefix string) (map[string]types.ManagedObjectReference, error) {
	if err := c.notConnected(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.scaled(lockTimeout))
	defer cancel()
	parent, err := c.lockFolder(ctx)
	if err != nil {
		return nil, fmt.Errorf("list locks %q: %w", prefix+"*", err)
	}
	folders, err := c.childFolders(ctx, parent)
	if err != nil {
		return nil, fmt.Errorf("list locks %q: %w", prefix+"*", err)
	}
	locks := map[string]types.ManagedObjectReference{}
	for name, ref := range folders {
		if strings.HasPrefix(name, prefix) {
			locks[name] = ref
		}
	}
	return locks, nil
}

// lockFolder returns the lock folder (LockFolderName) inside the folder
// new VMs go to, creating it when it does not exist; another process
// creating it at the same moment is not an error (its folder is used).
// The reference is cached with the placement lookups.
func (c *Client) lockFolder(ctx context.Context) (types.ManagedObjectReference, error) {
	parent, err := c.loadFolder(ctx)
	if err != nil {
		return types.ManagedObjectReference{}, err
	}
	return cachedLookup(ctx, c.placement, "lock folder", parent.Value, func() (types.ManagedObjectReference, error) {
		find := func() (types.ManagedObjectReference, bool, error) {
			folders, err := c.childFolders(ctx, parent)
			if err != nil {
				return types.ManagedObjectReference{}, false, fmt.Errorf("read lock folder %q: %w", LockFolderName, err)
			}
			ref, ok := folders[LockFolderName]
			return ref, ok, nil
		}
		if ref, ok, err := find(); err != nil || ok {
			return ref, err
		}
		f, err := object.NewFolder(c.vim, parent).CreateFolder(ctx, LockFolderName)
		if err == nil {
			return f.Reference(), nil
		}
		if vim.FaultKindOf(err) != vctypes.FaultDuplicateName {
			return types.ManagedObjectReference{}, fmt.Errorf("create lock folder %q: %w", LockFolderName, err)
		}
		// Another process created it since our read.
		ref, ok, ferr := find()
		if ferr != nil {
			return types.ManagedObjectReference{}, ferr
		}
		if !ok {
			return types.ManagedObjectReference{}, fmt.Errorf("create lock folder %q: the name is taken by an object that is not a folder: %w", LockFolderName, err)
		}
		return ref, nil
	})
}

// childFolders returns the folders directly in parent, by name. One
// RetrieveProperties: a traversal of the parent's children that returns
// the names of the child folders only (other children are traversed, not
// returned).
func (c *Client) childFolders(ctx context.Context, parent types.ManagedObjectReference) (map[string]types.ManagedObjectReference, error) {
	res, err := c.pc.RetrieveProperties(ctx, types.RetrieveProperties{SpecSet: []types.PropertyFilterSpec{{
		ObjectSet: []types.ObjectSpec{{
			Obj:  parent,
			Skip: types.NewBool(true),
			SelectSet: []types.BaseSelectionSpec{&types.TraversalSpec{
				Type: "Folder",
				Path: "childEntity",
				Skip: types.NewBool(false),
			}},
		}},
		PropSet:                       []types.PropertySpec{{Type: "Folder", PathSet: []string{"name"}}},
		ReportMissingObjectsInResults: types.NewBool(true),
	}}})
	if err != nil {
		return nil, err
	}
	folders := map[string]types.ManagedObjectReference{}
	for _, oc := range res.Returnval {
		if oc.Obj.Type != "Folder" || len(oc.MissingSet) > 0 {
			continue // gone since the traversal, or not a folder
		}
		var f mo.Folder
		if err := mo.LoadObjectContent([]types.ObjectContent{oc}, &f); err != nil {
			return nil, fmt.Errorf("decode %s: %w", oc.Obj.Value, err)
		}
		folders[f.Name] = oc.Obj
	}
	return folders, nil
}

// deleteLock destroys the lock folder lock (a task, bounded by
// lockTimeout and taking a task slot). It first reads the folder's
// children and refuses to destroy a folder that holds anything: a
// folder's destroy destroys its contents, and a lock holds nothing. A
// folder already gone is success.
func (c *Client) deleteLock(ctx context.Context, lock types.ManagedObjectReference) error {
	if err := c.notConnected(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.scaled(lockTimeout))
	defer cancel()
	var f mo.Folder
	if err := c.pc.RetrieveOne(ctx, lock, []string{"name", "childEntity"}, &f); err != nil {
		if vim.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("delete lock %s: %w", lock.Value, err)
	}
	if len(f.ChildEntity) > 0 {
		return fmt.Errorf("delete lock %q: the folder holds %d objects: not a lock, left alone", f.Name, len(f.ChildEntity))
	}
	_, err := c.runTask(ctx, lockTimeout, object.NewFolder(c.vim, lock).Destroy)
	if err != nil && !vim.IsNotFound(err) {
		return fmt.Errorf("delete lock %q: %w", f.Name, err)
	}
	return nil
}
