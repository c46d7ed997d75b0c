package clonespec

import (
	"log/slog"
	"strconv"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// Clone modes: how a worker's disks are made from its template
// (docs/flavors-and-capacity.md, "Clone mode").
const (
	// ModeLinked: a delta disk on the template's snapshot
	// (createNewChildDiskBacking): no disk copy.
	ModeLinked = "linked"
	// ModeFull: the template's disks are copied
	// (moveChildMostDiskBacking without a snapshot).
	ModeFull = "full"
)

// cloneDecision is the clone mode of one clone and why.
type cloneDecision struct {
	Mode string
	// Snapshot is the snapshot of a linked clone (zero for a full one).
	Snapshot vctypes.Ref
	// Reason says why a clone is full, for the log; "" for a linked clone.
	Reason string
	// FlavorFallback: the template has a snapshot but the flavor grows the
	// disk, so this clone is full.
	FlavorFallback bool
	// Placement is set when the placement's datastore made the clone full
	// (the line is said once per template and placement).
	Placement string
}

// decideCloneMode picks the clone mode of a clone of template t, for
// flavor (nil: the template's size), with snapshotName the configured
// linkedCloneSnapshot ("" : the template's current snapshot). A linked
// clone needs a snapshot, and a flavor that grows the first disk beyond
// the template's cannot use one: a delta disk on a snapshot is never
// extended.
func decideCloneMode(t vctypes.Template, flavor *config.Flavor, snapshotName string) cloneDecision {
	var snap vctypes.Ref
	if snapshotName != "" {
		for _, s := range t.Snapshots {
			if s.Name == snapshotName {
				snap = s.Ref
				break
			}
		}
		if snap.IsZero() {
			return cloneDecision{Mode: ModeFull, Reason: "template has no snapshot named " + strconv.Quote(snapshotName) + " (linkedCloneSnapshot): full clone"}
		}
	} else {
		snap = t.CurrentSnapshot
	}
	if snap.IsZero() {
		return cloneDecision{Mode: ModeFull, Reason: "template has no snapshot: full clone (take a snapshot of the template for linked clones)"}
	}
	if growsDisk(flavor, t) {
		return cloneDecision{Mode: ModeFull, FlavorFallback: true,
			Reason: "flavor " + strconv.Quote(flavor.Name) + " grows the disk beyond the template's, a linked clone cannot: full clone"}
	}
	return cloneDecision{Mode: ModeLinked, Snapshot: snap}
}

// growsDisk tells whether flavor asks for a first disk larger than the
// template's (a template without disk: no; the flavor is refused when
// the clone is built).
func growsDisk(flavor *config.Flavor, t vctypes.Template) bool {
	if flavor == nil || flavor.DiskSizeGB <= 0 || len(t.Disks) == 0 {
		return false
	}
	return flavor.DiskSizeGB<<30 > t.Disks[0].CapacityBytes
}

// onPlacement is the placement rule of a clone decision: a linked clone
// onto datastore ds (named dsName) of placement needs the template's disks
// on ds; when they are not there the clone is full.
func onPlacement(mode cloneDecision, t vctypes.Template, ds vctypes.Ref, dsName, placement string) cloneDecision {
	if mode.Mode != ModeLinked || disksOn(t, ds) {
		return mode
	}
	return cloneDecision{Mode: ModeFull, Placement: placement,
		Reason: "template's disks are not on datastore " + strconv.Quote(dsName) + " of placement " + strconv.Quote(placement) + ": full clone (name a copy in its templateCopies for linked clones)"}
}

// disksOn tells whether every disk of t is backed on datastore ds (a
// template without disks: true). A backing that names no datastore is
// taken as on it.
func disksOn(t vctypes.Template, ds vctypes.Ref) bool {
	for _, d := range t.Disks {
		if !d.Datastore.IsZero() && d.Datastore.Value != ds.Value {
			return false
		}
	}
	return true
}

// logCloneMode logs the clone mode of a template once per template and
// mode (a template without snapshot would otherwise log at every clone),
// and at every clone the fall-back of a flavor that grows the disk: that
// one depends on the job, not on the template.
func (b *Builder) logCloneMode(log *slog.Logger, template Template, annot *inventory.Annotation, flavor *config.Flavor, d cloneDecision) {
	if flavor == nil {
		flavor = &config.Flavor{}
	}
	tname := template.Name
	if d.FlavorFallback {
		log.Info("clone mode", logkey.VM, annot.WorkerName, logkey.Model, tname, logkey.Flavor, flavor.Name, "mode", d.Mode, logkey.Detail, d.Reason)
		return
	}
	if !b.firstModeLog(template.Ref.Value + "/" + d.Mode + "/" + d.Reason) {
		return
	}
	if d.Placement != "" {
		log.Info("clone mode", logkey.Model, tname, logkey.Placement, d.Placement, "mode", d.Mode, logkey.Detail, d.Reason)
		return
	}
	if d.Mode == ModeLinked {
		log.Info("clone mode", logkey.Model, tname, "mode", d.Mode, logkey.Detail, "linked clones from snapshot "+d.Snapshot.Value)
		return
	}
	log.Info("clone mode", logkey.Model, tname, "mode", d.Mode, logkey.Detail, d.Reason)
}

// firstModeLog records key and reports whether it was new.
func (b *Builder) firstModeLog(key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.modeLogged[key] {
		return false
	}
	b.modeLogged[key] = true
	return true
}
