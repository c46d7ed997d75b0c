package clonespec

import (
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// TemplateCloneMode is the clone mode a worker of template t (read by
// vctypes.Port.LoadTemplate) at the template's own size gets, with
// snapshotName the configured linkedCloneSnapshot: ModeLinked and the
// snapshot, or ModeFull (snapshot zero) and why. It is the spawn's own
// rule (decideCloneMode), for `vcenter check`.
func TemplateCloneMode(t vctypes.Template, snapshotName string) (mode string, snapshot vctypes.Ref, reason string) {
	d := decideCloneMode(t, nil, snapshotName)
	return d.Mode, d.Snapshot, d.Reason
}

// PlacementCloneMode is TemplateCloneMode for a clone onto datastore ds
// (named dsName) of placement: a linked clone becomes full when the
// template's disks are not all on ds, the spawn's placement rule
// (onPlacement, as Builder's spec applies it), for `vcenter check`.
func PlacementCloneMode(t vctypes.Template, snapshotName string, ds vctypes.Ref, dsName, placement string) (mode string, snapshot vctypes.Ref, reason string) {
	d := onPlacement(decideCloneMode(t, nil, snapshotName), t, ds, dsName, placement)
	return d.Mode, d.Snapshot, d.Reason
}
