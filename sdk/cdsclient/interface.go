// Package cdsclient is the HTTP client for the CDS API endpoints a hatchery
// uses (docs/design.md#cds-api). It signs in (V1 and/or V2
// depending on which tokens are configured), signs in again on 401, and maps
// API errors to typed errors.
package cdsclient

import (
	"context"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// Interface is what the hatchery framework and the vSphere hatchery need
// from the CDS API. Every method is bounded by the configured request
// timeout and by ctx. Errors returned for an API answer wrap *APIError so
// callers can test them with errors.Is against the sentinels below.
type Interface interface {
	// SignIn signs in with the configured V1 and V2 tokens (either may be
	// empty, not both) and registers the service with its public key.
	SignIn(ctx context.Context) error
	// Heartbeat sends the status lines (V1 /services/heartbeat and/or V2
	// /v2/hatchery/heartbeat, depending on the sessions).
	Heartbeat(ctx context.Context, status sdk.MonitoringStatus) error
	// ConfigCDN asks the API for the CDN endpoints; ErrNotFound when the
	// API has no CDN.
	ConfigCDN(ctx context.Context) (sdk.CDNConfig, error)
	// APIURL is the public API URL the API announced at sign-in ("" before).
	APIURL() string

	// V1 queue.

	// QueueWorkflowNodeJobRun lists the waiting V1 jobs of the given
	// regions ("" is the jobs without a region).
	QueueWorkflowNodeJobRun(ctx context.Context, regions []string) ([]sdk.WorkflowNodeJobRun, error)
	// QueueJobInfo reads one V1 job; a missing job matches ErrForbidden.
	QueueJobInfo(ctx context.Context, id int64) (*sdk.WorkflowNodeJobRun, error)
	// QueueJobBook books a V1 job; a job booked by anyone matches
	// ErrAlreadyBooked.
	QueueJobBook(ctx context.Context, id int64) (sdk.BookedJob, error)
	// QueueJobRelease gives a V1 booking back.
	QueueJobRelease(ctx context.Context, id int64) error
	// QueueJobSendSpawnInfo posts spawn infos on a V1 job.
	QueueJobSendSpawnInfo(ctx context.Context, id int64, infos []sdk.SpawnInfo) error
	// QueueJobFail sends a failed result for a job the hatchery gives up on.
	QueueJobFail(ctx context.Context, id int64, reason string) error
	// QueueEvents subscribes to /ws and sends the id of every V1 job event
	// until ctx ends or the connection drops (then it returns the error).
	QueueEvents(ctx context.Context, jobIDs chan<- int64) error

	// V2 queue. V2Region is the region the last V2 sign-in answered (""
	// before): the region every V2 queue route below takes, whatever
	// provision.region says.
	V2Region() string
	// V2QueueJobs lists the waiting V2 jobs of region.
	V2QueueJobs(ctx context.Context, region string) ([]sdk.V2WorkflowRunJob, error)
	// V2QueueJobInfo reads one V2 job and its model; a missing job matches
	// ErrNotFound.
	V2QueueJobInfo(ctx context.Context, region, jobRunID string) (*sdk.V2QueueJobInfo, error)
	// V2QueueJobTake takes a V2 job; a job no longer waiting (taken by
	// another hatchery) matches ErrAlreadyBooked.
	V2QueueJobTake(ctx context.Context, region, jobRunID string) error
	// V2QueueJobRelease gives a taken V2 job back.
	V2QueueJobRelease(ctx context.Context, region, jobRunID string) error
	// V2QueueJobSendInfo posts an info line on a V2 job.
	V2QueueJobSendInfo(ctx context.Context, region, jobRunID string, info sdk.V2SendJobRunInfo) error
	// V2QueueEvents subscribes to /v2/hatchery/ws and sends the run job id
	// of every event until ctx ends or the connection drops.
	V2QueueEvents(ctx context.Context, jobRunIDs chan<- string) error

	// Workers.

	// WorkerList lists the V1 workers.
	WorkerList(ctx context.Context) ([]sdk.Worker, error)
	// V2WorkerList lists the V2 workers (nil for none).
	V2WorkerList(ctx context.Context) ([]sdk.V2Worker, error)
	// WorkerDisable disables a V1 worker.
	WorkerDisable(ctx context.Context, id string) error

	// Worker models V1.

	// WorkerModelsEnabled lists the enabled V1 models (passwords are
	// placeholders there; see WorkerModelSecretList).
	WorkerModelsEnabled(ctx context.Context) ([]sdk.Model, error)
	// WorkerModelSecretList reads a V1 model's secrets: never log them.
	WorkerModelSecretList(ctx context.Context, groupName, modelName string) ([]sdk.WorkerModelSecret, error)
	// WorkerModelBook books a V1 model for registration.
	WorkerModelBook(ctx context.Context, groupName, modelName string) error
	// WorkerModelSpawnError reports a spawn error on a V1 model.
	WorkerModelSpawnError(ctx context.Context, groupName, modelName string, form sdk.SpawnErrorForm) error
	// V2WorkerModelGet loads a V2 model for a V1 job (defaultWorkerModelsV2).
	V2WorkerModelGet(ctx context.Context, projectKey, vcs, repo, name, branch string) (*sdk.V2WorkerModel, error)
}
