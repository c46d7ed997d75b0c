package clonespec

import (
	"context"
	"log/slog"
	"strconv"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// TemplateInfo is what a clone needs of a template (vcenter.Port.LoadTemplate).
type TemplateInfo struct {
	// Devices is the template's device list.
	Devices object.VirtualDeviceList
	// CurrentSnapshot is the template's current snapshot; nil without one.
	CurrentSnapshot *types.ManagedObjectReference
	// Snapshots are every snapshot of the template, depth first.
	Snapshots []TemplateSnapshot
}

// TemplateSnapshot is one snapshot of a template.
type TemplateSnapshot struct {
	// Name is the snapshot's name.
	Name string
	// Ref is the snapshot's reference.
	Ref types.ManagedObjectReference
}

// loadTemplateInfo reads a template's devices and snapshots.
func (b *Builder) loadTemplateInfo(ctx context.Context, template types.ManagedObjectReference) (TemplateInfo, error) {
	o, err := b.port.LoadTemplate(ctx, template)
	if err != nil {
		return TemplateInfo{}, err
	}
	return templateInfoOf(o), nil
}

// templateInfoOf builds a TemplateInfo from a VM read with
// config.hardware.device and snapshot.
func templateInfoOf(o mo.VirtualMachine) TemplateInfo {
	var ti TemplateInfo
	if o.Config != nil {
		ti.Devices = object.VirtualDeviceList(o.Config.Hardware.Device)
	}
	if o.Snapshot == nil {
		return ti
	}
	ti.CurrentSnapshot = o.Snapshot.CurrentSnapshot
	var walk func([]types.VirtualMachineSnapshotTree)
	walk = func(nodes []types.VirtualMachineSnapshotTree) {
		for _, n := range nodes {
			ti.Snapshots = append(ti.Snapshots, TemplateSnapshot{Name: n.Name, Ref: n.Snapshot})
			walk(n.ChildSnapshotList)
		}
	}
	walk(o.Snapshot.RootSnapshotList)
	return ti
}

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
	// Snapshot is the snapshot of a linked clone.
	Snapshot *types.ManagedObjectReference
	// Reason says why a clone is full, for the log; "" for a linked clone.
	Reason string
	// FlavorFallback: the template has a snapshot but the flavor grows the
	// disk, so this clone is full.
	FlavorFallback bool
	// Placement is set when the placement's datastore made the clone full
	// (the line is said once per template and placement).
	Placement string
}

// decideCloneMode picks the clone mode of a clone of a template whose
// info is ti, for flavor (nil: the template's size), with snapshotName the
// configured linkedCloneSnapshot ("" : the template's current snapshot).
// A linked clone needs a snapshot, and a flavor that grows the first disk
// beyond the template's cannot use one: a delta disk on a snapshot is
// never extended.
func decideCloneMode(ti TemplateInfo, flavor *config.Flavor, snapshotName string) cloneDecision {
	var snap *types.ManagedObjectReference
	if snapshotName != "" {
		for _, s := range ti.Snapshots {
			if s.Name == snapshotName {
				ref := s.Ref
				snap = &ref
				break
			}
		}
		if snap == nil {
			return cloneDecision{Mode: ModeFull, Reason: "template has no snapshot named " + strconv.Quote(snapshotName) + " (linkedCloneSnapshot): full clone"}
		}
	} else if ti.CurrentSnapshot != nil {
		ref := *ti.CurrentSnapshot
		snap = &ref
	}
	if snap == nil {
		return cloneDecision{Mode: ModeFull, Reason: "template has no snapshot: full clone (take a snapshot of the template for linked clones)"}
	}
	if growsDisk(flavor, ti.Devices) {
		return cloneDecision{Mode: ModeFull, FlavorFallback: true,
			Reason: "flavor " + strconv.Quote(flavor.Name) + " grows the disk beyond the template's, a linked clone cannot: full clone"}
	}
	return cloneDecision{Mode: ModeLinked, Snapshot: snap}
}

// growsDisk tells whether flavor asks for a first disk larger than the
// template's.
func growsDisk(flavor *config.Flavor, devices object.VirtualDeviceList) bool {
	if flavor == nil || flavor.DiskSizeGB <= 0 {
		return false
	}
	change, err := growFirstDisk(flavor, devices)
	return err == nil && change != nil
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
