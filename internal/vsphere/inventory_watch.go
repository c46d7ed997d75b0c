package vsphere

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// Bounds of the watch inventory.
const (
	// watchMaxWait is the longest WaitForUpdatesEx: an idle watch costs one
	// small round trip per wait. It is capped by the refresh interval, so
	// that a healthy watch never looks stale (inventoryStaleFactor).
	watchMaxWait = 60 * time.Second
	// watchResyncInterval is the period of the full resync that backs the
	// watch up (a missed or misapplied update lives this long at most).
	watchResyncInterval = 10 * time.Minute
)

// NewWatchInventory builds a SharedInventory kept current by a property
// collector watch instead of periodic listings (inventoryMode = "watch"):
// one collector of its own, a filter traversing the VM folder (no
// ContainerView, see vcsim.md), WaitForUpdatesEx with a version, the
// changes applied to the snapshot. It resyncs in full (a new collector and
// filter, every VM listed) at start, after any error (a lost session among
// them), and every watchResyncInterval. interval <= 0 means DefaultInventoryRefreshInterval: it bounds
// each wait and the staleness check as in NewSharedInventory.
//
// Invalidate does nothing in this mode: the watch sees the hatchery's writes
// itself, within a round trip. WaitRefresh waits for the next two
// deliveries (a change, or an empty wait after up to the wait bound).
func NewWatchInventory(client VSphereClient, interval time.Duration, log *slog.Logger) *SharedInventory {
	s := NewSharedInventory(client, interval, 0, log)
	s.watch = true
	s.maxWait = min(watchMaxWait, s.interval)
	s.resyncEvery = watchResyncInterval
	return s
}

// watchedVM is one VM of the watch's state: its properties as last sent,
// and its view built from them.
type watchedVM struct {
	props map[string]types.DynamicProperty
	vm    VM
}

// runWatch is Run in watch mode: the owner loop.
func (s *SharedInventory) runWatch(ctx context.Context) {
	var (
		state    map[types.ManagedObjectReference]*watchedVM
		version  string
		resyncAt time.Time
		backoff  = s.minGap
	)
	pause := func(d time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	for ctx.Err() == nil {
		if version == "" || !s.now().Before(resyncAt) {
			st, v, err := s.watchResync(ctx)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				s.store(nil, nil, err)
				if !pause(backoff) {
					return
				}
				backoff = min(2*backoff, s.interval)
				version = ""
				continue
			}
			state, version, resyncAt, backoff = st, v, s.now().Add(s.resyncEvery), s.minGap
			s.publishWatch(state)
			continue
		}
		set, err := s.client.WaitForVirtualMachineUpdates(ctx, version, s.maxWait)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if !errors.Is(err, ErrWatchLost) {
				s.log.Warn("vm watch failed: resyncing", "err", err)
			}
			s.store(nil, nil, err)
			version = ""
			if !pause(s.minGap) {
				return
			}
			continue
		}
		if set == nil { // nothing changed within maxWait: the snapshot is current
			s.publishWatch(state)
			continue
		}
		if !applyUpdateSet(state, set) {
			// A change of a VM the watch never saw enter: the state is
			// not what vCenter holds. Resync rather than guess.
			s.log.Warn("vm watch out of step: resyncing")
			version = ""
			continue
		}
		version = set.Version
		s.publishWatch(state)
	}
}

// watchResync starts a new watch and reads the whole state from it (every
// page of a truncated set).
func (s *SharedInventory) watchResync(ctx context.Context) (map[types.ManagedObjectReference]*watchedVM, string, error) {
	state := map[types.ManagedObjectReference]*watchedVM{}
	version := ""
	for {
		set, err := s.client.WaitForVirtualMachineUpdates(ctx, version, s.maxWait)
		if err != nil {
			return nil, "", err
		}
		if set == nil {
			if version == "" {
				return nil, "", errors.New("vm watch resync: no initial update set")
			}
			return state, version, nil
		}
		if !applyUpdateSet(state, set) {
			return nil, "", errors.New("vm watch resync: a change of a vm not yet entered")
		}
		version = set.Version
		if set.Truncated == nil || !*set.Truncated {
			return state, version, nil
		}
	}
}

// applyUpdateSet applies the object updates of set to state. It returns
// false when an update modifies a VM state does not hold (the watch is out
// of step with vCenter: the caller resyncs).
func applyUpdateSet(state map[types.ManagedObjectReference]*watchedVM, set *types.UpdateSet) bool {
	ok := true
	for _, fs := range set.FilterSet {
		for _, u := range fs.ObjectSet {
			if u.Obj.Type != "VirtualMachine" {
				continue
			}
			switch u.Kind {
			case types.ObjectUpdateKindLeave:
				delete(state, u.Obj)
				continue
			case types.ObjectUpdateKindEnter:
				state[u.Obj] = &watchedVM{props: map[string]types.DynamicProperty{}}
			}
			w := state[u.Obj]
			if w == nil {
				ok = false
				continue
			}
			for _, c := range u.ChangeSet {
				switch c.Op {
				case types.PropertyChangeOpRemove, types.PropertyChangeOpIndirectRemove:
					delete(w.props, c.Name)
				default: // assign (PartialUpdates is off: add never comes)
					w.props[c.Name] = types.DynamicProperty{Name: c.Name, Val: c.Val}
				}
			}
			w.vm = watchedView(u.Obj, w.props)
		}
	}
	return ok
}

// watchedView builds the VM view from the properties of one VM.
func watchedView(ref types.ManagedObjectReference, props map[string]types.DynamicProperty) VM {
	oc := types.ObjectContent{Obj: ref, PropSet: make([]types.DynamicProperty, 0, len(props))}
	for _, p := range props {
		oc.PropSet = append(oc.PropSet, p)
	}
	var objs []mo.VirtualMachine
	if err := mo.LoadObjectContent([]types.ObjectContent{oc}, &objs); err != nil || len(objs) != 1 {
		return VM{Ref: ref}
	}
	return VMFromObject(objs[0])
}

// publishWatch makes the watch's state the snapshot.
func (s *SharedInventory) publishWatch(state map[types.ManagedObjectReference]*watchedVM) {
	vms := make([]VM, 0, len(state))
	for _, w := range state {
		vms = append(vms, w.vm)
	}
	slices.SortFunc(vms, func(a, b VM) int { return cmp.Compare(a.Ref.Value, b.Ref.Value) })
	s.store(vms, newVMIndex(vms), nil)
}
