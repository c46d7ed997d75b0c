package vsphere

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// releaseTimeout bounds the release of a reclaimed VM's job: two API calls
// (read its status, release it), made from the cleanup pass, which must not
// stall on a slow API.
const releaseTimeout = 30 * time.Second

// releaseReclaimedJob hands the job of a VM the cleanup reclaimed before
// its worker registered back to the queue at once, instead of leaving it
// booked until the API times it out. A V1 job id is a number; anything
// else is a V2 run job, released in the region the V2 sign-in answered
// (the one every V2 queue route takes). A refusal (the job was
// taken, finished or released meanwhile) is logged at Info: nothing is
// lost.
//
// The job is released only while it still waits for this VM's worker (V1
// Waiting, V2 Scheduling), read first: the API puts back in the queue
// whatever job the hatchery that took it releases, and the VM's record can
// say "never started" of a worker that did start and took the job (a stop
// cut the write of its start, or another instance of the hatchery wrote
// none before it died). A job that cannot be read is left to the API's own
// timeout.
func (h *HatcheryVSphere) releaseReclaimedJob(ctx context.Context, vm inventory.VM, reason string) {
	if vm.Annotation == nil || vm.Annotation.JobID == "" || vm.Annotation.RegisterOnly || h.cds == nil {
		return
	}
	job := vm.Annotation.JobID
	rctx, cancel := context.WithTimeout(ctx, releaseTimeout)
	defer cancel()
	id, perr := strconv.ParseInt(job, 10, 64)
	v1 := perr == nil
	status, err := h.reclaimedJobStatus(rctx, v1, id, job)
	if err == nil && status != waitingStatus(v1) {
		h.log.Info("job of reclaimed vm not released", logkey.VM, vm.Name, logkey.Job, job, logkey.Detail, reason+"; job "+status)
		return
	}
	if err == nil {
		if v1 {
			err = h.cds.QueueJobRelease(rctx, id)
		} else {
			err = h.cds.V2QueueJobRelease(rctx, h.cds.V2Region(), job)
		}
	}
	if err != nil {
		h.log.Info("job of reclaimed vm not released", logkey.VM, vm.Name, logkey.Job, job, logkey.Detail, reason, logkey.Err, err)
		return
	}
	h.log.Info("job of reclaimed vm released", logkey.VM, vm.Name, logkey.Job, job, logkey.Detail, reason)
}

// waitingStatus is the status of a job booked (V1) or taken (V2) by a
// hatchery whose worker has not taken it yet.
func waitingStatus(v1 bool) string {
	if v1 {
		return sdk.StatusWaiting
	}
	return sdk.V2StatusScheduling
}

// reclaimedJobStatus reads the status of a reclaimed VM's job: V1 by
// number, V2 in the region the V2 sign-in answered.
func (h *HatcheryVSphere) reclaimedJobStatus(ctx context.Context, v1 bool, id int64, job string) (string, error) {
	if v1 {
		info, err := h.cds.QueueJobInfo(ctx, id)
		if err != nil {
			return "", fmt.Errorf("read v1 job %d: %w", id, err)
		}
		return info.Status, nil
	}
	info, err := h.cds.V2QueueJobInfo(ctx, h.cds.V2Region(), job)
	if err != nil {
		return "", fmt.Errorf("read v2 job %s: %w", job, err)
	}
	return info.RunJob.Status, nil
}
