// Package cdsclienttest provides an in-memory cdsclient.Interface for the
// tests of the packages that call the CDS API (the vSphere hatchery, its
// warm pool and cleanup): the one fake CDS client they share. Only tests
// import it.
package cdsclienttest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient"
)

// Fake answers the calls of the hatchery's loops from its fields and
// records what they send. Set the fields before the code under test runs;
// while it runs, change them with Update. A call of a method Fake does not
// implement panics (the embedded nil interface), and so does a call of a
// method not in Allow when Allow is set: the code under test must not make
// it. The zero value is an API that knows no worker, no model and no job
// held by anyone but Hatchery (""), and accepts every release.
type Fake struct {
	// Interface is nil: the methods Fake does not implement panic.
	cdsclient.Interface

	// Allow, when not nil, lists the only methods (by name:
	// "WorkerList") the code under test may call; any other panics.
	Allow []string

	// Hatchery holds (V1: booked, V2: took) every job JobHolder does not
	// name: the hatchery under test, usually.
	Hatchery string
	// Region is V2Region's answer: the region the V2 sign-in answered.
	Region string

	// V1Workers and V2Workers are WorkerList's and V2WorkerList's
	// answers, with their errors.
	V1Workers    []sdk.Worker
	V1WorkersErr error
	V2Workers    []sdk.V2Worker
	V2WorkersErr error
	// Models is WorkerModelsEnabled's answer, with ModelsErr.
	Models    []sdk.Model
	ModelsErr error
	// Secrets are each V1 model's secrets by "group/name"
	// (WorkerModelSecretList; another model is a 404), with SecretsErr.
	Secrets    map[string][]sdk.WorkerModelSecret
	SecretsErr error

	// JobStatus is the status the API shows of a job, by id (V1 decimal);
	// a job not in it is still waiting for its worker (V1 Waiting, V2
	// Scheduling).
	JobStatus map[string]string
	// JobWorker is the worker that took a job, by id ("" none).
	JobWorker map[string]string
	// JobHolder is who holds a job, by id ("" no one); a job not in it is
	// held by Hatchery.
	JobHolder map[string]string
	// JobGone are the jobs the API no longer knows (V1 403, V2 404).
	JobGone map[string]bool
	// JobErr, when set, answers every job read.
	JobErr error
	// ReleaseErr, when set, answers every release (recorded all the same).
	ReleaseErr error

	mu          sync.Mutex
	released    []string
	spawnErrors []string
	spawnInfos  []sdk.SpawnInfo
	jobInfos    []sdk.V2SendJobRunInfo
	jobInfoRuns []string
	jobReads    map[string]int
	secretReads int
	disabled    []string
}

var _ cdsclient.Interface = (*Fake)(nil)

// Update runs change on f under its lock: how a test changes the API's
// answers while the code under test runs.
func (f *Fake) Update(change func(f *Fake)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f)
}

// call checks that method may be called; f.mu is held.
func (f *Fake) call(method string) {
	if f.Allow != nil && !slices.Contains(f.Allow, method) {
		panic("cdsclienttest: unexpected call of " + method)
	}
}

// WorkerList answers V1Workers.
func (f *Fake) WorkerList(context.Context) ([]sdk.Worker, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("WorkerList")
	return slices.Clone(f.V1Workers), f.V1WorkersErr
}

// V2WorkerList answers V2Workers.
func (f *Fake) V2WorkerList(context.Context) ([]sdk.V2Worker, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("V2WorkerList")
	return slices.Clone(f.V2Workers), f.V2WorkersErr
}

// AddV2Worker makes the API list w (replacing a worker of the same name):
// a worker registering.
func (f *Fake) AddV2Worker(w sdk.V2Worker) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.V2Workers = slices.DeleteFunc(f.V2Workers, func(o sdk.V2Worker) bool { return o.Name == w.Name })
	f.V2Workers = append(f.V2Workers, w)
}

// RemoveV2Worker makes the API forget the V2 worker named name.
func (f *Fake) RemoveV2Worker(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.V2Workers = slices.DeleteFunc(f.V2Workers, func(o sdk.V2Worker) bool { return o.Name == name })
}

// WorkerDisable records the V1 worker id disabled (Disabled).
func (f *Fake) WorkerDisable(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("WorkerDisable")
	f.disabled = append(f.disabled, id)
	return nil
}

// Disabled are the V1 workers disabled, by id, in call order.
func (f *Fake) Disabled() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.disabled)
}

// WorkerModelsEnabled answers Models.
func (f *Fake) WorkerModelsEnabled(context.Context) ([]sdk.Model, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("WorkerModelsEnabled")
	return slices.Clone(f.Models), f.ModelsErr
}

// WorkerModelSecretList answers the secrets of group/name (a 404 for a
// model Secrets does not hold) and counts the call (SecretReads).
func (f *Fake) WorkerModelSecretList(_ context.Context, group, name string) ([]sdk.WorkerModelSecret, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("WorkerModelSecretList")
	f.secretReads++
	s, ok := f.Secrets[group+"/"+name]
	if !ok {
		return nil, errors.New("404 worker model not found")
	}
	return s, f.SecretsErr
}

// SecretReads is how many times WorkerModelSecretList was called.
func (f *Fake) SecretReads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.secretReads
}

// WorkerModelSpawnError records "group/name: error" (SpawnErrors).
func (f *Fake) WorkerModelSpawnError(_ context.Context, group, name string, form sdk.SpawnErrorForm) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("WorkerModelSpawnError")
	f.spawnErrors = append(f.spawnErrors, group+"/"+name+": "+form.Error)
	return nil
}

// SpawnErrors are the model spawn errors sent, "group/name: error", in
// call order.
func (f *Fake) SpawnErrors() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.spawnErrors)
}

// statusOf is job id's status, waiting when JobStatus has none.
func (f *Fake) statusOf(id, waiting string) string {
	if st, ok := f.JobStatus[id]; ok {
		return st
	}
	return waiting
}

// readJob counts a read of job id and answers its holder and worker, or
// the error the API would give (gone for a job it no longer knows).
func (f *Fake) readJob(id string, gone error) (holder, worker string, err error) {
	if f.jobReads == nil {
		f.jobReads = map[string]int{}
	}
	f.jobReads[id]++
	switch {
	case f.JobErr != nil:
		return "", "", f.JobErr
	case f.JobGone[id]:
		return "", "", gone
	}
	holder = f.Hatchery
	if h, ok := f.JobHolder[id]; ok {
		holder = h
	}
	return holder, f.JobWorker[id], nil
}

// QueueJobInfo answers V1 job id: its status, who booked it and its
// worker; a gone job is the API's 403.
func (f *Fake) QueueJobInfo(_ context.Context, id int64) (*sdk.WorkflowNodeJobRun, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("QueueJobInfo")
	key := fmt.Sprint(id)
	holder, worker, err := f.readJob(key, &cdsclient.APIError{Status: 403, ID: 11})
	if err != nil {
		return nil, err
	}
	j := &sdk.WorkflowNodeJobRun{ID: id, Status: f.statusOf(key, sdk.StatusWaiting), BookedBy: sdk.Service{Name: holder}}
	j.Job.WorkerName = worker
	return j, nil
}

// V2QueueJobInfo answers V2 job id: its status, the hatchery that took it
// and its worker; a gone job is the API's 404.
func (f *Fake) V2QueueJobInfo(_ context.Context, _, id string) (*sdk.V2QueueJobInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("V2QueueJobInfo")
	holder, worker, err := f.readJob(id, &cdsclient.APIError{Status: 404, ID: 38})
	if err != nil {
		return nil, err
	}
	return &sdk.V2QueueJobInfo{RunJob: sdk.V2WorkflowRunJob{ID: id, Status: f.statusOf(id, sdk.V2StatusScheduling), HatcheryName: holder, WorkerName: worker}}, nil
}

// Reads is how many times job id was read (either version).
func (f *Fake) Reads(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.jobReads[id]
}

// V2Region answers Region.
func (f *Fake) V2Region() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("V2Region")
	return f.Region
}

// QueueJobRelease records "v1:ID" (Released) and answers ReleaseErr.
func (f *Fake) QueueJobRelease(_ context.Context, id int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("QueueJobRelease")
	f.released = append(f.released, fmt.Sprintf("v1:%d", id))
	return f.ReleaseErr
}

// V2QueueJobRelease records "v2:REGION:ID" (Released) and answers
// ReleaseErr.
func (f *Fake) V2QueueJobRelease(_ context.Context, region, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("V2QueueJobRelease")
	f.released = append(f.released, "v2:"+region+":"+id)
	return f.ReleaseErr
}

// Released are the jobs released, "v1:ID" or "v2:REGION:ID", in call
// order.
func (f *Fake) Released() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.released)
}

// QueueJobSendSpawnInfo records the infos posted on a V1 job (SpawnInfos).
func (f *Fake) QueueJobSendSpawnInfo(_ context.Context, _ int64, infos []sdk.SpawnInfo) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("QueueJobSendSpawnInfo")
	f.spawnInfos = append(f.spawnInfos, infos...)
	return nil
}

// SpawnInfos are the infos posted on V1 jobs, in call order.
func (f *Fake) SpawnInfos() []sdk.SpawnInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.spawnInfos)
}

// V2QueueJobSendInfo records the info posted on a V2 job and the job as
// "region/id" (JobInfos).
func (f *Fake) V2QueueJobSendInfo(_ context.Context, region, id string, info sdk.V2SendJobRunInfo) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("V2QueueJobSendInfo")
	f.jobInfos = append(f.jobInfos, info)
	f.jobInfoRuns = append(f.jobInfoRuns, region+"/"+id)
	return nil
}

// JobInfos are the infos posted on V2 jobs and, at the same index, each
// one's job as "region/id", in call order.
func (f *Fake) JobInfos() ([]sdk.V2SendJobRunInfo, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.jobInfos), slices.Clone(f.jobInfoRuns)
}
