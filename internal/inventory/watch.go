package inventory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// WatchResyncInterval is the period of the full resync that backs the
// change watch up: a change the watch cannot see (an IP on a secondary NIC
// alone, a simulator that does not report a property) lives this long at
// most. One hour keeps its cost (one leaf listing) a small part of an idle
// hatchery's load.
const WatchResyncInterval = time.Hour

// NewWatch builds the Shared inventory of inventoryMode = "watch":
// the same snapshot, owner loop (Run), staleness rule, Invalidate and
// WaitRefresh as NewShared, but each refresh is incremental
// instead of a listing of every VM (docs/inventory-watch.md):
//
//   - the changes of the watched VMs since the last refresh
//     (VirtualMachineChanges: one request, nothing waited for);
//   - one probe: every VM reference of the scope and the resource pool's
//     runtime (ProbeInventory: one request; the references come from the
//     watch's notifications once its filter on the scope's views has
//     reported, and only the pool is read). New references are added to
//     the watch and read; references gone are dropped;
//   - one read of only the VMs whose watched properties moved, the new ones
//     and those named to Invalidate (RetrieveVirtualMachines), when any.
//
// An idle refresh therefore costs two requests, carrying a reference per
// VM of the scope only until the views have reported. The first refresh, any error, a lost watch (new
// session) and every WatchResyncInterval start again from a full leaf
// listing under a new watch. interval and minGap as in NewShared.
func NewWatch(client Source, interval, minGap time.Duration, log *slog.Logger) *Shared {
	s := NewShared(client, interval, minGap, log)
	s.watch = &watchState{}
	return s
}

// watchState is the watch inventory's working state, owned by Run's
// goroutine (never read elsewhere; readers get the published snapshot).
type watchState struct {
	synced   bool      // a resync succeeded and the watch has not failed since
	resyncAt time.Time // next periodic resync
	vms      map[vctypes.Ref]VM
	signals  map[vctypes.Ref]vmSignals // as last read
	watched  map[vctypes.Ref]bool
	toRead   map[vctypes.Ref]bool // seen moving, not read yet
	fresh    map[vctypes.Ref]bool // found by the last probe, read by the next refresh
	pool     *vctypes.Ref
	dirty    bool // vms changed since the last publication
}

// vmSignals are the values of vim.VMWatchProperties of one VM.
type vmSignals struct {
	name          string
	template      bool
	changeVersion string
	powerState    vctypes.PowerState
	ipAddress     string
	opsReady      bool
}

// signalsOf reads the watched properties from a VM read with vim.VMProperties.
func signalsOf(o vctypes.VMInfo) vmSignals {
	return vmSignals{
		name: o.Name, powerState: o.PowerState, template: o.Template, changeVersion: o.ChangeVersion,
		ipAddress: o.IPAddress, opsReady: o.GuestOperationsReady,
	}
}

// apply returns s with the reported changes applied (a removed property's
// value is nil). A value of an unexpected type, or a property the watch
// does not know, yields ok false: the caller reads the VM again rather
// than guess.
func (s vmSignals) apply(changes []vctypes.PropertyChange) (out vmSignals, ok bool) {
	out = s
	for _, c := range changes {
		val := c.Value
		switch c.Name {
		case "name":
			v, good := stringOf(val)
			out.name, ok = v, good
		case "config.template":
			v, good := val.(bool)
			out.template, ok = v, good || val == nil
		case "config.changeVersion":
			v, good := stringOf(val)
			out.changeVersion, ok = v, good
		case "runtime.powerState":
			switch v := val.(type) {
			case vctypes.PowerState:
				out.powerState, ok = v, true
			case string:
				out.powerState, ok = vctypes.PowerState(v), true
			case nil:
				out.powerState, ok = "", true
			}
		case "guest.ipAddress":
			v, good := stringOf(val)
			out.ipAddress, ok = v, good
		case "guest.guestOperationsReady":
			v, good := val.(bool)
			out.opsReady, ok = v, good || val == nil
		default:
			ok = false
		}
		if !ok {
			return s, false
		}
	}
	return out, true
}

func stringOf(v any) (string, bool) {
	switch s := v.(type) {
	case string:
		return s, true
	case nil:
		return "", true
	}
	return "", false
}

// watchRefresh is one refresh of the watch inventory.
func (s *Shared) watchRefresh(ctx context.Context) {
	w := s.watch
	if !w.synced || !s.now().Before(w.resyncAt) {
		s.storeWatch(s.watchResync(ctx))
		return
	}
	err := s.watchStep(ctx)
	if errors.Is(err, vctypes.ErrWatchLost) {
		// A consequence of a session vCenter ended or of its restart,
		// which the client logs (docs/operations.md#when-vcenter-restarts):
		// DEBUG here.
		s.log.Debug("vm change watch lost: resyncing", logkey.Err, err)
		err = s.watchResync(ctx)
	} else if err != nil {
		w.synced = false // the next refresh starts again from a listing
	}
	s.storeWatch(err)
}

// storeWatch publishes the watch state (or records err).
func (s *Shared) storeWatch(err error) {
	if err != nil {
		s.store(nil, nil, err)
		return
	}
	w := s.watch
	s.mu.RLock()
	vms, idx := s.vms, s.idx
	s.mu.RUnlock()
	if w.dirty || idx == nil {
		vms = make([]VM, 0, len(w.vms))
		for _, v := range w.vms {
			vms = append(vms, v)
		}
		slices.SortFunc(vms, func(a, b VM) int { return cmp.Compare(a.Ref.Value, b.Ref.Value) })
		idx = newIndex(vms)
		w.dirty = false
	}
	s.store(vms, idx, nil)
}

// watchResync starts a new watch over every VM and lists them all.
func (s *Shared) watchResync(ctx context.Context) error {
	w := s.watch
	w.synced = false
	if err := s.client.ResetVirtualMachineWatch(ctx); err != nil {
		return fmt.Errorf("reset vm change watch: %w", err)
	}
	pool := s.watchPool(ctx)
	refs, rt, err := s.client.ProbeInventory(ctx, pool)
	if err != nil {
		return fmt.Errorf("probe inventory: %w", err)
	}
	if err := s.client.WatchVirtualMachines(ctx, refs); err != nil {
		return fmt.Errorf("watch %d vms: %w", len(refs), err)
	}
	// Listed after the watch started: a change after the listing is
	// reported; one before it is in the listing.
	objs, err := s.client.ListVirtualMachines(ctx)
	if err != nil {
		return err
	}
	w.vms = make(map[vctypes.Ref]VM, len(objs))
	w.signals = make(map[vctypes.Ref]vmSignals, len(objs))
	w.watched = make(map[vctypes.Ref]bool, len(refs))
	w.toRead = map[vctypes.Ref]bool{}
	w.fresh = map[vctypes.Ref]bool{}
	for _, r := range refs {
		w.watched[r] = true
	}
	for _, o := range objs {
		w.vms[o.Ref] = VMFromInfo(o)
		w.signals[o.Ref] = signalsOf(o)
	}
	s.takeInvalidated() // the listing is fresher than any of them
	w.synced, w.dirty, w.resyncAt = true, true, s.now().Add(WatchResyncInterval)
	s.setPoolRuntime(rt)
	s.log.Debug("vm inventory resynced", "vms", len(w.vms), "watched", len(w.watched))
	return nil
}

// watchStep applies the changes since the last refresh, probes for new
// and gone VMs, and reads the VMs that moved.
func (s *Shared) watchStep(ctx context.Context) error {
	w := s.watch
	ups, err := s.client.VirtualMachineChanges(ctx)
	if err != nil {
		return fmt.Errorf("read vm changes: %w", err)
	}
	for _, u := range ups {
		ref := u.Ref
		if u.Kind == vctypes.UpdateLeave {
			s.forgetVM(ref)
			delete(w.watched, ref)
			continue
		}
		old, known := w.signals[ref]
		if !known {
			w.toRead[ref] = true
			continue
		}
		if next, ok := old.apply(u.Changes); !ok || next != old {
			w.toRead[ref] = true
		}
	}

	pool := s.watchPool(ctx)
	refs, rt, err := s.client.ProbeInventory(ctx, pool)
	if err != nil {
		return fmt.Errorf("probe inventory: %w", err)
	}
	s.setPoolRuntime(rt)
	present := make(map[vctypes.Ref]bool, len(refs))
	var added []vctypes.Ref
	for _, r := range refs {
		present[r] = true
		if !w.watched[r] {
			added = append(added, r)
		}
	}
	var gone []vctypes.Ref
	for r := range w.watched {
		if !present[r] {
			gone = append(gone, r)
		}
	}
	for r := range w.vms {
		if !present[r] {
			s.forgetVM(r)
		}
	}
	if len(gone) > 0 {
		for _, r := range gone {
			delete(w.watched, r)
		}
		if err := s.client.UnwatchVirtualMachines(ctx, gone); err != nil {
			s.log.Debug("unwatch gone vms", "vms", len(gone), logkey.Err, err)
		}
	}
	// New VMs read now are those the previous refresh found: a VM is read
	// one refresh after it appears (soon: a refresh is asked for), never in
	// the refresh that first sees it, which may be while vCenter is still
	// creating it (the pinned simulator even races then).
	for r := range w.fresh {
		if present[r] {
			w.toRead[r] = true
		}
	}
	clear(w.fresh)
	if len(added) > 0 {
		// Watched before they are read, as in a resync.
		if err := s.client.WatchVirtualMachines(ctx, added); err != nil {
			return fmt.Errorf("watch %d new vms: %w", len(added), err)
		}
		for _, r := range added {
			w.watched[r] = true
			w.fresh[r] = true
		}
		s.Invalidate()
	}
	for _, r := range s.takeInvalidated() {
		if present[r] {
			w.toRead[r] = true
		}
	}
	for r := range w.toRead {
		if !present[r] {
			delete(w.toRead, r)
		}
	}
	if len(w.toRead) == 0 {
		return nil
	}
	read := make([]vctypes.Ref, 0, len(w.toRead))
	for r := range w.toRead {
		read = append(read, r)
	}
	objs, err := s.client.RetrieveVirtualMachines(ctx, read)
	if err != nil {
		return fmt.Errorf("read %d changed vms: %w", len(read), err)
	}
	for _, o := range objs {
		w.vms[o.Ref] = VMFromInfo(o)
		w.signals[o.Ref] = signalsOf(o)
		delete(w.toRead, o.Ref)
	}
	for r := range w.toRead { // not returned: gone since the probe
		s.forgetVM(r)
		delete(w.toRead, r)
	}
	w.dirty = true
	return nil
}

// forgetVM drops a VM from the watch state.
func (s *Shared) forgetVM(ref vctypes.Ref) {
	w := s.watch
	if _, ok := w.vms[ref]; ok {
		delete(w.vms, ref)
		w.dirty = true
	}
	delete(w.signals, ref)
	delete(w.toRead, ref)
	delete(w.fresh, ref)
}

// watchPool returns the pool the probe reads, looking it up when not known
// yet. A pool that cannot be found is not an inventory failure: the probe
// reads the VMs only and reports use live reads.
func (s *Shared) watchPool(ctx context.Context) *vctypes.Ref {
	w := s.watch
	if w.pool != nil {
		return w.pool
	}
	p, err := s.client.LoadResourcePool(ctx)
	if err != nil {
		s.log.Debug("inventory: resource pool not probed", logkey.Err, err)
		return nil
	}
	w.pool = &p
	return w.pool
}

// setPoolRuntime records the pool runtime of the last probe.
func (s *Shared) setPoolRuntime(rt *vctypes.PoolRuntime) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rt == nil {
		s.poolRT, s.poolAt = nil, time.Time{}
		return
	}
	cp := *rt
	s.poolRT, s.poolAt = &cp, s.now()
}

// PoolRuntime returns the resource pool runtime the last refresh read with
// the VMs, and when; nil when the inventory does not read it (modes other
// than "watch", or a pool that cannot be found). The figures are the
// project's (vctypes.PoolRuntime): internal/admission reads them.
func (s *Shared) PoolRuntime() (*vctypes.PoolRuntime, time.Time) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.poolRT == nil {
		return nil, time.Time{}
	}
	cp := *s.poolRT
	return &cp, s.poolAt
}

// takeInvalidated returns and clears the VMs named to Invalidate.
func (s *Shared) takeInvalidated() []vctypes.Ref {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]vctypes.Ref, 0, len(s.invalidated))
	for r := range s.invalidated {
		out = append(out, r)
	}
	clear(s.invalidated)
	return out
}
