package cdssim

import (
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

type apiKind int

const (
	apiNone apiKind = iota
	apiV1
	apiV2
	// apiWorker is a worker session (POST /auth/consumer/worker/signin).
	apiWorker
)

// session is a signed-in hatchery (V1 service or V2 hatchery).
type session struct {
	api       apiKind
	name      string // service / hatchery name
	serviceID int64  // V1 service id
	hatchID   string // V2 hatchery id
	modelType string // V2 hatchery type
	expires   time.Time
}

type jobV1 struct {
	run        sdk.WorkflowNodeJobRun
	bookedBy   string    // see bookedLocked: a booking lapses
	bookedAt   time.Time // when bookedBy booked it
	spawnInfos []sdk.SpawnInfo
	results    []sdk.Result
}

type jobV2 struct {
	run     sdk.V2WorkflowRunJob
	model   sdk.V2WorkerModel
	takenBy string
	takenAt time.Time // when takenBy took it (Scheduling since)
	infos   []sdk.V2SendJobRunInfo
}

// now is the time of the bookings and of the scheduling timeout
// (Options.Now).
func (s *Server) now() time.Time { return s.opts.Now() }

// bookedLocked is the hatchery whose V1 booking of j holds now, "" when
// none: a booking lapses BookingTTL after it was made while the job is
// still Waiting (the API's cache entry expires). The record of the last
// booker is kept, so that a worker its hatchery launched just before the
// lapse can still take the job. The caller holds s.mu.
func (s *Server) bookedLocked(j *jobV1, now time.Time) string {
	if j.bookedBy != "" && j.run.Status == sdk.StatusWaiting && now.Sub(j.bookedAt) >= s.opts.BookingTTL {
		return ""
	}
	return j.bookedBy
}

// requeueLocked queues again every V2 job Scheduling for SchedulingTimeout
// or more (taken by a hatchery, no worker started), as the API's
// re-enqueue routine does. The API
// runs that routine every minute; running it at every read of the jobs
// shows the same states a minute sooner. The caller holds s.mu.
func (s *Server) requeueLocked(now time.Time) {
	for _, j := range s.st.jobsV2 {
		if j.takenBy != "" && j.run.Status == sdk.V2StatusScheduling && now.Sub(j.takenAt) >= s.opts.SchedulingTimeout {
			j.takenBy, j.run.HatcheryName, j.run.Status = "", "", sdk.StatusWaiting
		}
	}
}

type modelV1 struct {
	m           sdk.Model
	secrets     []sdk.WorkerModelSecret
	bookedBy    string
	spawnErrors []sdk.SpawnErrorForm
}

type worker struct {
	v2       bool
	w        sdk.Worker
	w2       sdk.V2Worker
	disabled bool
	// ended is when a V1 worker ended (zero while it runs): it stays
	// listed, Disabled, until DisabledWorkerTTL after it.
	ended time.Time
}

// purgeWorkersLocked forgets the V1 workers that ended DisabledWorkerTTL
// ago or more, as the API deletes its dead disabled workers. The caller
// holds s.mu.
func (s *Server) purgeWorkersLocked(now time.Time) {
	for name, w := range s.st.workrs {
		if !w.ended.IsZero() && now.Sub(w.ended) >= s.opts.DisabledWorkerTTL {
			delete(s.st.workrs, name)
		}
	}
}

// Call is one request the simulator answered.
type Call struct {
	Method string
	Path   string
	Query  string
	Status int
}

type failure struct {
	status    int
	remaining int       // calls left (count mode)
	until     time.Time // deadline (duration mode)
}

type state struct {
	sessions map[string]*session // by JWT
	services map[string]int64    // V1 service id by name
	// serviceURLs is the http_url each V1 service sent at its last sign-in.
	serviceURLs map[string]string
	hatcheries  map[string]*sdk.V2Hatchery
	// pubKeys is the public key each hatchery sent at its last sign-in.
	pubKeys   map[string][]byte
	nextID    int64
	nextJobV1 int64 // V1 job ids count from 1, apart from other ids

	jobsV1 map[int64]*jobV1
	jobsV2 map[string]*jobV2
	models map[string]*modelV1 // by group/name
	v2mods map[string]sdk.V2WorkerModel
	workrs map[string]*worker // by name

	// unknownSpawnInfos are the spawn-info message ids received that the
	// API does not define.
	unknownSpawnInfos []string
	// garbledSpawnInfos are the user messages of the spawn infos received
	// that render with a "%!" mark.
	garbledSpawnInfos []string

	heartbeatsV1 []sdk.MonitoringStatus
	heartbeatsV2 []sdk.MonitoringStatus
	calls        []Call

	fail    failure
	latency time.Duration

	subsV1 map[chan []byte]struct{}
	subsV2 map[chan []byte]struct{}
}

func (st *state) init() {
	st.sessions = map[string]*session{}
	st.services = map[string]int64{}
	st.serviceURLs = map[string]string{}
	st.hatcheries = map[string]*sdk.V2Hatchery{}
	st.pubKeys = map[string][]byte{}
	st.jobsV1 = map[int64]*jobV1{}
	st.jobsV2 = map[string]*jobV2{}
	st.models = map[string]*modelV1{}
	st.v2mods = map[string]sdk.V2WorkerModel{}
	st.workrs = map[string]*worker{}
	st.subsV1 = map[chan []byte]struct{}{}
	st.subsV2 = map[chan []byte]struct{}{}
}

func (st *state) id() int64 {
	st.nextID++
	return st.nextID
}

func (s *Server) record(r *http.Request, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.calls = append(s.st.calls, Call{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Status: status})
}

// Sessions is the number of live sessions.
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.st.sessions)
}

// Calls returns every request answered so far, in order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.st.calls...)
}

// CountCalls counts the answered requests with that method and path.
func (s *Server) CountCalls(method, path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.st.calls {
		if c.Method == method && c.Path == path {
			n++
		}
	}
	return n
}

// ServiceHTTPURL is the URL a hatchery sent at its last sign-in, as the
// API's service list shows it: v1 the V1 service's http_url, v2 the V2
// hatchery's ("" when that sign-in sent none or never happened).
func (s *Server) ServiceHTTPURL(name string) (v1, v2 string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, ok := s.st.hatcheries[name]; ok {
		v2 = h.HTTPURL
	}
	return s.st.serviceURLs[name], v2
}

// Region is the V2 region the simulator announces at V2 sign-in.
func (s *Server) Region() string { return s.opts.Regions[0] }

// Heartbeats returns the heartbeat bodies received on V1 and on V2.
func (s *Server) Heartbeats() (v1, v2 []sdk.MonitoringStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sdk.MonitoringStatus(nil), s.st.heartbeatsV1...), append([]sdk.MonitoringStatus(nil), s.st.heartbeatsV2...)
}

// JobV1 describes a V1 job to queue.
type JobV1 struct {
	// Requirements of the job (model, flavor, region, binary...).
	Requirements sdk.RequirementList
	// ModelType is the job's model type (vsphere when empty).
	ModelType string
	// ProjectKey, WorkflowName and JobName name the job (defaults PROJ, wf, build).
	ProjectKey, WorkflowName, JobName string
}

// AddJobV1 queues a Waiting V1 job, pushes a job event on /ws and returns its id.
func (s *Server) AddJobV1(j JobV1) int64 {
	if j.ModelType == "" {
		j.ModelType = sdk.VSphere
	}
	if j.ProjectKey == "" {
		j.ProjectKey = "PROJ"
	}
	if j.WorkflowName == "" {
		j.WorkflowName = "wf"
	}
	if j.JobName == "" {
		j.JobName = "build"
	}
	s.mu.Lock()
	s.st.nextJobV1++
	id := s.st.nextJobV1
	reqs := append(sdk.RequirementList{}, j.Requirements...)
	for i := range reqs {
		if reqs[i].ID == 0 {
			reqs[i].ID = s.st.id()
		}
		if reqs[i].Name == "" {
			reqs[i].Name = reqs[i].Type
		}
	}
	now := time.Now().UTC()
	s.st.jobsV1[id] = &jobV1{run: sdk.WorkflowNodeJobRun{
		ProjectID:         1,
		ID:                id,
		WorkflowNodeRunID: id,
		Job: sdk.ExecutedJob{
			PipelineActionID: 1, PipelineStageID: 1, Enabled: true,
			Action: sdk.Action{ID: id, Name: j.JobName, Type: "Joined", Requirements: reqs},
		},
		Parameters: []sdk.Parameter{
			{Name: "cds.project", Type: "string", Value: j.ProjectKey},
			{Name: "cds.workflow", Type: "string", Value: j.WorkflowName},
			{Name: "cds.job", Type: "string", Value: j.JobName},
		},
		Status:     sdk.StatusWaiting,
		Queued:     now,
		ModelType:  j.ModelType,
		ExecGroups: []sdk.Group{{ID: 1, Name: "shared.infra"}},
		Header:     sdk.Header{"X-Project-Key": j.ProjectKey, "X-Workflow": j.WorkflowName, "X-Workflow-Run": "1"},
	}}
	s.mu.Unlock()
	s.broadcastV1(id, sdk.StatusWaiting)
	return id
}

// JobV1State is what happened to a V1 job.
type JobV1State struct {
	Status     string
	BookedBy   string // hatchery name, "" when not booked
	SpawnInfos []sdk.SpawnInfo
	Results    []sdk.Result
}

// JobV1 returns the state of a V1 job.
func (s *Server) JobV1(id int64) (JobV1State, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.st.jobsV1[id]
	if !ok {
		return JobV1State{}, false
	}
	return JobV1State{
		Status:     j.run.Status,
		BookedBy:   s.bookedLocked(j, s.now()),
		SpawnInfos: append([]sdk.SpawnInfo(nil), j.spawnInfos...),
		Results:    append([]sdk.Result(nil), j.results...),
	}, true
}

// SetJobV1Status sets a V1 job's status (e.g. Building, Success) and
// pushes a job event.
func (s *Server) SetJobV1Status(id int64, status string) bool {
	s.mu.Lock()
	j, ok := s.st.jobsV1[id]
	if ok {
		j.run.Status = status
	}
	s.mu.Unlock()
	if ok {
		s.broadcastV1(id, status)
	}
	return ok
}

// JobV2 describes a V2 job to queue.
type JobV2 struct {
	// Region of the job (the first configured region when empty).
	Region string
	// ModelType of the job (vsphere when empty).
	ModelType string
	// Model is the job's worker model, answered by GET .../job/{id}.
	Model sdk.V2WorkerModel
	// RunsOn is the job's runs-on (Model.Name when its model is empty).
	RunsOn sdk.V2JobRunsOn
	// ProjectKey, WorkflowName and JobName name the job (defaults PROJ, wf, build).
	ProjectKey, WorkflowName, JobName string
}

// AddJobV2 queues a Waiting V2 job, pushes an event on /v2/hatchery/ws and
// returns its run job id (a uuid).
func (s *Server) AddJobV2(j JobV2) string {
	if j.Region == "" {
		j.Region = s.opts.Regions[0]
	}
	if j.ModelType == "" {
		j.ModelType = sdk.VSphere
	}
	if j.Model.Type == "" {
		j.Model.Type = j.ModelType
	}
	if j.RunsOn.Model == "" {
		j.RunsOn.Model = j.Model.Name
	}
	if j.ProjectKey == "" {
		j.ProjectKey = "PROJ"
	}
	if j.WorkflowName == "" {
		j.WorkflowName = "wf"
	}
	if j.JobName == "" {
		j.JobName = "build"
	}
	id := requestID()
	s.mu.Lock()
	n := s.st.id()
	s.st.jobsV2[id] = &jobV2{
		run: sdk.V2WorkflowRunJob{
			ID: id, JobID: j.JobName, WorkflowRunID: requestID(), ProjectKey: j.ProjectKey,
			WorkflowName: j.WorkflowName, RunNumber: n, RunAttempt: 1, Status: sdk.StatusWaiting,
			Queued: time.Now().UTC(), Region: j.Region, ModelType: j.ModelType, ModelOSArch: j.Model.OSArch,
			Job: sdk.V2Job{Name: j.JobName, RunsOn: j.RunsOn, Region: j.Region},
		},
		model: j.Model,
	}
	s.mu.Unlock()
	s.broadcastV2(j.Region, j.ModelType, id, n)
	return id
}

// JobV2State is what happened to a V2 job.
type JobV2State struct {
	Status  string
	TakenBy string // hatchery name, "" when not taken
	Infos   []sdk.V2SendJobRunInfo
}

// JobV2 returns the state of a V2 job.
func (s *Server) JobV2(id string) (JobV2State, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requeueLocked(s.now())
	j, ok := s.st.jobsV2[id]
	if !ok {
		return JobV2State{}, false
	}
	return JobV2State{Status: j.run.Status, TakenBy: j.takenBy, Infos: append([]sdk.V2SendJobRunInfo(nil), j.infos...)}, true
}

// SetJobV2Status sets a V2 job's status and pushes an event.
func (s *Server) SetJobV2Status(id, status string) bool {
	s.mu.Lock()
	j, ok := s.st.jobsV2[id]
	var region, mt string
	var n int64
	if ok {
		j.run.Status = status
		region, mt, n = j.run.Region, j.run.ModelType, j.run.RunNumber
	}
	s.mu.Unlock()
	if ok {
		s.broadcastV2(region, mt, id, n)
	}
	return ok
}

// AddModelV1 adds a V1 worker model; secrets maps a secret name (e.g.
// "secrets.vsphere_password", referenced as "{{.secrets.vsphere_password}}"
// in ModelVirtualMachine.Password) to its value. Group defaults to
// shared.infra, Type to vsphere. It returns the model's path group/name.
func (s *Server) AddModelV1(m sdk.Model, secrets map[string]string) string {
	if m.Group == nil {
		m.Group = &sdk.Group{ID: 1, Name: "shared.infra"}
	}
	if m.Type == "" {
		m.Type = sdk.VSphere
	}
	m.GroupID = m.Group.ID
	if m.RegisteredCapabilities == nil {
		m.RegisteredCapabilities = sdk.RequirementList{}
	}
	if m.CreatedBy == nil {
		m.CreatedBy = []byte(`{"username":"admin","fullname":"admin","email":"admin@localhost.local"}`)
	}
	if m.ModelDocker == nil {
		m.ModelDocker = []byte(`{}`)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.ID == 0 {
		m.ID = s.st.id()
	}
	if m.UserLastModified.IsZero() {
		m.UserLastModified = time.Now().UTC()
	}
	mv := &modelV1{m: m}
	names := make([]string, 0, len(secrets))
	for k := range secrets {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		mv.secrets = append(mv.secrets, sdk.WorkerModelSecret{ID: requestID(), Created: time.Now().UTC(), WorkerModelID: m.ID, Name: k, Value: secrets[k]})
	}
	s.st.models[m.Path()] = mv
	return m.Path()
}

// ModelV1State is what happened to a V1 model.
type ModelV1State struct {
	Model       sdk.Model
	BookedBy    string
	SpawnErrors []sdk.SpawnErrorForm
}

// ModelV1 returns the state of a V1 model by path group/name.
func (s *Server) ModelV1(path string) (ModelV1State, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.st.models[path]
	if !ok {
		return ModelV1State{}, false
	}
	return ModelV1State{Model: m.m, BookedBy: m.bookedBy, SpawnErrors: append([]sdk.SpawnErrorForm(nil), m.spawnErrors...)}, true
}

// MarkModelV1Registered records a successful registration: need_registration
// false, last_registration now, booking and spawn errors cleared.
func (s *Server) MarkModelV1Registered(path string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.st.models[path]
	if ok {
		m.m.NeedRegistration = false
		m.m.LastRegistration = time.Now().UTC()
		m.bookedBy = ""
		m.m.NbSpawnErr = 0
		m.m.LastSpawnErr, m.m.LastSpawnErrLogs, m.m.DateLastSpawnErr = nil, nil, nil
	}
	return ok
}

// AddModelV2 makes a V2 model answer GET
// /v2/project/{key}/vcs/{vcs}/repository/{repo}/workermodel/{name}?branch=
// (branch "" matches any branch).
func (s *Server) AddModelV2(projectKey, vcs, repo, branch string, m sdk.V2WorkerModel) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.v2mods[v2ModelKey(projectKey, vcs, repo, m.Name, branch)] = m
}

func v2ModelKey(p, v, r, n, b string) string {
	return p + "\x00" + v + "\x00" + r + "\x00" + n + "\x00" + b
}

// RegisterWorker records a worker as the worker process does when it
// starts. jobID is a V1 job id (decimal) or a V2 run job id; "" registers a
// V1 model-registration worker. The worker is Building (Registering without
// a job) and its job becomes Building. It returns the worker id, or "" when
// the job is unknown.
func (s *Server) RegisterWorker(name, jobID string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j, ok := s.st.jobsV2[jobID]; ok && jobID != "" {
		id := requestID()
		j.run.Status = sdk.StatusBuilding
		j.run.WorkerName = name
		s.st.workrs[name] = &worker{v2: true, w2: sdk.V2Worker{
			ID: id, Name: name, LastBeat: time.Now().UTC(), ModelName: j.model.Name, JobRunID: jobID,
			HatcheryName: j.takenBy, Status: sdk.StatusBuilding, OS: "linux", Arch: "amd64",
		}}
		if h, ok := s.st.hatcheries[j.takenBy]; ok {
			s.st.workrs[name].w2.HatcheryID = h.ID
		}
		return id
	}
	w := sdk.Worker{ID: requestID(), Name: name, LastBeat: time.Now().UTC(), Status: sdk.StatusRegistering, OS: "linux", Arch: "amd64", Uptodate: true}
	if jobID != "" {
		n, err := strconv.ParseInt(jobID, 10, 64)
		j, ok := s.st.jobsV1[n]
		if err != nil || !ok {
			return ""
		}
		j.run.Status = sdk.StatusBuilding
		j.run.Job.WorkerName, j.run.Job.WorkerID = name, w.ID
		w.JobRunID = &n
		w.Status = sdk.StatusBuilding
		w.HatcheryName = j.bookedBy
		if sid, ok := s.st.services[j.bookedBy]; ok {
			w.HatcheryID = &sid
		}
	}
	s.st.workrs[name] = &worker{w: w}
	return w.ID
}

// FinishWorker ends a worker as when its process exits and unregisters;
// its job gets status (Success when empty). A V2 worker leaves the worker
// list at once; a V1 worker stays listed, Disabled, for DisabledWorkerTTL,
// as with the API. It reports whether a running worker of that name
// existed.
func (s *Server) FinishWorker(name, status string) bool {
	if status == "" {
		status = sdk.StatusSuccess
	}
	s.mu.Lock()
	w, ok := s.st.workrs[name]
	if !ok || !w.ended.IsZero() {
		s.mu.Unlock()
		return false
	}
	if w.v2 {
		delete(s.st.workrs, name)
	} else {
		w.ended = s.now()
		w.disabled = true
		w.w.Status = sdk.StatusDisabled
	}
	var v1ID int64
	var v2ID string
	if w.v2 {
		if j, ok := s.st.jobsV2[w.w2.JobRunID]; ok {
			j.run.Status = status
			v2ID = j.run.ID
		}
	} else if w.w.JobRunID != nil {
		if j, ok := s.st.jobsV1[*w.w.JobRunID]; ok {
			j.run.Status = status
			v1ID = j.run.ID
		}
	}
	s.mu.Unlock()
	if v1ID != 0 {
		s.broadcastV1(v1ID, status)
	}
	if v2ID != "" {
		s.SetJobV2Status(v2ID, status)
	}
	return true
}

// WorkerState is a registered worker as the simulator sees it.
type WorkerState struct {
	ID       string
	V2       bool
	Status   string
	Disabled bool
}

// Worker returns a worker the API lists, by name (a V1 worker that ended
// is listed, Disabled, for DisabledWorkerTTL).
func (s *Server) Worker(name string) (WorkerState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.purgeWorkersLocked(s.now())
	w, ok := s.st.workrs[name]
	if !ok {
		return WorkerState{}, false
	}
	if w.v2 {
		return WorkerState{ID: w.w2.ID, V2: true, Status: w.w2.Status, Disabled: w.disabled}, true
	}
	return WorkerState{ID: w.w.ID, Status: w.w.Status, Disabled: w.disabled}, true
}

// DisableWorker disables a worker as POST /worker/{id}/disable does.
func (s *Server) DisableWorker(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.st.workrs[name]
	if ok {
		w.disabled = true
		w.w.Status = sdk.StatusDisabled
		w.w2.Status = sdk.StatusDisabled
	}
	return ok
}
