package cdssim

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// workerClaims are the claims of a worker JWT a hatchery signs (the parts
// the simulator reads).
type workerClaims struct {
	Issuer    string `json:"iss"`
	Subject   string `json:"sub"`
	ExpiresAt int64  `json:"exp"`
	Worker    struct {
		WorkerName   string `json:"worker_model"`
		JobID        int64  `json:"job_id"`
		RunJobID     string `json:"run_job_id"`
		RegisterOnly bool   `json:"register_only"`
		HatcheryName string `json:"hatchery_name"`
	} `json:"Worker"`
}

// errWorkerSignin is the API's answer to a worker token it cannot verify:
// 401 "not authenticated".
func errWorkerSignin(from string) *apiErr {
	return newErr(401, errIDNotAuthenticated, "not authenticated", from)
}

// verifyWorkerToken checks a worker JWT as the API does: the issuing
// hatchery's public key, as sent at its sign-in, must be a PKCS#1 "RSA
// PUBLIC KEY" PEM, and the RS512 signature must verify with it.
func verifyWorkerToken(tok string, pubKeyOf func(hatchery string) ([]byte, bool), now time.Time) (workerClaims, error) {
	var c workerClaims
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return c, errWorkerSignin("malformed worker token")
	}
	body, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil || json.Unmarshal(body, &c) != nil {
		return c, errWorkerSignin("malformed worker token")
	}
	name := c.Worker.HatcheryName
	if name == "" {
		name = c.Issuer
	}
	pemBytes, ok := pubKeyOf(name)
	if !ok {
		return c, errWorkerSignin("unknown hatchery " + name)
	}
	blk, _ := pem.Decode(pemBytes)
	if blk == nil || blk.Type != "RSA PUBLIC KEY" {
		return c, errWorkerSignin("failed to decode PEM block containing public key")
	}
	pub, err := x509.ParsePKCS1PublicKey(blk.Bytes)
	if err != nil {
		return c, errWorkerSignin("failed to parse public key")
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return c, errWorkerSignin("malformed worker token signature")
	}
	sum := sha512.Sum512([]byte(parts[0] + "." + parts[1]))
	if rsa.VerifyPKCS1v15(pub, crypto.SHA512, sum[:], sig) != nil {
		return c, errWorkerSignin("invalid worker token signature")
	}
	if c.ExpiresAt != 0 && now.Unix() > c.ExpiresAt {
		return c, errWorkerSignin("worker token expired")
	}
	return c, nil
}

// hatcheryPublicKey is the public key the hatchery name sent at its last
// sign-in (V1 or V2).
func (s *Server) hatcheryPublicKey(name string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.st.pubKeys[name]
	return k, ok && len(k) > 0
}

// workerSignin is POST /auth/consumer/worker/signin: the worker's bearer
// token is the JWT its hatchery signed. A token that does not verify with
// the hatchery's public key answers 401. The worker is registered on its
// job (the simulator uses this route for V1 and V2 workers alike); the
// session JWT comes back in the X-CDS-JWT header.
func (s *Server) workerSignin(r *http.Request, _ *session) (int, any, error) {
	c, err := verifyWorkerToken(bearer(r), s.hatcheryPublicKey, time.Now())
	if err != nil {
		return 0, nil, err
	}
	name := c.Worker.WorkerName
	if name == "" {
		name = c.Subject
	}
	jobID := c.Worker.RunJobID
	if c.Worker.JobID != 0 {
		jobID = strconv.FormatInt(c.Worker.JobID, 10)
	}
	if c.Worker.RegisterOnly {
		jobID = ""
	}
	if s.RegisterWorker(name, jobID) == "" {
		return 0, nil, errForbidden()
	}
	w := respWriter(r)
	tok, err := s.newSession(w, &session{api: apiWorker, name: name})
	if err != nil {
		return 0, nil, err
	}
	w.Header().Set("X-CDS-JWT", tok)
	s.mu.Lock()
	defer s.mu.Unlock()
	wk := s.st.workrs[name]
	if wk.v2 {
		return 200, wk.w2, nil
	}
	return 200, wk.w, nil
}

// workerOf is the running worker of a worker session; the caller holds s.mu.
func (s *Server) workerOf(sess *session) (*worker, error) {
	w, ok := s.st.workrs[sess.name]
	if !ok || !w.ended.IsZero() {
		return nil, errForbidden()
	}
	return w, nil
}

// jobV1Take is POST /queue/workflows/{id}/take by a worker: only the job
// the worker was spawned for, booked by the worker's hatchery.
func (s *Server) jobV1Take(r *http.Request, sess *session) (int, any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, err := s.findJobV1(r)
	if err != nil {
		return 0, nil, err
	}
	w, err := s.workerOf(sess)
	if err != nil {
		return 0, nil, err
	}
	if w.v2 || w.w.JobRunID == nil || *w.w.JobRunID != j.run.ID || j.bookedBy != w.w.HatcheryName {
		return 0, nil, errForbidden()
	}
	j.run.Status = sdk.StatusBuilding
	return 200, s.jobV1View(j), nil
}

// jobV2WorkerResult is POST /v2/queue/{region}/job/{id}/result by the
// job's worker: the job ends with the result's status.
func (s *Server) jobV2WorkerResult(r *http.Request, sess *session) (int, any, error) {
	var res struct {
		Status string `json:"status"`
	}
	if err := decodeBody(r, &res); err != nil {
		return 0, nil, err
	}
	s.mu.Lock()
	j, err := s.findJobV2(r)
	if err == nil {
		var w *worker
		if w, err = s.workerOf(sess); err == nil && (!w.v2 || w.w2.JobRunID != j.run.ID) {
			err = errForbidden()
		}
	}
	s.mu.Unlock()
	if err != nil {
		return 0, nil, err
	}
	s.FinishWorker(sess.name, res.Status)
	return http.StatusNoContent, nil, nil
}

// Worker is a simulated CDS worker process: it talks to the simulator over
// HTTP with the token its hatchery gave it, as the real worker binary does.
type Worker struct {
	api     string
	hc      *http.Client
	session string
	v1Job   int64
	runJob  string
	region  string
	// logs is the connection to the CDN log service; nil when the worker
	// has no log address or could not dial it (logErr says why).
	logs   net.Conn
	logErr error
}

// WorkerJob is what a launched worker knows of its job from its
// configuration (CDS_CONFIG).
type WorkerJob struct {
	// Token is the JWT the hatchery signed (api_token).
	Token string
	// V1JobID is the booked V1 job (0 for a V2 job).
	V1JobID int64
	// RunJobID is the V2 run job ("" for a V1 job).
	RunJobID string
	// Region is the V2 job's region.
	Region string
	// LogAddr is the CDN's TCP log address (gelf_service_addr). Without
	// one, or when it cannot be dialled, the worker behaves as the real
	// one: it cannot send its step logs, never sends a V1 job's end (End
	// returns ErrNoLogAddress and the job stays Building), and ends a V2
	// job without its logs.
	LogAddr string
}

// workerRequestTimeout bounds each call of a simulated worker: the
// simulator answers on loopback, so a stuck call is a bug.
const workerRequestTimeout = 10 * time.Second

// StartWorker is a launched worker's first steps: it connects to the
// CDN's log service (job.LogAddr; a failure is kept, not returned, as the
// real worker only logs it), signs in with its token (POST
// /auth/consumer/worker/signin, 401 when the token does not verify with
// its hatchery's public key), then takes its job (V1: POST
// /queue/workflows/{id}/take; a V2 worker's sign-in binds it to its job).
func StartWorker(ctx context.Context, apiURL string, job WorkerJob) (*Worker, error) {
	w := &Worker{api: strings.TrimRight(apiURL, "/"), hc: &http.Client{Timeout: workerRequestTimeout}, v1Job: job.V1JobID, runJob: job.RunJobID, region: job.Region}
	if job.LogAddr == "" {
		w.logErr = errors.New("dial tcp: missing address")
	} else {
		d := net.Dialer{Timeout: workerRequestTimeout}
		w.logs, w.logErr = d.DialContext(ctx, "tcp", job.LogAddr)
	}
	resp, err := w.do(ctx, http.MethodPost, "/auth/consumer/worker/signin", job.Token, map[string]string{"os": "linux", "arch": "amd64"})
	if err != nil {
		w.closeLogs()
		return nil, fmt.Errorf("worker sign in: %w", err)
	}
	w.session = resp.Header.Get("X-CDS-JWT")
	if w.session == "" {
		w.closeLogs()
		return nil, errors.New("worker sign in: no session token answered")
	}
	if w.v1Job != 0 {
		if _, err := w.do(ctx, http.MethodPost, "/queue/workflows/"+strconv.FormatInt(w.v1Job, 10)+"/take", w.session, map[string]string{"time": time.Now().UTC().Format(time.RFC3339)}); err != nil {
			w.closeLogs()
			return nil, fmt.Errorf("worker take job %d: %w", w.v1Job, err)
		}
	}
	return w, nil
}

// closeLogs closes the connection to the CDN log service, if any.
func (w *Worker) closeLogs() {
	if w.logs != nil {
		_ = w.logs.Close()
		w.logs = nil
	}
}

// jobKey is the job as the CDN log service files its logs.
func (w *Worker) jobKey() string {
	if w.v1Job != 0 {
		return strconv.FormatInt(w.v1Job, 10)
	}
	return w.runJob
}

// sendStepLog sends one step log line to the CDN log service.
func (w *Worker) sendStepLog(msg string) error {
	if w.logs == nil {
		return w.logErr
	}
	b, err := json.Marshal(logMessage{Job: w.jobKey(), Message: msg})
	if err != nil {
		return err
	}
	if err := w.logs.SetWriteDeadline(time.Now().Add(workerRequestTimeout)); err != nil {
		return err
	}
	_, err = w.logs.Write(append(b, 0))
	return err
}

// End runs the job's step, whose log goes to the CDN log service, then
// sends the job's result (Success when status is empty) and the worker
// leaves: V1 POST /queue/workflows/{id}/result, V2 POST
// /v2/queue/{region}/job/{id}/result. Like the real worker, one that
// cannot send its step log never sends a V1 job's result: End then returns
// an error matching ErrNoLogAddress and the job stays Building; a V2 job
// ends without its log.
func (w *Worker) End(ctx context.Context, status string) error {
	defer w.closeLogs()
	if status == "" {
		status = sdk.StatusSuccess
	}
	logErr := w.sendStepLog("step 1 ended: " + status)
	if w.v1Job != 0 && logErr != nil {
		return fmt.Errorf("worker of job %d: %w (%w)", w.v1Job, ErrNoLogAddress, logErr)
	}
	if w.v1Job != 0 {
		id := strconv.FormatInt(w.v1Job, 10)
		body := map[string]any{"id": w.v1Job, "buildID": w.v1Job, "status": status, "remoteTime": time.Now().UTC()}
		if _, err := w.do(ctx, http.MethodPost, "/queue/workflows/"+id+"/result", w.session, body); err != nil {
			return fmt.Errorf("worker result of job %s: %w", id, err)
		}
		return nil
	}
	path := "/v2/queue/" + w.region + "/job/" + w.runJob + "/result"
	if _, err := w.do(ctx, http.MethodPost, path, w.session, map[string]string{"status": status}); err != nil {
		return fmt.Errorf("worker result of job %s: %w", w.runJob, err)
	}
	return nil
}

// workerRetryEvery and workerRetryFor pace a simulated worker's retries of
// a call the API answered 5xx (or did not answer), as the real worker
// retries: injected API failures must not lose a job's result.
const (
	workerRetryEvery = 50 * time.Millisecond
	workerRetryFor   = 2 * time.Minute
)

// do sends one call, retried on 5xx and transport errors until
// workerRetryFor or ctx ends; 4xx answers are final.
func (w *Worker) do(ctx context.Context, method, path, token string, body any) (*http.Response, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, workerRetryFor)
	defer cancel()
	t := time.NewTicker(workerRetryEvery)
	defer t.Stop()
	for {
		resp, retry, err := w.once(ctx, method, path, token, b)
		if !retry {
			return resp, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (gave up: %w)", err, ctx.Err())
		case <-t.C:
		}
	}
}

func (w *Worker) once(ctx context.Context, method, path, token string, body []byte) (*http.Response, bool, error) {
	req, err := http.NewRequestWithContext(ctx, method, w.api+path, bytes.NewReader(body))
	if err != nil {
		return nil, false, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := w.hc.Do(req)
	if err != nil {
		return nil, ctx.Err() == nil, err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode >= 300 {
		return nil, resp.StatusCode >= 500, fmt.Errorf("%s %s: status %d: %s", method, path, resp.StatusCode, bytes.TrimSpace(msg))
	}
	return resp, false, nil
}
