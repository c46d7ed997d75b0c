package vsphere

import (
	"context"
	"log/slog"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/admission"
	"github.com/cds-contrib/hatchery-vsphere/internal/capacity"
	"github.com/cds-contrib/hatchery-vsphere/internal/clonespec"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/placement"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// Placements is the hatchery's placement set: what /mon/status, the
// metrics and ctl read and change of the placements (internal/placement).
// nil until the hatchery builds it.
func (h *HatcheryVSphere) Placements() placement.Set { return h.placements }

// newPlacementBook builds the placements' Book from cfg: one entry per
// placement (config.Config.EffectivePlacements), the back-off on only
// with [[placements]] (docs/placements.md: with the default placement
// alone there is nowhere else to go, and the hatchery behaves as before).
// Placements are not live keys (config.LiveKey): the Book lives as long
// as the process.
func newPlacementBook(cfg *config.Config, log *slog.Logger, now func() time.Time) *placement.Book {
	var names []string
	for _, p := range cfg.EffectivePlacements() {
		names = append(names, p.Name)
	}
	return placement.NewBook(placement.BookOptions{Names: names, Backoff: len(cfg.Placements) > 0, Log: log, Now: now})
}

// where is where one clone goes with [[placements]]: its placement's
// configuration and the datastore the decision chose.
type where struct {
	placement config.Placement
	datastore string
	// key is the reservation's key (a job, a warm-pool slot); "" when
	// the clone has none.
	key string
	// ownFolder is true when the placement names a folder other than
	// folderString (folderOf).
	ownFolder bool
}

// whereOf returns where the clone carrying annot goes: the placement and
// datastore its admission chose (the in-flight reservation of its job,
// or of its warm-pool slot or instant parent); nil without [[placements]],
// where the top-level keys apply as before. An instant parent always goes
// to the placement its record names (its key's, docs/instant-clones.md),
// on the datastore its reservation chose there, else that placement's
// first. A clone without a reservation (a V1 model's registration, a
// spawn without admission) goes to the first placement that is not
// cordoned, its first datastore.
func (h *HatcheryVSphere) whereOf(annot *inventory.Annotation) *where {
	return h.whereIn(h.conf(), annot)
}

// whereIn is whereOf with the configuration snapshot cfg.
func (h *HatcheryVSphere) whereIn(cfg *config.Config, annot *inventory.Annotation) *where {
	if len(cfg.Placements) == 0 {
		return nil
	}
	key := annot.JobID
	if annot.Provisioning || annot.InstantParent {
		key = capacity.ProvisionKey(annot.WorkerName)
	}
	name, ds, ok := "", "", false
	if key != "" {
		name, ds, ok = h.capacity.Ledger().PlacementOf(key)
	}
	if annot.InstantParent {
		if name != annot.Placement {
			ok, ds = true, ""
		}
		name = annot.Placement
	}
	return h.whereAmong(cfg.EffectivePlacements(), cfg.FolderString, key, name, ds, ok)
}

// planWhere is where the clone of the job key whose plan is p goes: the
// placement and datastore its admission chose, else (no admission) as
// whereOf; nil without [[placements]]. It reads the plan, not the
// configuration.
func (h *HatcheryVSphere) planWhere(p admission.Plan, key string) *where {
	if len(p.Placements) == 0 {
		return nil
	}
	return h.whereAmong(p.Placements, p.Folder, key, p.Placement, p.Datastore, p.Placement != "")
}

// whereAmong is where a clone of key goes among the placements ps
// (folder: folderString): the placement named name on datastore ds when
// ok (ds "": its first), else the first placement not cordoned, else the
// first, on its first datastore.
func (h *HatcheryVSphere) whereAmong(ps []config.Placement, folder, key, name, ds string, ok bool) *where {
	at := func(p config.Placement, ds string) *where {
		if ds == "" && len(p.Datastores) > 0 {
			ds = p.Datastores[0]
		}
		return &where{placement: p, datastore: ds, ownFolder: p.Folder != "" && p.Folder != folder}
	}
	for _, p := range ps {
		if ok && p.Name == name {
			w := at(p, ds)
			w.key = key
			return w
		}
	}
	for _, p := range ps {
		if !h.capacity.Book.Cordoned(p.Name) {
			return at(p, "")
		}
	}
	return at(ps[0], "")
}

// location is w as the clone specification takes it.
func (w *where) location() *clonespec.Location {
	if w == nil {
		return nil
	}
	return &clonespec.Location{Placement: w.placement.Name, ResourcePool: w.placement.ResourcePool,
		Datastore: w.datastore, Network: w.placement.Network}
}

// folderOf returns the VM folder a clone sent to w goes to: the
// placement's folder, else the configured one.
func (h *HatcheryVSphere) folderOf(ctx context.Context, w *where) (vctypes.Ref, error) {
	if w == nil || !w.ownFolder {
		ref, err := h.vs.LoadFolder(ctx)
		return ref, err
	}
	ref, err := h.vs.FolderAt(ctx, w.placement.Folder)
	return ref, err
}

// placementOutcome tells the Book how a clone sent to w ended and
// whether err points at the placement (then the placement backs off and
// the template's quarantine does not count it).
func (h *HatcheryVSphere) placementOutcome(w *where, vmName string, err error) bool {
	if w == nil {
		return false
	}
	book := h.capacity.Book
	if err == nil {
		book.Succeeded(w.placement.Name, w.key)
		return false
	}
	points := book.Failed(w.placement.Name, w.key, err)
	if points {
		h.log.Info("clone failed in its placement", logkey.VM, vmName, logkey.Placement, w.placement.Name, logkey.Err, err)
	}
	return points
}

// placementUnused tells the Book that the clone the admission sent to w
// will not be made (a warm-pool VM was claimed instead, or the spawn
// stopped before its clone): a probe lets the next one go.
func (h *HatcheryVSphere) placementUnused(w *where) {
	if w != nil && w.key != "" {
		h.capacity.Book.Ended(w.placement.Name, w.key)
	}
}
