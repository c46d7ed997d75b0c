// Package hatchery is the common CDS hatchery framework: the interface a
// hatchery implements, the run loop that reads the CDS queue and dispatches
// spawns within the configured capacity (docs/architecture.md), worker tokens and
// configuration, heartbeats and the /mon HTTP server. The worker counts
// are sdk/workerpool's, the refusal codes sdk/refusal's.
package hatchery

import (
	"context"
	"errors"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
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
	SpawnWorker(ctx context.Context, args spawn.Arguments) error
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
	// (spawn.Arguments.Reservation), so it may carry what the hatchery
	// decided for the job (its flavor). A *refusal.Refusal error (errors.As) says why the job does not
	// fit now; any other error means the hatchery could not decide. Both
	// keep the job queued.
	AllocateResources(ctx context.Context, model sdk.WorkerStarterWorkerModel, jobID string, requirements []sdk.Requirement) (spawn.Reservation, error)
}

// InterfaceWithModels is a hatchery that serves worker models V1 and may
// register them (build their template).
type InterfaceWithModels interface {
	Interface
	// NeedRegistration tells whether a V1 model's template must be (re)built.
	NeedRegistration(ctx context.Context, model *sdk.Model) bool
}

// ErrNotReady is wrapped by the error a Hatchery method returns while its
// backend has not been reached for the first time yet (a daemon starting
// before its hypervisor answers). The framework retries as for any error,
// but logs at info level: waiting at start is no fault.
var ErrNotReady = errors.New("hatchery not ready")
