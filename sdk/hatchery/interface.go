// Package hatchery is the common CDS hatchery framework: the interface a
// hatchery implements, the run loop that reads the CDS queue and dispatches
// spawns within the configured capacity (docs/architecture.md), worker tokens and
// configuration, heartbeats and the /mon HTTP server. The worker counts
// are sdk/workerpool's, the refusal codes sdk/refusal's.
package hatchery

import (
	"context"
	"errors"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
)

// Interface is what a hatchery implements for the framework.
type Interface interface {
	// Name is the hatchery's name (commonConfiguration.name).
	Name() string
	// ModelType is the worker model type served ("vsphere").
	ModelType() string
	// CanSpawn tells whether this hatchery can serve the job at all
	// (model type, requirements, duplicates): nil when it can, else the
	// refusal with its code (sdk/refusal), which the framework logs, counts
	// and reports as it is; CanSpawn logs nothing itself. It must be cheap:
	// no vCenter round trip per call beyond reading shared state.
	CanSpawn(ctx context.Context, model sdk.WorkerStarterWorkerModel, jobID string, requirements []sdk.Requirement) *refusal.Refusal
	// CanAllocateResources tells whether the infrastructure has room for the
	// next worker of that model now. false means "not now": the job stays
	// queued. An error is logged and treated as false.
	CanAllocateResources(ctx context.Context, model sdk.WorkerStarterWorkerModel, jobID string, requirements []sdk.Requirement) (bool, error)
	// SpawnWorker starts one worker. It blocks until the worker process is
	// launched in the guest or the spawn failed (and was cleaned up).
	SpawnWorker(ctx context.Context, args SpawnArguments) error
	// WorkersStarted returns the names of the workers this hatchery has
	// started and not yet destroyed (pre-provisioned idle VMs excluded).
	WorkersStarted(ctx context.Context) ([]string, error)
	// Status returns the hatchery's own /mon/status lines.
	Status(ctx context.Context) []sdk.MonitoringStatusLine
}

// ResourceAllocator is a hatchery whose admission reserves what the next
// worker takes (CPU, memory...) and hands the reservation to the framework.
// The framework then owns it: it passes it on to SpawnWorker for the job
// (the spawn ends it), or releases it on every path that does not spawn —
// booking lost to another hatchery, job gone, job refused after admission,
// shutdown — so a footprint is never left reserved for a job that will not
// run. When a hatchery implements it, the framework calls it instead of
// CanAllocateResources.
type ResourceAllocator interface {
	// AllocateResources is CanAllocateResources returning what it reserved.
	// A nil error admits the job; the Reservation may be nil when nothing
	// was reserved. The framework hands it to the job's SpawnWorker
	// (SpawnArguments.Reservation), so it may carry what the hatchery
	// decided for the job (its flavor). A *refusal.Refusal error (errors.As) says why the job does not
	// fit now; any other error means the hatchery could not decide. Both
	// keep the job queued.
	AllocateResources(ctx context.Context, model sdk.WorkerStarterWorkerModel, jobID string, requirements []sdk.Requirement) (Reservation, error)
}

// Reservation is what a ResourceAllocator reserved for one job.
type Reservation interface {
	// Release gives the reservation back at once, for why (a refusal code:
	// booked, shutdown...). The job will not be spawned for under it. It
	// must not block, and calls after the first do nothing.
	Release(why refusal.Reason)
}

// InterfaceWithModels is a hatchery that serves worker models V1 and may
// register them (build their template).
type InterfaceWithModels interface {
	Interface
	// NeedRegistration tells whether a V1 model's template must be (re)built.
	NeedRegistration(ctx context.Context, model *sdk.Model) bool
}

// SpawnArguments is everything SpawnWorker needs for one worker.
type SpawnArguments struct {
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
func (a SpawnArguments) ModelPath() string { return a.Model.GetName() }

// ErrNotReady is wrapped by the error a Hatchery method returns while its
// backend has not been reached for the first time yet (a daemon starting
// before its hypervisor answers). The framework retries as for any error,
// but logs at info level: waiting at start is no fault.
var ErrNotReady = errors.New("hatchery not ready")
