package ippool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// Locker is where the address locks live: lock objects whose names the
// store keeps unique (vctypes.Locks: empty folders in vCenter, in the
// project's terms). CreateLock answers an error wrapping vctypes.ErrLockTaken
// when the name exists.
type Locker interface {
	// CreateLock creates the lock name; vctypes.ErrLockTaken (wrapped)
	// when it exists.
	CreateLock(ctx context.Context, name string) (vctypes.Ref, error)
	// ListLocks returns the locks whose name starts with prefix, by name.
	ListLocks(ctx context.Context, prefix string) (map[string]vctypes.Ref, error)
	// DeleteLock deletes the lock lock (that object, not another of its
	// name made since); already gone is success.
	DeleteLock(ctx context.Context, lock vctypes.Ref) error
}

// ForeignLockGrace is how long a lock of another holder must be seen with
// its address unused before Reconcile deletes it. Another holder's clock
// for a lock starts no earlier than the lock's creation; this process
// reuses a lock it holds without a vCenter call only within
// ReservationTTL of creating it, and a reservation's VM is listed within
// ReservationTTL: twice ReservationTTL is the first moment no live holder
// can still be about to use the lock (docs/high-availability.md).
const ForeignLockGrace = 2 * ReservationTTL

// LockPrefix is what follows the hatchery's name in the name of an
// address lock: "<hatchery name>-ip-<address>", e.g. "hatch-ip-10.0.0.12".
const LockPrefix = "-ip-"

// lockState is what this process knows of the address locks. Every field
// is guarded by the pool's mutex.
type lockState struct {
	locker Locker
	prefix string // "<hatchery name>-ip-"
	log    *slog.Logger

	// gen counts the reconcile listings; each mark below records the
	// generation it was made in, so a listing read before a mark was
	// made never clears it.
	gen int64
	// held are the locks this process created and still holds: reused
	// by its next reservation of the address without a vCenter call.
	held map[netip.Addr]heldLock
	// taken are the addresses another holder (another instance, or an
	// earlier run of this one) has locked: a create refused, or a lock
	// listed that this process does not hold. Skipped by the pick.
	taken map[netip.Addr]int64
	// unusedSince is when a lock of another holder was first seen with
	// its address unused (no VM records it, no local reservation).
	unusedSince map[netip.Addr]unusedMark
	// deleting are the addresses whose lock is being deleted now: not
	// picked until the delete ends.
	deleting map[netip.Addr]bool
}

// heldLock is a lock this process created.
type heldLock struct {
	ref     vctypes.Ref
	gen     int64     // the reconcile generation it was created in
	created time.Time // when: a reuse without vCenter call is safe for ReservationTTL after it
}

// unusedMark is a foreign lock seen unused.
type unusedMark struct {
	ref   vctypes.Ref
	since time.Time
}

// UseLocks makes the pool take each address through a lock object named
// "<hatchery>-ip-<address>" in locker before handing it out, and makes
// Reconcile delete the locks no VM needs (docs/high-availability.md,
// "Static IPs"). Call it once, before the pool is shared, and only when
// the pool is Enabled: without static IPs there are no locks.
func (p *Pool) UseLocks(locker Locker, hatchery string, log *slog.Logger) {
	if log == nil {
		log = slog.Default()
	}
	p.locks = &lockState{
		locker:      locker,
		prefix:      hatchery + LockPrefix,
		log:         log,
		held:        map[netip.Addr]heldLock{},
		taken:       map[netip.Addr]int64{},
		unusedSince: map[netip.Addr]unusedMark{},
		deleting:    map[netip.Addr]bool{},
	}
}

// unavailable tells whether a is locked by another holder or being
// unlocked. p.mu is held.
func (l *lockState) unavailable(a netip.Addr) bool {
	_, taken := l.taken[a]
	return taken || l.deleting[a]
}

// lockName is the name of a's lock.
func (l *lockState) lockName(a netip.Addr) string { return l.prefix + a.String() }

// addrOf returns the address a lock name of this hatchery carries: the
// name must be the prefix followed by an address written exactly as this
// package writes it. Any other name is not one of its locks.
func (l *lockState) addrOf(name string) (netip.Addr, bool) {
	rest, ok := strings.CutPrefix(name, l.prefix)
	if !ok {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(rest)
	if err != nil || a.String() != rest {
		return netip.Addr{}, false
	}
	return a, true
}

// takeLock takes a's lock for the reservation owner just made: at once
// (no vCenter call) when this process created it less than
// ReservationTTL ago, else by creating it, after deleting the older lock
// this process still holds (another holder may delete a lock unused for
// ForeignLockGrace: an older one is not trusted without a call). p.mu is
// not held across the vCenter calls (the reservation keeps the address
// from every other pick meanwhile). taken: another holder has it; the
// reservation is dropped and the address marked, the caller picks the
// next. Any other failure drops the reservation and is returned.
func (p *Pool) takeLock(ctx context.Context, a netip.Addr, owner string) (taken bool, err error) {
	l := p.locks
	p.mu.Lock()
	h, held := l.held[a]
	if held && p.now().Sub(h.created) < ReservationTTL {
		p.mu.Unlock()
		return false, nil
	}
	delete(l.held, a)
	p.mu.Unlock()
	var delErr error
	if held {
		delErr = l.locker.DeleteLock(ctx, h.ref)
		err = delErr
	}
	var ref vctypes.Ref
	if err == nil {
		ref, err = l.locker.CreateLock(ctx, l.lockName(a))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil {
		// A listing started during the create may not show it: the
		// current generation keeps Reconcile from forgetting it.
		l.held[a] = heldLock{ref: ref, gen: l.gen, created: p.now()}
		delete(l.taken, a) // a listing made during the create saw it as another's
		return false, nil
	}
	if r, ok := p.reserved[a]; ok && r.owner == owner {
		delete(p.reserved, a)
	}
	if errors.Is(err, vctypes.ErrLockTaken) {
		l.taken[a] = l.gen
		l.log.Info("ip locked by another instance, trying the next", logkey.IP, a.String(), logkey.VM, owner)
		return true, nil
	}
	if held && delErr != nil {
		l.held[a] = h // the delete failed: still there, still ours
	}
	return false, fmt.Errorf("reserve ip %s for %q: %w", a, owner, err)
}

// Reconcile lists this hatchery's address locks and deletes those no VM
// needs (docs/high-availability.md, "Static IPs"). used is what the VMs of
// a read of the inventory made before the call hold (inventory.UsedBy, or
// the inventory.Index of the snapshot). A lock whose address is neither
// in used nor reserved here is deleted at once when this process holds
// it, and once it has been seen so for ForeignLockGrace when another
// holder has it (another instance, or an earlier run that stopped without
// deleting it): a live instance's clone in flight is never robbed of its
// address. Every other lock of another holder is marked taken (never
// picked). Only names "<hatchery>-ip-<address>" are ever deleted. Without
// UseLocks it does nothing. Deletions that fail are tried again next
// time; their errors are returned, joined.
func (p *Pool) Reconcile(ctx context.Context, used map[netip.Addr]bool) error {
	if p == nil || p.locks == nil {
		return nil
	}
	l := p.locks
	p.mu.Lock()
	l.gen++
	gen := l.gen
	p.mu.Unlock()
	names, err := l.locker.ListLocks(ctx, l.prefix)
	if err != nil {
		return fmt.Errorf("reconcile ip locks: %w", err)
	}
	dels := p.decideDeletions(names, used, gen)
	var errs []error
	for _, d := range dels {
		err := l.locker.DeleteLock(ctx, d.ref)
		p.mu.Lock()
		delete(l.deleting, d.addr)
		if err == nil {
			delete(l.taken, d.addr)
			delete(l.unusedSince, d.addr)
		} else if d.own {
			l.held[d.addr] = d.held // still there, still ours
		}
		p.mu.Unlock()
		if err != nil {
			errs = append(errs, fmt.Errorf("delete ip lock %q: %w", l.lockName(d.addr), err))
			continue
		}
		if d.own {
			l.log.Debug("ip lock deleted: address unused", logkey.IP, d.addr.String())
		} else {
			l.log.Info("ip lock of another instance deleted: address unused", logkey.IP, d.addr.String(), logkey.Detail, "unused for "+ForeignLockGrace.String())
		}
	}
	return errors.Join(errs...)
}

// lockDeletion is one lock Reconcile deletes.
type lockDeletion struct {
	addr netip.Addr
	ref  vctypes.Ref
	own  bool
	held heldLock // own: what this process held
}

// decideDeletions decides, under p.mu (taken here), from the listing of
// generation gen, which locks to delete; it marks them deleting.
func (p *Pool) decideDeletions(names map[string]vctypes.Ref, used map[netip.Addr]bool, gen int64) []lockDeletion {
	l := p.locks
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	p.expireLocked(now)
	listed := map[netip.Addr]vctypes.Ref{}
	for name, ref := range names {
		if a, ok := l.addrOf(name); ok {
			listed[a] = ref
		}
	}
	needed := func(a netip.Addr) bool {
		_, reserved := p.reserved[a]
		return used[a] || reserved
	}
	var dels []lockDeletion
	for a, h := range l.held {
		if _, ok := listed[a]; !ok {
			if h.gen < gen {
				delete(l.held, a) // deleted by someone else: the next reservation creates it again
			}
			continue
		}
		delete(l.taken, a)
		if needed(a) {
			continue
		}
		delete(l.held, a)
		l.deleting[a] = true
		dels = append(dels, lockDeletion{addr: a, ref: h.ref, own: true, held: h})
	}
	for a, ref := range listed {
		if _, own := l.held[a]; own || l.deleting[a] {
			continue
		}
		if _, ok := l.taken[a]; !ok {
			l.taken[a] = gen
		}
		m, seen := l.unusedSince[a]
		if needed(a) {
			delete(l.unusedSince, a)
			continue
		}
		if !seen || m.ref != ref {
			l.unusedSince[a] = unusedMark{ref: ref, since: now}
			continue
		}
		if now.Sub(m.since) < ForeignLockGrace {
			continue
		}
		l.deleting[a] = true
		dels = append(dels, lockDeletion{addr: a, ref: ref})
	}
	for a, g := range l.taken {
		if _, ok := listed[a]; !ok && g < gen {
			delete(l.taken, a)
		}
	}
	for a := range l.unusedSince {
		if _, ok := listed[a]; !ok {
			delete(l.unusedSince, a)
		}
	}
	return dels
}

// Locks returns how many address locks this process holds, and how many
// addresses it knows locked by another holder.
func (p *Pool) Locks() (held, taken int) {
	if p == nil || p.locks == nil {
		return 0, 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.locks.held), len(p.locks.taken)
}
