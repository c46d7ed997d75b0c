package clonespec

import (
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// TemplateCloneMode is the clone mode a worker of the template o (read
// with config.hardware.device and snapshot: vcenter.Port.LoadTemplate) at
// the template's own size gets, with snapshotName the configured
// linkedCloneSnapshot: ModeLinked and the snapshot, or ModeFull and why.
// It is the spawn's own rule (decideCloneMode), for `vcenter check`.
func TemplateCloneMode(o mo.VirtualMachine, snapshotName string) (mode string, snapshot *types.ManagedObjectReference, reason string) {
	d := decideCloneMode(templateInfoOf(o), nil, snapshotName)
	return d.Mode, d.Snapshot, d.Reason
}

// PlacementCloneMode is TemplateCloneMode for a clone onto datastore ds
// (named dsName) of placement: a linked clone becomes full when the
// template's disks are not all on ds, the spawn's placement rule
// (onPlacement, as Builder's spec applies it), for `vcenter check`.
func PlacementCloneMode(o mo.VirtualMachine, snapshotName string, ds types.ManagedObjectReference, dsName, placement string) (mode string, snapshot *types.ManagedObjectReference, reason string) {
	ti := templateInfoOf(o)
	d := onPlacement(decideCloneMode(ti, nil, snapshotName), ti.Devices, ds, dsName, placement)
	return d.Mode, d.Snapshot, d.Reason
}
