package vsphere

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// releaseTimeout bounds the release of a reclaimed VM's job: two API calls
// (read its status, release it), made from the cleanup pass, which must not
// stall on a slow API. It bounds the read of a job by the awol verdict too.
const releaseTimeout = 30 * time.Second

// jobView is what the CDS API shows of the job a VM was started for
// (docs/design.md#cleanup).
type jobView struct {
	v1     bool
	id     int64  // V1 job number
	key    string // the annotation's job id: V1 decimal, V2 run job id
	status string
	// worker is the worker the API says took the job ("" none yet).
	worker string
	// ours: the job is still booked (V1) or taken (V2) by this hatchery.
	ours bool
	// gone: the API no longer knows the job (V1 403, V2 404).
	gone bool
}

// waiting tells whether the job still waits for a worker of this
// hatchery's: V1 Waiting, V2 Scheduling, and booked or taken by us.
func (j jobView) waiting() bool {
	return j.ours && j.status == waitingStatus(j.v1)
}

// readJob reads the job a VM was started for: a V1 job id is a number;
// anything else is a V2 run job, read in the region the V2 sign-in
// answered (the one every V2 queue route takes). A job the API no longer
// knows is a view with gone set, not an error.
func (h *HatcheryVSphere) readJob(ctx context.Context, job string) (jobView, error) {
	id, perr := strconv.ParseInt(job, 10, 64)
	v := jobView{v1: perr == nil, id: id, key: job}
	if h.cds == nil {
		return v, fmt.Errorf("read job %s: no cds api client", job)
	}
	if v.v1 {
		info, err := h.cds.QueueJobInfo(ctx, id)
		switch {
		case errors.Is(err, cdsclient.ErrForbidden): // a missing V1 job answers 403
			v.gone = true
			return v, nil
		case err != nil:
			return v, fmt.Errorf("read v1 job %d: %w", id, err)
		}
		v.status, v.worker, v.ours = info.Status, info.Job.WorkerName, info.BookedBy.Name == h.Name()
		return v, nil
	}
	info, err := h.cds.V2QueueJobInfo(ctx, h.cds.V2Region(), job)
	switch {
	case errors.Is(err, cdsclient.ErrNotFound):
		v.gone = true
		return v, nil
	case err != nil:
		return v, fmt.Errorf("read v2 job %s: %w", job, err)
	}
	v.status, v.worker, v.ours = info.RunJob.Status, info.RunJob.WorkerName, info.RunJob.HatcheryName == h.Name()
	return v, nil
}

// releaseReclaimedJob hands the job of a VM the cleanup reclaimed before
// its worker registered back to the queue at once, instead of leaving it
// booked until the API times it out. A refusal is logged at Info: nothing
// is lost.
//
// The job is read again first (the VM's deletion took a while) and
// released only while it still waits for a worker of ours (jobView.waiting):
// the API puts back in the queue whatever job the hatchery that took it
// releases, a V2 job that ended included, and frees a V1 booking whoever
// holds it. A V1 booking the API dropped (its two-minute lifetime) is not
// ours to release; a release answered "already released" is done. A job
// that cannot be read is left to the API's own timeout.
func (h *HatcheryVSphere) releaseReclaimedJob(ctx context.Context, vm inventory.VM, reason string) {
	if vm.Annotation == nil || vm.Annotation.JobID == "" || vm.Annotation.RegisterOnly || h.cds == nil {
		return
	}
	job := vm.Annotation.JobID
	rctx, cancel := context.WithTimeout(ctx, releaseTimeout)
	defer cancel()
	j, err := h.readJob(rctx, job)
	if err == nil && !j.waiting() {
		h.log.Info("job of reclaimed vm not released", logkey.VM, vm.Name, logkey.Job, job, logkey.Detail, reason+"; "+j.describe())
		return
	}
	if err == nil {
		if j.v1 {
			err = h.cds.QueueJobRelease(rctx, j.id)
		} else {
			err = h.cds.V2QueueJobRelease(rctx, h.cds.V2Region(), job)
		}
	}
	switch {
	case errors.Is(err, cdsclient.ErrAlreadyReleased):
		h.log.Info("job of reclaimed vm already released by the api", logkey.VM, vm.Name, logkey.Job, job, logkey.Detail, reason)
	case err != nil:
		h.log.Info("job of reclaimed vm not released", logkey.VM, vm.Name, logkey.Job, job, logkey.Detail, reason, logkey.Err, err)
	default:
		h.log.Info("job of reclaimed vm released", logkey.VM, vm.Name, logkey.Job, job, logkey.Detail, reason)
	}
}

// describe is the job as the verdicts and logs name it.
func (j jobView) describe() string {
	switch {
	case j.gone:
		return "job gone from the api"
	case j.status == waitingStatus(j.v1) && !j.ours:
		return "job " + j.status + ", no longer held by this hatchery"
	case j.worker != "":
		return "job " + j.status + ", worker " + j.worker
	}
	return "job " + j.status
}

// waitingStatus is the status of a job booked (V1) or taken (V2) by a
// hatchery whose worker has not taken it yet.
func waitingStatus(v1 bool) string {
	if v1 {
		return sdk.StatusWaiting
	}
	return sdk.V2StatusScheduling
}
