package spawn

import (
	"time"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
)

// Arguments is everything a hatchery's SpawnWorker (hatchery.Interface)
// needs for one worker.
type Arguments struct {
	// WorkerName is the unique name of the worker (and of its VM).
	WorkerName string
	// Model is the resolved worker model.
	Model sdk.WorkerStarterWorkerModel
	// JobID is the V1 job id (decimal) or the V2 run job id; "" for a
	// registration.
	JobID string
	// Requirements are the job's requirements (V1; V2 flavor is in Model).
	Requirements []sdk.Requirement
	// RegisterOnly is true when the worker only registers a V1 model.
	RegisterOnly bool
	// HatcheryName is the name of the hatchery spawning.
	HatcheryName string
	// WorkerConfig is the worker configuration, token included, that the
	// hatchery passes to the worker (CDS_CONFIG). It holds a secret: never log it.
	WorkerConfig WorkerConfig
	// Queued is when CDS queued the job, as the queue reports it; zero
	// when unknown (a registration). A hatchery measures the job's start
	// latency (queued to worker launched) from it.
	Queued time.Time
	// Booked is when this hatchery booked (V1) or took (V2) the job; zero
	// for a registration.
	Booked time.Time
	// Reservation is what the hatchery's ResourceAllocator returned for
	// this job, handed over with the spawn (nil when none: a registration,
	// a hatchery without ResourceAllocator). It carries the hatchery's own
	// decision (e.g. the flavor it reserved for) to SpawnWorker, which need
	// not decide again; SpawnWorker ends it.
	Reservation Reservation
}

// ModelPath is a convenience for logs: the model's name or "".
func (a Arguments) ModelPath() string { return a.Model.GetName() }

// Reservation is what a hatchery's admission (hatchery.ResourceAllocator)
// reserved for one job.
type Reservation interface {
	// Release gives the reservation back at once, for why (a refusal code:
	// booked, shutdown...). The job will not be spawned for under it. It
	// must not block, and calls after the first do nothing.
	Release(why refusal.Reason)
}
