package cdsclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// Heartbeat posts status to /services/heartbeat (V1 session) and
// /v2/hatchery/heartbeat (V2 session), to each configured API version.
func (c *Client) Heartbeat(ctx context.Context, status sdk.MonitoringStatus) error {
	if status.Now.IsZero() {
		status.Now = time.Now()
	}
	if status.Lines == nil {
		status.Lines = []sdk.MonitoringStatusLine{}
	}
	var errs []error
	if c.HasV1() {
		if err := c.call(ctx, v1, http.MethodPost, "/services/heartbeat", nil, status, nil); err != nil {
			errs = append(errs, fmt.Errorf("heartbeat v1: %w", err))
		}
	}
	if c.HasV2() {
		if err := c.call(ctx, v2, http.MethodPost, "/v2/hatchery/heartbeat", nil, status, nil); err != nil {
			errs = append(errs, fmt.Errorf("heartbeat v2: %w", err))
		}
	}
	return errors.Join(errs...)
}

// ConfigCDN asks GET /config/cdn (V1 session) or, V2 only, GET
// /v2/config/cdn. The API answers 404 id 38 when it has no CDN: the error
// then matches ErrNotFound and the caller uses its cdn.url.
func (c *Client) ConfigCDN(ctx context.Context) (sdk.CDNConfig, error) {
	var cfg sdk.CDNConfig
	v, path := v1, "/config/cdn"
	if !c.HasV1() {
		v, path = v2, "/v2/config/cdn"
	}
	if err := c.call(ctx, v, http.MethodGet, path, nil, nil, &cfg); err != nil {
		return sdk.CDNConfig{}, fmt.Errorf("config cdn: %w", err)
	}
	return cfg, nil
}

// QueueWorkflowNodeJobRun lists the waiting V1 jobs of model type vsphere:
// GET /queue/workflows?modelType=vsphere&region=<r1>&region=<r2>... The
// API matches each region exactly, the empty value matching the jobs
// without a region; no region at all lists every region. The API leaves
// booked jobs out, this hatchery's included.
func (c *Client) QueueWorkflowNodeJobRun(ctx context.Context, regions []string) ([]sdk.WorkflowNodeJobRun, error) {
	q := url.Values{"modelType": {sdk.VSphere}}
	if len(regions) > 0 {
		q["region"] = append([]string(nil), regions...)
	}
	var jobs []sdk.WorkflowNodeJobRun
	if err := c.call(ctx, v1, http.MethodGet, "/queue/workflows", q, nil, &jobs); err != nil {
		return nil, fmt.Errorf("queue workflows: %w", err)
	}
	return jobs, nil
}

func jobPath(id int64, suffix string) string {
	return "/queue/workflows/" + strconv.FormatInt(id, 10) + suffix
}

// QueueJobInfo reads one V1 job: GET /queue/workflows/{id}/infos. A missing
// job answers 403 (ErrForbidden).
func (c *Client) QueueJobInfo(ctx context.Context, id int64) (*sdk.WorkflowNodeJobRun, error) {
	var job sdk.WorkflowNodeJobRun
	if err := c.call(ctx, v1, http.MethodGet, jobPath(id, "/infos"), nil, nil, &job); err != nil {
		return nil, fmt.Errorf("queue job %d infos: %w", id, err)
	}
	return &job, nil
}

// bookRequest is the body of POST /queue/workflows/{id}/book.
type bookRequest struct {
	Delay int64 `json:"delay"`
}

// QueueJobBook books a V1 job: POST /queue/workflows/{id}/book {"delay":0}.
// A job booked by anyone answers 403 id 89: the error matches
// ErrAlreadyBooked (and ErrForbidden).
func (c *Client) QueueJobBook(ctx context.Context, id int64) (sdk.BookedJob, error) {
	var b sdk.BookedJob
	if err := c.call(ctx, v1, http.MethodPost, jobPath(id, "/book"), nil, bookRequest{}, &b); err != nil {
		return sdk.BookedJob{}, fmt.Errorf("queue job %d book: %w", id, err)
	}
	return b, nil
}

// QueueJobRelease releases a V1 booking: DELETE /queue/workflows/{id}/book
// (200 null). Releasing twice answers 400 id 135.
func (c *Client) QueueJobRelease(ctx context.Context, id int64) error {
	if err := c.call(ctx, v1, http.MethodDelete, jobPath(id, "/book"), nil, nil, nil); err != nil {
		return fmt.Errorf("queue job %d release: %w", id, err)
	}
	return nil
}

// QueueJobSendSpawnInfo posts spawn infos: POST /queue/workflows/{id}/spawn/infos (204).
func (c *Client) QueueJobSendSpawnInfo(ctx context.Context, id int64, infos []sdk.SpawnInfo) error {
	if infos == nil {
		infos = []sdk.SpawnInfo{}
	}
	for i := range infos {
		if infos[i].RemoteTime.IsZero() {
			infos[i].RemoteTime = time.Now()
		}
	}
	if err := c.call(ctx, v1, http.MethodPost, jobPath(id, "/spawn/infos"), nil, infos, nil); err != nil {
		return fmt.Errorf("queue job %d spawn infos: %w", id, err)
	}
	return nil
}

// QueueJobFail sends a failed result for a V1 job the hatchery gives up on:
// POST /queue/workflows/{id}/result with sdk.Result{id, buildID, status:
// "Fail", reason, remoteTime} (the shape of CDS's sdk.Result; the API locks
// the job by buildID and answers 409 without it). The API posts a
// non-empty reason to the job as an info of its own.
func (c *Client) QueueJobFail(ctx context.Context, id int64, reason string) error {
	res := sdk.Result{ID: id, BuildID: id, Status: sdk.StatusFail, Reason: reason, RemoteTime: time.Now(), Duration: "0s"}
	if err := c.call(ctx, v1, http.MethodPost, jobPath(id, "/result"), nil, res, nil); err != nil {
		return fmt.Errorf("queue job %d fail: %w", id, err)
	}
	return nil
}

func v2JobPath(region, id, suffix string) string {
	return "/v2/queue/" + seg(region) + "/job/" + seg(id) + suffix
}

// V2QueueJobs lists the waiting V2 jobs of the region: GET /v2/queue/{region},
// with an osarch parameter per Config.OSArch. An unknown region answers 404.
func (c *Client) V2QueueJobs(ctx context.Context, region string) ([]sdk.V2WorkflowRunJob, error) {
	var jobs []sdk.V2WorkflowRunJob
	var query url.Values
	if len(c.cfg.OSArch) > 0 {
		query = url.Values{"osarch": c.cfg.OSArch}
	}
	if err := c.call(ctx, v2, http.MethodGet, "/v2/queue/"+seg(region), query, nil, &jobs); err != nil {
		return nil, fmt.Errorf("v2 queue %s: %w", region, err)
	}
	return jobs, nil
}

// V2QueueJobInfo reads one V2 job and its model: GET
// /v2/queue/{region}/job/{id}. A missing job answers 404 (ErrNotFound).
func (c *Client) V2QueueJobInfo(ctx context.Context, region, jobRunID string) (*sdk.V2QueueJobInfo, error) {
	var info sdk.V2QueueJobInfo
	if err := c.call(ctx, v2, http.MethodGet, v2JobPath(region, jobRunID, ""), nil, nil, &info); err != nil {
		return nil, fmt.Errorf("v2 queue job %s: %w", jobRunID, err)
	}
	return &info, nil
}

// V2QueueJobTake takes a V2 job: POST /v2/queue/{region}/job/{id}/hatchery/take.
// A job that is no longer waiting (taken by another hatchery) gives an
// error matching ErrAlreadyBooked; the API's 400, 403 and 409 answers to a
// take are all read that way (the recorded captures hold no such answer).
func (c *Client) V2QueueJobTake(ctx context.Context, region, jobRunID string) error {
	var job sdk.V2WorkflowRunJob
	err := c.call(ctx, v2, http.MethodPost, v2JobPath(region, jobRunID, "/hatchery/take"), nil, nil, &job)
	if err == nil {
		return nil
	}
	var ae *APIError
	if errors.As(err, &ae) && !errors.Is(err, ErrAlreadyBooked) &&
		(ae.Status == http.StatusBadRequest || ae.Status == http.StatusForbidden || ae.Status == http.StatusConflict) {
		return fmt.Errorf("v2 queue job %s take: %w: %w", jobRunID, ErrAlreadyBooked, err)
	}
	return fmt.Errorf("v2 queue job %s take: %w", jobRunID, err)
}

// V2QueueJobRelease gives a taken V2 job back: DELETE
// /v2/queue/{region}/job/{id}/hatchery/take.
func (c *Client) V2QueueJobRelease(ctx context.Context, region, jobRunID string) error {
	if err := c.call(ctx, v2, http.MethodDelete, v2JobPath(region, jobRunID, "/hatchery/take"), nil, nil, nil); err != nil {
		return fmt.Errorf("v2 queue job %s release: %w", jobRunID, err)
	}
	return nil
}

// V2QueueJobSendInfo posts an info line on a V2 job: POST
// /v2/queue/{region}/job/{id}/info {"level","message","time"}.
func (c *Client) V2QueueJobSendInfo(ctx context.Context, region, jobRunID string, info sdk.V2SendJobRunInfo) error {
	if info.Time.IsZero() {
		info.Time = time.Now()
	}
	if info.Level == "" {
		info.Level = sdk.JobRunInfoLevelInfo
	}
	if err := c.call(ctx, v2, http.MethodPost, v2JobPath(region, jobRunID, "/info"), nil, info, nil); err != nil {
		return fmt.Errorf("v2 queue job %s info: %w", jobRunID, err)
	}
	return nil
}

// WorkerList lists the V1 workers: GET /worker.
func (c *Client) WorkerList(ctx context.Context) ([]sdk.Worker, error) {
	var ws []sdk.Worker
	if err := c.call(ctx, v1, http.MethodGet, "/worker", nil, nil, &ws); err != nil {
		return nil, fmt.Errorf("worker list: %w", err)
	}
	return ws, nil
}

// V2WorkerList lists the V2 workers: GET /v2/worker (the API answers null
// for none; the result is then nil).
func (c *Client) V2WorkerList(ctx context.Context) ([]sdk.V2Worker, error) {
	var ws []sdk.V2Worker
	if err := c.call(ctx, v2, http.MethodGet, "/v2/worker", nil, nil, &ws); err != nil {
		return nil, fmt.Errorf("v2 worker list: %w", err)
	}
	return ws, nil
}

// WorkerDisable disables a V1 worker: POST /worker/{id}/disable.
func (c *Client) WorkerDisable(ctx context.Context, id string) error {
	if err := c.call(ctx, v1, http.MethodPost, "/worker/"+seg(id)+"/disable", nil, nil, nil); err != nil {
		return fmt.Errorf("worker %s disable: %w", id, err)
	}
	return nil
}

// WorkerModelsEnabled lists the enabled V1 models: GET /worker/model/enabled.
// Passwords are placeholders there; see WorkerModelSecretList.
func (c *Client) WorkerModelsEnabled(ctx context.Context) ([]sdk.Model, error) {
	var ms []sdk.Model
	if err := c.call(ctx, v1, http.MethodGet, "/worker/model/enabled", nil, nil, &ms); err != nil {
		return nil, fmt.Errorf("worker models enabled: %w", err)
	}
	return ms, nil
}

func modelPath(group, name, suffix string) string {
	return "/worker/model/" + seg(group) + "/" + seg(name) + suffix
}

// WorkerModelSecretList reads a V1 model's secrets: GET
// /worker/model/{group}/{name}/secret. The values are secrets: never log them.
func (c *Client) WorkerModelSecretList(ctx context.Context, groupName, modelName string) ([]sdk.WorkerModelSecret, error) {
	var ss []sdk.WorkerModelSecret
	if err := c.call(ctx, v1, http.MethodGet, modelPath(groupName, modelName, "/secret"), nil, nil, &ss); err != nil {
		return nil, fmt.Errorf("worker model %s/%s secrets: %w", groupName, modelName, err)
	}
	return ss, nil
}

// WorkerModelBook books a V1 model for registration: PUT
// /worker/model/{group}/{name}/book (204).
func (c *Client) WorkerModelBook(ctx context.Context, groupName, modelName string) error {
	if err := c.call(ctx, v1, http.MethodPut, modelPath(groupName, modelName, "/book"), nil, nil, nil); err != nil {
		return fmt.Errorf("worker model %s/%s book: %w", groupName, modelName, err)
	}
	return nil
}

// WorkerModelSpawnError reports a spawn error on a V1 model: PUT
// /worker/model/{group}/{name}/error {"error","logs"} (200 null).
func (c *Client) WorkerModelSpawnError(ctx context.Context, groupName, modelName string, form sdk.SpawnErrorForm) error {
	if err := c.call(ctx, v1, http.MethodPut, modelPath(groupName, modelName, "/error"), nil, form, nil); err != nil {
		return fmt.Errorf("worker model %s/%s spawn error: %w", groupName, modelName, err)
	}
	return nil
}

// V2WorkerModelGet loads a V2 model for a V1 job: GET
// /v2/project/{key}/vcs/{vcs}/repository/{repo}/workermodel/{name}?branch=.
// Each segment is escaped (a repository "org/repo" travels as org%2Frepo).
// It uses the V2 session when there is one, else the V1 session.
func (c *Client) V2WorkerModelGet(ctx context.Context, projectKey, vcs, repo, name, branch string) (*sdk.V2WorkerModel, error) {
	path := "/v2/project/" + seg(projectKey) + "/vcs/" + seg(vcs) + "/repository/" + seg(repo) + "/workermodel/" + seg(name)
	var q url.Values
	if branch != "" {
		q = url.Values{"branch": {branch}}
	}
	v := v2
	if !c.HasV2() {
		v = v1
	}
	var m sdk.V2WorkerModel
	if err := c.call(ctx, v, http.MethodGet, path, q, nil, &m); err != nil {
		return nil, fmt.Errorf("v2 worker model %s/%s/%s/%s: %w", projectKey, vcs, repo, name, err)
	}
	return &m, nil
}
