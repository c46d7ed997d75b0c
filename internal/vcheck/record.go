package vcheck

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// FolderPrefix starts the name of every scratch folder of the check,
// made directly in the hatchery's folder (folderString): the run ID
// follows. The check's lock objects (vcenter.Locks) start with it too.
const FolderPrefix = "hatchery-vsphere-check-"

// RecordPrefix starts the annotation (Notes) of every VM the check
// creates: its record, the proof of ownership its clean-up asks before it
// powers off or destroys a VM. The hatchery's own record is a JSON
// document (internal/inventory), so neither takes the other's VMs.
const RecordPrefix = "hatchery-vsphere vcenter check; run "

// RecordKey is the extraConfig key mirroring the record (the hatchery
// mirrors its own record likewise): a clone whose annotation a copy lost
// still carries it.
const RecordKey = "hatchery-vsphere-check.record"

// recordOf is the annotation of run's VMs.
func recordOf(run string) string { return RecordPrefix + run }

// hasRecord tells whether vm carries a record of the check, in its
// annotation or its mirror.
func hasRecord(vm vctypes.VMInfo) bool {
	return strings.HasPrefix(vm.Notes, RecordPrefix) || strings.HasPrefix(extraConfig(vm, RecordKey), RecordPrefix)
}

// vmRef is a VM the run made, by reference and name.
type vmRef struct {
	ref  types.ManagedObjectReference
	name string
}

// createScratch makes the run's scratch folder: one line.
func (r *runner) createScratch(ctx context.Context) bool {
	start := time.Now()
	r.scratchName = FolderPrefix + r.o.RunID
	ref, err := r.vc.CreateScratchFolder(ctx, r.scratchName)
	res := r.outcome("scratch folder", r.scratchName, start, err,
		"grant Folder.Create and Folder.Delete on the hatchery's folder (folderString) to the vCenter user")
	if err != nil {
		res.Needed = true
		return false
	}
	r.scratch = ref
	return true
}

// removeScratch destroys the run's VMs (its own record, read again) and
// its folder, unless Options.Keep: one line.
func (r *runner) removeScratch(ctx context.Context) {
	if r.o.Keep {
		for _, vm := range r.vms {
			_ = r.powerOff(ctx, vm.ref)
		}
		r.rep.Kept = r.scratchName
		return
	}
	start := time.Now()
	folders, err := r.vc.ScratchFolders(ctx, r.scratchName)
	if err == nil {
		for _, f := range folders {
			if f.Name == r.scratchName {
				var removed int
				removed, err = r.removeFolder(ctx, f)
				if err == nil {
					r.add("clean-up", r.scratchName, start, Pass, fmt.Sprintf("%d vm(s) and the folder removed", removed))
				}
			}
		}
	}
	if err != nil {
		r.outcome("clean-up", r.scratchName, start, err, "remove the folder by hand or run `vcenter check --clean`")
	}
}

// cleanLeftovers removes what earlier runs left (killed, or --keep):
// each scratch folder's VMs carrying the check's record, then the folder
// when that empties it, and the check's lock objects. A VM without the
// record is never touched: its folder stays, said on the line.
func (r *runner) cleanLeftovers(ctx context.Context) {
	start := time.Now()
	folders, err := r.vc.ScratchFolders(ctx, FolderPrefix)
	if err != nil {
		r.outcome("clean-up of earlier runs", "folders "+FolderPrefix+"*", start, err, "")
		return
	}
	sort.Slice(folders, func(i, j int) bool { return folders[i].Name < folders[j].Name })
	var names []string
	vms := 0
	for _, f := range folders {
		n, err := r.removeFolder(ctx, f)
		vms += n
		if err != nil {
			r.outcome("clean-up of earlier runs", f.Name, start, err, "the folder holds objects the check did not make: inspect and remove them by hand")
			continue
		}
		names = append(names, f.Name)
	}
	locks, err := r.vc.ListLocks(ctx, FolderPrefix)
	if err != nil {
		r.outcome("clean-up of earlier runs", "locks "+FolderPrefix+"*", start, err, "")
		return
	}
	for name, ref := range locks {
		if err := r.vc.DeleteLock(ctx, ref); err != nil {
			r.outcome("clean-up of earlier runs", "lock "+name, start, err, "")
			continue
		}
		names = append(names, "lock "+name)
	}
	if len(names) == 0 {
		r.add("clean-up of earlier runs", "folders "+FolderPrefix+"*", start, Pass, "nothing left by earlier runs")
		return
	}
	r.add("clean-up of earlier runs", "folders "+FolderPrefix+"*", start, Pass,
		fmt.Sprintf("removed %d vm(s) and %s", vms, strings.Join(names, ", ")))
}

// removeFolder powers off and destroys the VMs of f carrying the
// check's record, then deletes f when nothing else is in it. It returns
// the VMs destroyed; an object without the record leaves the folder in
// place (an error naming it).
func (r *runner) removeFolder(ctx context.Context, f vcenter.ScratchFolder) (int, error) {
	removed := 0
	var foreign []string
	for _, vm := range f.VMs {
		if !hasRecord(vm) {
			foreign = append(foreign, vm.Name)
			continue
		}
		if err := r.destroy(ctx, vcenter.MORef(vm.Ref)); err != nil {
			return removed, err
		}
		removed++
	}
	if len(foreign) > 0 || f.Others > 0 {
		return removed, errorf("folder %q holds %d object(s) without the check's record (%s): left alone",
			f.Name, len(foreign)+f.Others, strings.Join(foreign, ", "))
	}
	return removed, r.vc.DeleteEmptyFolder(ctx, f.Ref)
}
