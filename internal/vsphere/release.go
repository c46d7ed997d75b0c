package vsphere

import (
	"context"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"strconv"
	"time"
)

// releaseTimeout bounds the release of a reclaimed VM's job: one API call,
// made from the cleanup pass, which must not stall on a slow API.
const releaseTimeout = 30 * time.Second

// releaseReclaimedJob hands the job of a VM the cleanup reclaimed before
// its worker registered back to the queue at once, instead of leaving it
// booked until the API times it out. A V1 job id is a number; anything
// else is a V2 run job, released in the region the V2 sign-in answered
// (the one every V2 queue route takes). A refusal (the job was
// taken, finished or released meanwhile) is logged at Info: nothing is
// lost.
func (h *HatcheryVSphere) releaseReclaimedJob(ctx context.Context, vm inventory.VM, reason string) {
	if vm.Annotation == nil || vm.Annotation.JobID == "" || vm.Annotation.RegisterOnly || h.cds == nil {
		return
	}
	job := vm.Annotation.JobID
	rctx, cancel := context.WithTimeout(ctx, releaseTimeout)
	defer cancel()
	var err error
	if id, perr := strconv.ParseInt(job, 10, 64); perr == nil {
		err = h.cds.QueueJobRelease(rctx, id)
	} else {
		err = h.cds.V2QueueJobRelease(rctx, h.cds.V2Region(), job)
	}
	if err != nil {
		h.log.Info("job of reclaimed vm not released", logkey.VM, vm.Name, logkey.Job, job, logkey.Detail, reason, logkey.Err, err)
		return
	}
	h.log.Info("job of reclaimed vm released", logkey.VM, vm.Name, logkey.Job, job, logkey.Detail, reason)
}
