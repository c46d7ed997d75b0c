package cdssim

import (
	"encoding/base64"
	"encoding/pem"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	h := func(pattern string, api apiKind, fn handler) { mux.Handle(pattern, s.route(api, fn)) }

	h("POST /auth/consumer/builtin/signin", apiNone, s.signinV1)
	h("POST /v2/auth/consumer/hatchery/signin", apiNone, s.signinV2)
	h("POST /services/heartbeat", apiV1, s.heartbeat(apiV1))
	h("POST /v2/hatchery/heartbeat", apiV2, s.heartbeat(apiV2))
	h("GET /config/cdn", apiV1, s.configCDN)
	h("GET /v2/config/cdn", apiV2, s.configCDN)

	h("GET /queue/workflows", apiV1, s.queueV1)
	h("GET /queue/workflows/{id}/infos", apiV1, s.jobV1Infos)
	h("POST /queue/workflows/{id}/book", apiV1, s.jobV1Book)
	h("DELETE /queue/workflows/{id}/book", apiV1, s.jobV1Release)
	h("POST /queue/workflows/{id}/spawn/infos", apiV1, s.jobV1SpawnInfos)
	h("POST /queue/workflows/{id}/result", apiNone, s.jobV1Result) // a hatchery or the job's worker
	h("POST /queue/workflows/{id}/take", apiWorker, s.jobV1Take)
	h("GET /ws", apiV1, s.wsV1)

	h("GET /v2/queue/{region}", apiV2, s.queueV2)
	h("GET /v2/queue/{region}/job/{id}", apiV2, s.jobV2Info)
	h("POST /v2/queue/{region}/job/{id}/hatchery/take", apiV2, s.jobV2Take)
	h("DELETE /v2/queue/{region}/job/{id}/hatchery/take", apiV2, s.jobV2Release)
	h("POST /v2/queue/{region}/job/{id}/info", apiV2, s.jobV2SendInfo)
	h("POST /v2/queue/{region}/job/{id}/result", apiWorker, s.jobV2WorkerResult)
	h("POST /auth/consumer/worker/signin", apiNone, s.workerSignin)
	h("GET /v2/hatchery/ws", apiV2, s.wsV2)

	h("GET /worker", apiV1, s.workersV1)
	h("GET /v2/worker", apiV2, s.workersV2)
	h("POST /worker/{id}/disable", apiV1, s.workerDisable)

	h("GET /worker/model/enabled", apiV1, s.modelsEnabled)
	h("GET /worker/model/{group}/{name}/secret", apiV1, s.modelSecrets)
	h("PUT /worker/model/{group}/{name}/book", apiV1, s.modelBook)
	h("PUT /worker/model/{group}/{name}/error", apiV1, s.modelSpawnError)
	mux.Handle("GET /v2/project/{key}/vcs/{vcs}/repository/{repo}/workermodel/{name}", s.route(apiNone, s.modelV2))
	mux.Handle("GET /download/{name}/{os}/{arch}", http.HandlerFunc(s.download))

	mux.Handle("/", s.route(apiNone, func(r *http.Request, _ *session) (int, any, error) {
		e := errNotFound(r.URL.Path + " not found")
		e.noRequestID = true
		return 0, nil, e
	}))
	return mux
}

// --- sign-in ---

func validPublicKey(b []byte) bool {
	blk, _ := pem.Decode(b)
	return blk != nil
}

func (s *Server) newSession(w http.ResponseWriter, sess *session) (string, error) {
	id := requestID()
	now := time.Now()
	tok, err := signSession(id, requestID(), now, s.opts.SessionTTL)
	if err != nil {
		return "", err
	}
	sess.expires = now.Add(s.opts.SessionTTL)
	s.mu.Lock()
	s.st.sessions[tok] = sess
	s.mu.Unlock()
	w.Header().Set("X-Api-Pub-Signing-Key", base64.StdEncoding.EncodeToString(PublicSigningKeyPEM()))
	http.SetCookie(w, &http.Cookie{Name: "jwt_token", Value: tok, Path: "/", Expires: sess.expires, HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
	return tok, nil
}

// writerKey passes the ResponseWriter to sign-in handlers through the request context.
type writerKey struct{}

func respWriter(r *http.Request) http.ResponseWriter {
	w, _ := r.Context().Value(writerKey{}).(http.ResponseWriter)
	return w
}

func (s *Server) signinV1(r *http.Request, _ *session) (int, any, error) {
	var req sdk.AuthConsumerSigninRequest
	if err := decodeBody(r, &req); err != nil {
		return 0, nil, err // raw PEM in public_key fails to decode into []byte: 400
	}
	if req.Token != s.opts.TokenV1 {
		return 0, nil, newErr(403, errIDForbidden, "forbidden", "invalid signin token")
	}
	if req.Service.Name == "" || (len(req.Service.PublicKey) > 0 && !validPublicKey(req.Service.PublicKey)) {
		return 0, nil, errWrongRequest()
	}
	s.mu.Lock()
	sid, ok := s.st.services[req.Service.Name]
	if !ok {
		sid = s.st.id()
		s.st.services[req.Service.Name] = sid
	}
	// Any PEM is accepted here, as the API does; worker sign-in is where a
	// key that is not PKCS#1 fails.
	s.st.pubKeys[req.Service.Name] = req.Service.PublicKey
	s.st.serviceURLs[req.Service.Name] = req.Service.HTTPURL
	s.mu.Unlock()
	tok, err := s.newSession(respWriter(r), &session{api: apiV1, name: req.Service.Name, serviceID: sid})
	if err != nil {
		return 0, nil, err
	}
	var region, ignore any // the API answers null when unset
	if req.Service.Region != "" {
		region = req.Service.Region
	}
	if req.Service.IgnoreJobWithNoRegion {
		ignore = true
	}
	cfg := req.Service.Config
	if cfg == nil {
		cfg = map[string]any{}
	}
	return 200, map[string]any{
		"api_url": s.apiURL(),
		"token":   tok,
		"user": map[string]any{
			"id": requestID(), "created": time.Now().UTC(), "username": "admin", "fullname": "admin", "ring": "ADMIN", "groups": nil,
		},
		"service": map[string]any{
			"id": sid, "name": req.Service.Name, "type": req.Service.Type, "http_url": req.Service.HTTPURL,
			"config": cfg, "public_key": req.Service.PublicKey, "region": region,
			"ignore_job_with_no_region": ignore, "last_heartbeat": time.Now().UTC(),
			"monitoring_status": sdk.MonitoringStatus{}, "version": req.Service.Version, "up_to_date": false,
		},
	}, nil
}

func (s *Server) signinV2(r *http.Request, _ *session) (int, any, error) {
	var req sdk.V2HatcherySigninRequest
	if err := decodeBody(r, &req); err != nil {
		return 0, nil, err
	}
	if req.Token != s.opts.TokenV2 {
		return 0, nil, newErr(403, errIDForbidden, "forbidden", "invalid signin token")
	}
	if s.opts.HatcheryName != "" && req.Name != s.opts.HatcheryName {
		return 0, nil, errForbidden()
	}
	if req.Name == "" || (len(req.PublicKey) > 0 && !validPublicKey(req.PublicKey)) {
		return 0, nil, errWrongRequest()
	}
	s.mu.Lock()
	h, ok := s.st.hatcheries[req.Name]
	if !ok {
		h = &sdk.V2Hatchery{ID: requestID(), Name: req.Name, ModelType: req.Type, Config: map[string]any{}, HTTPURL: req.HTTPURL}
		s.st.hatcheries[req.Name] = h
	}
	before := *h // the answer shows the state before this sign-in
	h.Config, h.PublicKey, h.HTTPURL, h.ModelType = req.Config, req.PublicKey, req.HTTPURL, req.Type
	s.st.pubKeys[req.Name] = req.PublicKey
	s.mu.Unlock()
	tok, err := s.newSession(respWriter(r), &session{api: apiV2, name: req.Name, hatchID: h.ID, modelType: req.Type})
	if err != nil {
		return 0, nil, err
	}
	if before.Config == nil {
		before.Config = map[string]any{}
	}
	return 200, sdk.V2HatcherySigninResponse{
		UpToDate: true, // the simulator takes every version as current
		APIURL:   s.apiURL(),
		Token:    tok,
		Hatchery: before,
		Region:   s.opts.Regions[0],
	}, nil
}

func (s *Server) heartbeat(api apiKind) handler {
	return func(r *http.Request, sess *session) (int, any, error) {
		var st sdk.MonitoringStatus
		if err := decodeBody(r, &st); err != nil {
			return 0, nil, err
		}
		s.mu.Lock()
		if api == apiV1 {
			s.st.heartbeatsV1 = append(s.st.heartbeatsV1, st)
		} else {
			s.st.heartbeatsV2 = append(s.st.heartbeatsV2, st)
			if h, ok := s.st.hatcheries[sess.name]; ok {
				h.LastHeartbeat = time.Now().UTC()
			}
		}
		s.mu.Unlock()
		return http.StatusNoContent, nil, nil
	}
}

// --- V1 queue ---

func (s *Server) queueV1(r *http.Request, _ *session) (int, any, error) {
	mt := r.URL.Query().Get("modelType")
	regions, byRegion := r.URL.Query()["region"]
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []sdk.WorkflowNodeJobRun{}
	for _, j := range s.st.jobsV1 {
		if j.run.Status != sdk.StatusWaiting || s.bookedLocked(j, now) != "" {
			continue // booked jobs are left out, the caller's own included
		}
		if mt != "" && j.run.ModelType != mt {
			continue
		}
		// Each region value matches exactly; the empty value matches the
		// jobs without a region; no region parameter lists them all.
		if byRegion && !slices.Contains(regions, j.run.Job.Action.Requirements.First(sdk.RegionRequirement)) {
			continue
		}
		out = append(out, s.jobV1View(j))
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return 200, out, nil
}

// jobV1View is the job as the API shows it; the caller holds s.mu.
func (s *Server) jobV1View(j *jobV1) sdk.WorkflowNodeJobRun {
	v := j.run
	v.QueuedSeconds = int64(time.Since(v.Queued).Seconds())
	if b := s.bookedLocked(j, s.now()); b != "" {
		v.BookedBy = sdk.Service{Name: b, ID: s.st.services[b]}
	}
	v.SpawnInfos = nil // the API answers null here, infos are stored apart
	return v
}

// jobV1 finds a V1 job; a missing one answers 403 as the API does. The
// caller holds s.mu.
func (s *Server) findJobV1(r *http.Request) (*jobV1, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		return nil, errForbidden()
	}
	j, ok := s.st.jobsV1[id]
	if !ok {
		return nil, errForbidden()
	}
	return j, nil
}

func (s *Server) jobV1Infos(r *http.Request, _ *session) (int, any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, err := s.findJobV1(r)
	if err != nil {
		return 0, nil, err
	}
	return 200, s.jobV1View(j), nil
}

func (s *Server) jobV1Book(r *http.Request, sess *session) (int, any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, err := s.findJobV1(r)
	if err != nil {
		return 0, nil, err
	}
	now := s.now()
	if s.bookedLocked(j, now) != "" || j.run.Status != sdk.StatusWaiting {
		return 0, nil, newErr(403, errIDAlreadyBooked, "Job already booked", "")
	}
	j.bookedBy, j.bookedAt = sess.name, now
	return 200, sdk.BookedJob{
		ProjectKey: paramValue(j.run.Parameters, "cds.project"), WorkflowName: paramValue(j.run.Parameters, "cds.workflow"),
		WorkflowID: 1, RunID: 1, NodeRunName: j.run.Job.Action.Name, NodeRunID: j.run.WorkflowNodeRunID, JobName: j.run.Job.Action.Name,
	}, nil
}

func paramValue(ps []sdk.Parameter, name string) string {
	for _, p := range ps {
		if p.Name == name {
			return p.Value
		}
	}
	return ""
}

func (s *Server) jobV1Release(r *http.Request, _ *session) (int, any, error) {
	s.mu.Lock()
	j, err := s.findJobV1(r)
	if err != nil {
		s.mu.Unlock()
		return 0, nil, err
	}
	if s.bookedLocked(j, s.now()) == "" {
		s.mu.Unlock()
		return 0, nil, newErr(400, errIDAlreadyReleased, "Job already released", "")
	}
	j.bookedBy = ""
	id, st := j.run.ID, j.run.Status
	s.mu.Unlock()
	s.broadcastV1(id, st)
	return 200, nil, nil
}

func (s *Server) jobV1SpawnInfos(r *http.Request, _ *session) (int, any, error) {
	var infos []sdk.SpawnInfo
	if err := decodeBody(r, &infos); err != nil {
		return 0, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j, err := s.findJobV1(r)
	if err != nil {
		return 0, nil, err
	}
	for _, in := range infos {
		// The API answers 204 for an unknown id but stores the info
		// without a user message: the simulator flags it too. It
		// renders the user message as the API does, and flags the
		// garbled ones.
		msg, ok := RenderSpawnInfo(in.Message)
		switch {
		case !ok:
			s.st.unknownSpawnInfos = append(s.st.unknownSpawnInfos, in.Message.ID)
		case strings.Contains(msg, "%!"):
			s.st.garbledSpawnInfos = append(s.st.garbledSpawnInfos, msg)
		}
		in.UserMessage = msg
		j.spawnInfos = append(j.spawnInfos, in)
	}
	return http.StatusNoContent, nil, nil
}

// resultBody is the body of POST /queue/workflows/{id}/result with the
// keys the API reads: buildID and remoteTime are camel case.
type resultBody struct {
	ID         int64     `json:"id"`
	BuildID    int64     `json:"buildID"`
	Status     string    `json:"status"`
	Reason     string    `json:"reason"`
	RemoteTime time.Time `json:"remoteTime"`
	Duration   string    `json:"duration"`
}

// jobV1Result takes a result from a hatchery (V1 session, failing a job it
// gives up on) or from the job's worker. The API locks the job by the
// body's buildID: without it (other keys, or 0) it answers 409 "Resource
// locked".
func (s *Server) jobV1Result(r *http.Request, _ *session) (int, any, error) {
	sess, err := s.authenticate(r, apiV1)
	if err != nil {
		var werr error
		if sess, werr = s.authenticate(r, apiWorker); werr != nil {
			return 0, nil, err
		}
	}
	var res resultBody
	if err := decodeBody(r, &res); err != nil {
		return 0, nil, err
	}
	s.mu.Lock()
	j, err := s.findJobV1(r)
	if err != nil {
		s.mu.Unlock()
		return 0, nil, err
	}
	if res.BuildID != j.run.ID {
		s.mu.Unlock()
		return 0, nil, newErr(http.StatusConflict, errIDLocked, "Resource locked", "")
	}
	j.results = append(j.results, sdk.Result{ID: res.ID, BuildID: res.BuildID, Status: res.Status, Reason: res.Reason, RemoteTime: res.RemoteTime, Duration: res.Duration})
	if res.Status != "" {
		j.run.Status = res.Status
	}
	id, st := j.run.ID, j.run.Status
	s.mu.Unlock()
	if sess.api == apiWorker {
		s.FinishWorker(sess.name, st)
		return http.StatusNoContent, nil, nil
	}
	s.broadcastV1(id, st)
	return http.StatusNoContent, nil, nil
}

// --- V2 queue ---

func (s *Server) knownRegion(region string) bool {
	for _, r := range s.opts.Regions {
		if r == region {
			return true
		}
	}
	return false
}

func (s *Server) queueV2(r *http.Request, sess *session) (int, any, error) {
	region := r.PathValue("region")
	if !s.knownRegion(region) {
		return 0, nil, errNotFound("region " + region + " not found")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requeueLocked(s.now()) // queued again: listed below
	out := []sdk.V2WorkflowRunJob{}
	for _, j := range s.st.jobsV2 {
		if j.run.Region == region && j.run.Status == sdk.StatusWaiting && j.run.ModelType == sess.modelType {
			out = append(out, j.run)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].RunNumber < out[b].RunNumber })
	return 200, out, nil
}

// findJobV2 finds a V2 job of the path's region; the caller holds s.mu.
func (s *Server) findJobV2(r *http.Request) (*jobV2, error) {
	j, ok := s.st.jobsV2[r.PathValue("id")]
	if !ok || j.run.Region != r.PathValue("region") {
		return nil, errNotFound("")
	}
	return j, nil
}

func (s *Server) jobV2Info(r *http.Request, _ *session) (int, any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requeueLocked(s.now()) // a job Scheduling too long reads Waiting, as in the queue
	j, err := s.findJobV2(r)
	if err != nil {
		return 0, nil, err
	}
	return 200, sdk.V2QueueJobInfo{RunJob: j.run, Model: j.model}, nil
}

// jobV2Take: a job no longer Waiting answers 403 id 89 (the captures hold
// no such answer; the client reads it as already booked).
func (s *Server) jobV2Take(r *http.Request, sess *session) (int, any, error) {
	now := s.now()
	s.mu.Lock()
	s.requeueLocked(now)
	j, err := s.findJobV2(r)
	if err != nil {
		s.mu.Unlock()
		return 0, nil, err
	}
	if j.takenBy != "" || j.run.Status != sdk.StatusWaiting {
		s.mu.Unlock()
		return 0, nil, newErr(403, errIDAlreadyBooked, "Job already booked", "")
	}
	j.takenBy, j.takenAt = sess.name, now
	j.run.Status = sdk.V2StatusScheduling
	j.run.HatcheryName = sess.name
	run := j.run
	s.mu.Unlock()
	s.broadcastV2(run.Region, run.ModelType, run.ID, run.RunNumber)
	return 200, run, nil
}

func (s *Server) jobV2Release(r *http.Request, _ *session) (int, any, error) {
	s.mu.Lock()
	s.requeueLocked(s.now())
	j, err := s.findJobV2(r)
	if err != nil {
		s.mu.Unlock()
		return 0, nil, err
	}
	if j.takenBy == "" {
		s.mu.Unlock()
		return 0, nil, newErr(400, errIDAlreadyReleased, "Job already released", "")
	}
	j.takenBy = ""
	j.run.HatcheryName = ""
	j.run.Status = sdk.StatusWaiting
	run := j.run
	s.mu.Unlock()
	s.broadcastV2(run.Region, run.ModelType, run.ID, run.RunNumber)
	return 200, nil, nil
}

func (s *Server) jobV2SendInfo(r *http.Request, _ *session) (int, any, error) {
	var info sdk.V2SendJobRunInfo
	if err := decodeBody(r, &info); err != nil {
		return 0, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j, err := s.findJobV2(r)
	if err != nil {
		return 0, nil, err
	}
	j.infos = append(j.infos, info)
	return http.StatusNoContent, nil, nil
}

// --- workers ---

func (s *Server) workersV1(_ *http.Request, _ *session) (int, any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.purgeWorkersLocked(s.now())
	out := []sdk.Worker{}
	for _, w := range s.st.workrs {
		if !w.v2 {
			out = append(out, w.w)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return 200, out, nil
}

// workersV2 answers null when there is no worker, as the API does.
func (s *Server) workersV2(_ *http.Request, _ *session) (int, any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []sdk.V2Worker
	for _, w := range s.st.workrs {
		if w.v2 {
			out = append(out, w.w2)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return 200, out, nil
}

func (s *Server) workerDisable(r *http.Request, _ *session) (int, any, error) {
	id := r.PathValue("id")
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.st.workrs {
		if !w.v2 && w.w.ID == id {
			w.disabled = true
			w.w.Status = sdk.StatusDisabled
			return 200, nil, nil
		}
	}
	return 0, nil, errNotFound("")
}

// --- worker models ---

func (s *Server) modelsEnabled(_ *http.Request, _ *session) (int, any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []sdk.Model{}
	for _, m := range s.st.models {
		if !m.m.Disabled {
			out = append(out, m.m)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return 200, out, nil
}

// findModel finds a V1 model; the caller holds s.mu.
func (s *Server) findModel(r *http.Request) (*modelV1, error) {
	m, ok := s.st.models[r.PathValue("group")+"/"+r.PathValue("name")]
	if !ok {
		return nil, errNotFound("")
	}
	return m, nil
}

func (s *Server) modelSecrets(r *http.Request, _ *session) (int, any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.findModel(r)
	if err != nil {
		return 0, nil, err
	}
	out := append([]sdk.WorkerModelSecret{}, m.secrets...)
	return 200, out, nil
}

func (s *Server) modelBook(r *http.Request, sess *session) (int, any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.findModel(r)
	if err != nil {
		return 0, nil, err
	}
	if m.bookedBy != "" && m.bookedBy != sess.name {
		return 0, nil, newErr(403, errIDAlreadyBooked, "Worker model already booked", "")
	}
	m.bookedBy = sess.name
	return http.StatusNoContent, nil, nil
}

func (s *Server) modelSpawnError(r *http.Request, _ *session) (int, any, error) {
	var f sdk.SpawnErrorForm
	if err := decodeBody(r, &f); err != nil {
		return 0, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.findModel(r)
	if err != nil {
		return 0, nil, err
	}
	m.spawnErrors = append(m.spawnErrors, f)
	m.bookedBy = ""
	m.m.NbSpawnErr++
	msg, logs, now := f.Error, string(f.Logs), time.Now().UTC()
	m.m.LastSpawnErr, m.m.LastSpawnErrLogs, m.m.DateLastSpawnErr = &msg, &logs, &now
	return 200, nil, nil
}

// modelV2 accepts a V1 or a V2 session.
func (s *Server) modelV2(r *http.Request, _ *session) (int, any, error) {
	if _, err := s.authenticate(r, apiV1); err != nil {
		if _, err2 := s.authenticate(r, apiV2); err2 != nil {
			return 0, nil, err2
		}
	}
	key, vcs, repo, name := r.PathValue("key"), r.PathValue("vcs"), r.PathValue("repo"), r.PathValue("name")
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.st.v2mods[v2ModelKey(key, vcs, repo, name, r.URL.Query().Get("branch"))]
	if !ok {
		m, ok = s.st.v2mods[v2ModelKey(key, vcs, repo, name, "")]
	}
	if !ok {
		return 0, nil, errNotFound("")
	}
	return 200, m, nil
}
