package cdssim_test

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/cdssim"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
)

func rsaKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	return k
}

func signinWithKey(t *testing.T, sim *cdssim.Server, name string, pub []byte) *cdsclient.Client {
	t.Helper()
	c, err := cdsclient.New(cdsclient.Config{APIURL: sim.URL(), Token: sim.TokenV1(), ServiceName: name, PublicKey: pub, RequestTimeout: 5 * time.Second})
	require.NoError(t, err)
	require.NoError(t, c.SignIn(t.Context()))
	return c
}

func workerToken(t *testing.T, key *rsa.PrivateKey, hatcheryName, worker string, jobID int64) string {
	t.Helper()
	now := time.Now()
	tok, err := hatchery.SignWorkerJWT(key, hatchery.WorkerJWTClaims{
		Issuer: hatcheryName, Subject: worker, ID: worker, IssuedAt: now.Unix(), ExpiresAt: now.Add(time.Hour).Unix(),
		Worker: hatchery.WorkerJWTWorker{WorkerName: worker, JobID: jobID, HatcheryName: hatcheryName},
	})
	require.NoError(t, err)
	return tok
}

// The API verifies a worker's token with the public key its hatchery sent
// at sign-in, read as a PKCS#1 "RSA PUBLIC KEY" PEM: a PKIX key is accepted
// at sign-in but every worker sign-in then answers 401.
func TestWorkerSigninVerifiesHatcheryKey(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	sim := cdssim.Start(t, cdssim.Options{})
	key := rsaKey(t)
	pkcs1 := pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&key.PublicKey)})
	pkixDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	require.NoError(t, err)
	pkix := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pkixDER})

	good := signinWithKey(t, sim, "h-pkcs1", pkcs1)
	bad := signinWithKey(t, sim, "h-pkix", pkix) // accepted, as the API does

	book := func(c *cdsclient.Client) int64 {
		id := sim.AddJobV1(cdssim.JobV1{})
		_, err := c.QueueJobBook(ctx, id)
		require.NoError(t, err)
		return id
	}

	id := book(bad)
	_, err = cdssim.StartWorker(ctx, sim.URL(), cdssim.WorkerJob{Token: workerToken(t, key, "h-pkix", "w-pkix", id), V1JobID: id})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "status 401")
	assert.Contains(t, err.Error(), "failed to decode PEM block containing public key")
	_, ok := sim.Worker("w-pkix")
	assert.False(t, ok, "no worker registered")

	id = book(good)
	_, err = cdssim.StartWorker(ctx, sim.URL(), cdssim.WorkerJob{Token: workerToken(t, rsaKey(t), "h-pkcs1", "w-other", id), V1JobID: id})
	require.Error(t, err, "a token signed with another key")
	assert.Contains(t, err.Error(), "status 401")
	_, err = cdssim.StartWorker(ctx, sim.URL(), cdssim.WorkerJob{Token: workerToken(t, key, "h-unknown", "w-unknown", id), V1JobID: id})
	require.Error(t, err, "a hatchery that never signed in")
	assert.Contains(t, err.Error(), "status 401")

	w, err := cdssim.StartWorker(ctx, sim.URL(), cdssim.WorkerJob{Token: workerToken(t, key, "h-pkcs1", "w-good", id), V1JobID: id, LogAddr: sim.CDNLogAddr()})
	require.NoError(t, err)
	st, _ := sim.JobV1(id)
	assert.Equal(t, sdk.StatusBuilding, st.Status)
	ws, _ := sim.Worker("w-good")
	assert.Equal(t, sdk.StatusBuilding, ws.Status)
	require.NoError(t, w.End(ctx, ""))
	st, _ = sim.JobV1(id)
	assert.Equal(t, sdk.StatusSuccess, st.Status)
	ws, ok = sim.Worker("w-good")
	require.True(t, ok, "an ended V1 worker stays listed")
	assert.Equal(t, sdk.StatusDisabled, ws.Status, "the worker left: disabled")
}

// rawSigninV1 signs in over HTTP and returns the session JWT.
func rawSigninV1(t *testing.T, sim *cdssim.Server, name string) string {
	t.Helper()
	body, _ := json.Marshal(sdk.AuthConsumerSigninRequest{Token: sim.TokenV1(), Service: sdk.Service{Name: name, Type: sdk.TypeHatchery, PublicKey: publicKey(t)}})
	resp, err := http.Post(sim.URL()+"/auth/consumer/builtin/signin", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	var out sdk.AuthConsumerSigninResponse
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out.Token
}

// The API locks a V1 job by the result's buildID (camel case): a body
// with other keys reads build 0 and answers 409 "Resource locked".
func TestResultNeedsCamelCaseBuildID(t *testing.T) {
	t.Parallel()
	sim := cdssim.Start(t, cdssim.Options{})
	tok := rawSigninV1(t, sim, "h")
	id := sim.AddJobV1(cdssim.JobV1{})
	post := func(body map[string]any) (int, sdk.APIError) {
		b, _ := json.Marshal(body)
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, sim.URL()+"/queue/workflows/"+strconv.FormatInt(id, 10)+"/result", bytes.NewReader(b))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var e sdk.APIError
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, e
	}
	now := time.Now().UTC()
	code, e := post(map[string]any{"id": id, "build_id": id, "status": "Fail", "remote_time": now})
	assert.Equal(t, http.StatusConflict, code)
	assert.Equal(t, "Resource locked", e.Message)
	st, _ := sim.JobV1(id)
	assert.Equal(t, sdk.StatusWaiting, st.Status)

	code, _ = post(map[string]any{"id": id, "buildID": id, "status": "Fail", "remoteTime": now, "reason": "gave up"})
	assert.Equal(t, http.StatusNoContent, code)
	st, _ = sim.JobV1(id)
	assert.Equal(t, sdk.StatusFail, st.Status)
	require.Len(t, st.Results, 1)
	assert.Equal(t, "gave up", st.Results[0].Reason)
}

// GET /queue/workflows matches each region value exactly; the empty value
// matches the jobs without a region; no region parameter lists them all.
func TestV1QueueRegionFilter(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	sim := cdssim.Start(t, cdssim.Options{})
	c := newClient(t, sim, "h", true, false)
	region := func(r string) sdk.RequirementList {
		return sdk.RequirementList{{Type: sdk.RegionRequirement, Value: r}}
	}
	eu := sim.AddJobV1(cdssim.JobV1{Requirements: region("eu")})
	us := sim.AddJobV1(cdssim.JobV1{Requirements: region("us")})
	none := sim.AddJobV1(cdssim.JobV1{})
	ids := func(regions []string) []int64 {
		jobs, err := c.QueueWorkflowNodeJobRun(ctx, regions)
		require.NoError(t, err)
		out := []int64{}
		for _, j := range jobs {
			out = append(out, j.ID)
		}
		return out
	}
	assert.Equal(t, []int64{eu, none}, ids([]string{"eu", ""}))
	assert.Equal(t, []int64{eu}, ids([]string{"eu"}), "a region alone leaves the jobs without a region out")
	assert.Equal(t, []int64{none}, ids([]string{""}))
	assert.Equal(t, []int64{eu, us, none}, ids(nil))
}

// The API stores a spawn info with an id it does not define without a
// message (users see nothing): the simulator flags such ids.
func TestUnknownSpawnInfoIDsFlagged(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	sim := cdssim.Start(t, cdssim.Options{})
	c := newClient(t, sim, "h", true, false)
	id := sim.AddJobV1(cdssim.JobV1{})
	_, err := c.QueueJobBook(ctx, id)
	require.NoError(t, err)
	require.NoError(t, c.QueueJobSendSpawnInfo(ctx, id, []sdk.SpawnInfo{
		{Message: sdk.SpawnInfoMessage{ID: "MsgSpawnInfoHatcheryStarts", Args: []string{"h", "m"}}},
		{Message: sdk.SpawnInfoMessage{ID: "MsgSpawnInfoHatcheryStartsSuccessfully", Args: []string{"h"}}},
	}))
	assert.Equal(t, []string{"MsgSpawnInfoHatcheryStartsSuccessfully"}, sim.UnknownSpawnInfoIDs())
}

// The API stores each spawn info's user message as its id's English text
// formatted with the info's arguments: a wrong argument count shows users
// a "%!" mark. The messages below are those a real CDS API stored.
func TestSpawnInfosRenderedAsTheAPIDoes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	sim := cdssim.Start(t, cdssim.Options{})
	c := newClient(t, sim, "h", true, false)
	id := sim.AddJobV1(cdssim.JobV1{})
	_, err := c.QueueJobBook(ctx, id)
	require.NoError(t, err)
	msg := func(id string, args ...string) sdk.SpawnInfo {
		return sdk.SpawnInfo{Message: sdk.SpawnInfoMessage{ID: id, Args: args}}
	}
	require.NoError(t, c.QueueJobSendSpawnInfo(ctx, id, []sdk.SpawnInfo{
		msg("MsgSpawnInfoHatcheryStarts", "hv-real", "shared.infra/vsphere-v1"),
		msg("MsgSpawnInfoHatcheryStarts", "hv-real", "vsphere-v1-w1", "shared.infra/vsphere-v1"),
		msg("MsgSpawnInfoHatcheryErrorSpawn", "hv-real", "shared.infra/vsphere-v1", "12s", "clone failed"),
		msg("MsgSpawnErrorHatcheryRetryAttempt", "hv-real", "could not start"),
		msg("MsgSpawnInfoWorkerForJob", "w1", "extra"),
		msg("MsgSpawnInfoHatcheryStartsSuccessfully", "hv-real"),
	}))
	st, _ := sim.JobV1(id)
	got := make([]string, 0, len(st.SpawnInfos))
	for _, i := range st.SpawnInfos {
		got = append(got, i.UserMessage)
	}
	assert.Equal(t, []string{
		"Hatchery hv-real starts spawn worker shared.infra/vsphere-v1 with model %!s(MISSING)",
		"Hatchery hv-real starts spawn worker vsphere-v1-w1 with model shared.infra/vsphere-v1",
		"Error while Hatchery hv-real spawns worker with model shared.infra/vsphere-v1 after 12s, err: clone failed",
		"Job execution failed by hatchery hv-real. Reason: could not start",
		"This worker w1 was created to take this action%!(EXTRA string=extra)",
		"",
	}, got)
	assert.Equal(t, []string{got[0], got[4]}, sim.GarbledSpawnInfos())
}

// rawSigninV2 signs in over HTTP as a V2 vsphere hatchery and returns the
// session JWT.
func rawSigninV2(t *testing.T, sim *cdssim.Server, name string) string {
	t.Helper()
	body, _ := json.Marshal(sdk.V2HatcherySigninRequest{Token: sim.TokenV2(), Name: name, Type: sdk.VSphere, PublicKey: publicKey(t)})
	resp, err := http.Post(sim.URL()+"/v2/auth/consumer/hatchery/signin", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	var out sdk.V2HatcherySigninResponse
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out.Token
}

// The API sends a V2 job's runs-on as a plain string (the model) when the
// job sets no memory and no flavor, as an object otherwise.
func TestV2QueueRunsOnForms(t *testing.T) {
	t.Parallel()
	sim := cdssim.Start(t, cdssim.Options{})
	tok := rawSigninV2(t, sim, "h")
	plain := sim.AddJobV2(cdssim.JobV2{Model: sdk.V2WorkerModel{Name: "debian"}})
	mem := sim.AddJobV2(cdssim.JobV2{Model: sdk.V2WorkerModel{Name: "debian"}, RunsOn: sdk.V2JobRunsOn{Memory: "4096"}})
	flavor := sim.AddJobV2(cdssim.JobV2{Model: sdk.V2WorkerModel{Name: "debian"}, RunsOn: sdk.V2JobRunsOn{Flavor: "large"}})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, sim.URL()+"/v2/queue/"+sim.Region(), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	var jobs []struct {
		ID  string `json:"id"`
		Job struct {
			RunsOn json.RawMessage `json:"runs-on"`
		} `json:"job"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&jobs))
	got := map[string]string{}
	for _, j := range jobs {
		got[j.ID] = string(j.Job.RunsOn)
	}
	assert.JSONEq(t, `"debian"`, got[plain])
	assert.JSONEq(t, `{"model":"debian","memory":"4096","flavor":""}`, got[mem])
	assert.JSONEq(t, `{"model":"debian","memory":"","flavor":"large"}`, got[flavor])
}

// /config/cdn answers a tcp_url, the simulator's CDN log service, as the
// API with a CDN service does; NoCDN answers 404 id 38 as the API without
// one.
func TestConfigCDNAnswersTheLogAddress(t *testing.T) {
	t.Parallel()
	sim := cdssim.Start(t, cdssim.Options{})
	cdn, err := newClient(t, sim, "h", true, false).ConfigCDN(t.Context())
	require.NoError(t, err)
	assert.Equal(t, sdk.CDNConfig{TCPURL: sim.CDNLogAddr(), HTTPURL: sim.URL()}, cdn)
	cdn, err = newClient(t, sim, "h2", false, true).ConfigCDN(t.Context())
	require.NoError(t, err)
	assert.Equal(t, sim.CDNLogAddr(), cdn.TCPURL, "v2 route")

	set := cdssim.Start(t, cdssim.Options{CDN: &sdk.CDNConfig{HTTPURL: "http://cdn.test"}})
	cdn, err = newClient(t, set, "h", true, false).ConfigCDN(t.Context())
	require.NoError(t, err)
	assert.Equal(t, sdk.CDNConfig{TCPURL: set.CDNLogAddr(), HTTPURL: "http://cdn.test"}, cdn)

	none := cdssim.Start(t, cdssim.Options{NoCDN: true})
	_, err = newClient(t, none, "h", true, false).ConfigCDN(t.Context())
	assert.ErrorIs(t, err, cdsclient.ErrNotFound)
}

// A simulated worker behaves as the real one with and without the CDN's
// log address (gelf_service_addr): without it a V1 job never ends (the
// result is never sent, the job stays Building); with it the step log
// reaches the CDN and the job ends.
func TestWorkerWithoutLogAddressNeverEndsAV1Job(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	sim := cdssim.Start(t, cdssim.Options{})
	key := rsaKey(t)
	c := signinWithKey(t, sim, "h", pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&key.PublicKey)}))
	run := func(worker, logAddr string) (int64, error) {
		id := sim.AddJobV1(cdssim.JobV1{})
		_, err := c.QueueJobBook(ctx, id)
		require.NoError(t, err)
		w, err := cdssim.StartWorker(ctx, sim.URL(), cdssim.WorkerJob{Token: workerToken(t, key, "h", worker, id), V1JobID: id, LogAddr: logAddr})
		require.NoError(t, err)
		return id, w.End(ctx, "")
	}
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedAddr := closed.Addr().String()
	require.NoError(t, closed.Close())

	for _, tc := range []struct{ name, addr string }{{"no address", ""}, {"address refusing", closedAddr}} {
		id, err := run("w-"+strings.ReplaceAll(tc.name, " ", "-"), tc.addr)
		require.ErrorIs(t, err, cdssim.ErrNoLogAddress, tc.name)
		st, _ := sim.JobV1(id)
		assert.Equal(t, sdk.StatusBuilding, st.Status, tc.name)
		assert.Empty(t, st.Results, tc.name)
		assert.Empty(t, sim.JobLogs(strconv.FormatInt(id, 10)), tc.name)
	}

	id, err := run("w-logs", sim.CDNLogAddr())
	require.NoError(t, err)
	st, _ := sim.JobV1(id)
	assert.Equal(t, sdk.StatusSuccess, st.Status)
	assert.Eventually(t, func() bool { return len(sim.JobLogs(strconv.FormatInt(id, 10))) == 1 }, 5*time.Second, 5*time.Millisecond)
}

// A V2 worker without the CDN's log address ends its job, but its step
// log never reaches the CDN.
func TestV2WorkerWithoutLogAddressEndsWithoutLogs(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	sim := cdssim.Start(t, cdssim.Options{})
	key := rsaKey(t)
	c, err := cdsclient.New(cdsclient.Config{APIURL: sim.URL(), TokenV2: sim.TokenV2(), ServiceName: "h", RequestTimeout: 5 * time.Second,
		PublicKey: pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&key.PublicKey)})})
	require.NoError(t, err)
	require.NoError(t, c.SignIn(ctx))
	for _, withLogs := range []bool{false, true} {
		id := sim.AddJobV2(cdssim.JobV2{Model: sdk.V2WorkerModel{Name: "debian"}})
		require.NoError(t, c.V2QueueJobTake(ctx, sim.Region(), id))
		now := time.Now()
		tok, err := hatchery.SignWorkerJWT(key, hatchery.WorkerJWTClaims{
			Issuer: "h", Subject: "w-" + id, ID: "w-" + id, IssuedAt: now.Unix(), ExpiresAt: now.Add(time.Hour).Unix(),
			Worker: hatchery.WorkerJWTWorker{WorkerName: "w-" + id, RunJobID: id, HatcheryName: "h"},
		})
		require.NoError(t, err)
		job := cdssim.WorkerJob{Token: tok, RunJobID: id, Region: sim.Region()}
		if withLogs {
			job.LogAddr = sim.CDNLogAddr()
		}
		w, err := cdssim.StartWorker(ctx, sim.URL(), job)
		require.NoError(t, err)
		require.NoError(t, w.End(ctx, ""))
		st, _ := sim.JobV2(id)
		assert.Equal(t, sdk.StatusSuccess, st.Status, "logs %v", withLogs)
		if withLogs {
			assert.Eventually(t, func() bool { return len(sim.JobLogs(id)) == 1 }, 5*time.Second, 5*time.Millisecond)
		} else {
			assert.Empty(t, sim.JobLogs(id))
		}
	}
}
