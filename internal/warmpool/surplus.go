package warmpool

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/custody"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// RemoveSurplus destroys idle provisioned VMs of pools holding more than
// their configured number (the number went down, the entry or its flavor
// changed, or it was removed), and every idle pool VM of an earlier
// version (LegacyPrefix: its name and record are claimable by an upstream
// hatchery on the same vCenter; Counts does not count it, so its pool is
// refilled under this version's names). Only idle VMs go: a VM being
// provisioned or claimed is never touched, so a pool may stay above its
// number until those end. A failed deletion stays marked and is retried
// by cleanup.
func (p *Pool) RemoveSurplus(ctx context.Context, vms []inventory.VM, counts, configured map[Key]int) {
	p.removeSurplus(ctx, vms, counts, configured, nil)
}

// removeSurplus is RemoveSurplus where the surplus of a pool in idleFor
// (a pool that follows demand) takes only VMs that have waited idle,
// since their clone, at least that long: the shrink after an idle period
// is read from the VMs' records in vCenter, which every instance of the
// hatchery reads alike (docs/warm-pools.md, "Two instances").
func (p *Pool) removeSurplus(ctx context.Context, vms []inventory.VM, counts, configured map[Key]int, idleFor map[Key]time.Duration) {
	idle := map[Key][]inventory.VM{}
	var old []inventory.VM
	for _, v := range vms {
		if p.IdleProvisioned(v) {
			if legacy(v) {
				old = append(old, v)
				continue
			}
			k, _ := keyOf(p.Hatchery, v)
			idle[k] = append(idle[k], v)
		}
	}
	sortOldestFirst(old)
	for _, v := range old {
		if ctx.Err() != nil {
			return
		}
		if p.remove(ctx, v, "deleting provisioned vm of an earlier version", "its name and record are those an upstream cds hatchery claims; its pool is refilled under "+Prefix+" names") == removalStale {
			return
		}
	}
	keys := make([]Key, 0, len(idle))
	for k := range idle {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keyLess(keys[i], keys[j]) })

	for _, k := range keys {
		excess := counts[k] - configured[k]
		if excess <= 0 {
			continue
		}
		candidates := idle[k]
		sortOldestFirst(candidates)
		for _, v := range candidates {
			if excess == 0 || ctx.Err() != nil {
				break
			}
			if !idleLongEnough(v, idleFor, k, p.Now()) {
				continue
			}
			switch p.remove(ctx, v, "deleting surplus provisioned vm", fmt.Sprintf("pool holds %d, configured %d", counts[k], configured[k])) {
			case removalDone:
				excess--
			case removalStale:
				// The listing the counts come from is older than another
				// instance's claim: the next pass counts again.
				return
			}
		}
	}
}

// removal is the outcome of one surplus removal.
type removal int

const (
	// removalSkipped: the VM was no longer idle here; nothing was done.
	removalSkipped removal = iota
	// removalDone: the VM was taken and its deletion started (a failed
	// deletion stays marked and is retried by cleanup).
	removalDone
	// removalStale: another instance took the VM since the listing (or it
	// is gone): the listing, and the counts made from it, are stale.
	removalStale
)

// remove marks the idle pool VM v for deletion, in one step with the
// check that it is still idle (which keeps a concurrent spawn of this
// process off it), takes it in vCenter with the claim's compare-and-swap
// (takeInVCenter: which keeps the other instances' claims off it) and
// deletes it, logging msg with detail.
//
// Without the compare-and-swap, a listing older than another instance's
// claim still shows the VM idle: the removal would power off and destroy
// a VM that instance had claimed, renamed and started its worker in
// (docs/high-availability.md, "Deletions decided on a listing").
func (p *Pool) remove(ctx context.Context, v inventory.VM, msg, detail string) removal {
	ref := v.ObjectRef().Value
	if _, err := p.Life.MoveFrom(v.Name, lifecycle.Claimable(), lifecycle.Marked, lifecycle.WithRef(ref)); err != nil {
		return removalSkipped
	}
	k, _ := keyOf(p.Hatchery, v)
	if err := p.takeInVCenter(ctx, v); err != nil {
		// Not ours to delete: the mark goes, the VM is another
		// instance's worker now (or gone, or unreachable: the next pass
		// decides again).
		if derr := p.Life.Drop(v.Name, lifecycle.Marked, lifecycle.WithRef(ref)); derr != nil {
			p.Log.Debug("surplus mark kept", logkey.VM, v.Name, logkey.Err, derr)
		}
		p.Inventory.Invalidate()
		if errors.Is(err, errClaimLost) || errors.Is(err, errClaimGone) {
			p.Log.Info("surplus provisioned vm taken by another instance, left alone", logkey.VM, v.Name, logkey.Model, k.Model, logkey.Flavor, k.Flavor, logkey.Err, err)
			return removalStale
		}
		p.warnUnlessShuttingDown(ctx, "surplus provisioned vm not taken, retried next pass", logkey.VM, v.Name, logkey.Err, err)
		return removalSkipped
	}
	p.Log.Info(msg, logkey.VM, v.Name, logkey.Model, k.Model, logkey.Flavor, k.Flavor, logkey.Detail, detail)
	// Taken: no other instance claims it any more, whatever its power
	// state (a hot pool VM runs or is suspended).
	if err := p.Custody.Delete(ctx, v, custody.StopRunning); err != nil {
		p.warnUnlessShuttingDown(ctx, "surplus provisioned vm not deleted, retried by cleanup", logkey.VM, v.Name, logkey.Err, err)
	}
	return removalDone
}

// warnUnlessShuttingDown logs msg at WARN, or at INFO once ctx has ended:
// a vCenter wait cut short by shutdown is not a fault (the next start
// judges the VM from its annotation), and a healthy run logs no WARN.
func (p *Pool) warnUnlessShuttingDown(ctx context.Context, msg string, args ...any) {
	if ctx.Err() != nil {
		p.Log.Info(msg+" (shutting down)", args...)
		return
	}
	p.Log.Warn(msg, args...)
}
