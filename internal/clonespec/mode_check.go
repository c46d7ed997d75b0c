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
