package cdssim_test

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"strconv"
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

	w, err := cdssim.StartWorker(ctx, sim.URL(), cdssim.WorkerJob{Token: workerToken(t, key, "h-pkcs1", "w-good", id), V1JobID: id})
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
