package hatchery

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
	"github.com/cds-contrib/hatchery-vsphere/sdk/workerpool"
)

func TestWorkerJWTVerifies(t *testing.T) {
	t.Parallel()
	key, keyPEM := testPrivateKey(t)
	parsed, err := ParseRSAPrivateKey(keyPEM)
	require.NoError(t, err)
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	parsed8, err := ParseRSAPrivateKey(string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})))
	require.NoError(t, err)
	assert.True(t, parsed.Equal(parsed8))
	_, err = ParseRSAPrivateKey("not a key")
	assert.Error(t, err)

	now := time.Unix(1_800_000_000, 0)
	claims := newWorkerJWTClaims(testHatchery, now, WorkerJWTWorker{WorkerName: "debian12-abc", JobID: 42, Model: WorkerJWTModel{ID: 3, Name: "shared.infra/debian12"}})
	tok, err := SignWorkerJWT(parsed, claims)
	require.NoError(t, err)

	// Verify with the public key as the API would, from its PEM.
	pubPEM, err := PublicKeyPEM(parsed)
	require.NoError(t, err)
	block, _ := pem.Decode(pubPEM)
	require.NotNil(t, block)
	// The API reads a PKCS#1 "RSA PUBLIC KEY" PEM only.
	assert.Equal(t, "RSA PUBLIC KEY", block.Type)
	pub, err := x509.ParsePKCS1PublicKey(block.Bytes)
	require.NoError(t, err)

	parts := strings.Split(tok, ".")
	require.Len(t, parts, 3)
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	require.NoError(t, err)
	sum := sha512.Sum512([]byte(parts[0] + "." + parts[1]))
	require.NoError(t, rsa.VerifyPKCS1v15(pub, crypto.SHA512, sum[:], sig))
	tampered := sha512.Sum512([]byte(parts[0] + "." + parts[1] + "x"))
	assert.Error(t, rsa.VerifyPKCS1v15(pub, crypto.SHA512, tampered[:], sig))

	var header map[string]string
	hb, _ := base64.RawURLEncoding.DecodeString(parts[0])
	require.NoError(t, json.Unmarshal(hb, &header))
	assert.Equal(t, "RS512", header["alg"])
	var got map[string]any
	cb, _ := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, json.Unmarshal(cb, &got))
	assert.Equal(t, testHatchery, got["iss"])
	assert.Equal(t, "debian12-abc", got["sub"])
	assert.EqualValues(t, now.Unix(), got["iat"])
	assert.EqualValues(t, now.Add(time.Hour).Unix(), got["exp"])
	w := got["Worker"].(map[string]any)
	assert.Equal(t, "debian12-abc", w["worker_model"])
	assert.EqualValues(t, 42, w["job_id"])
	assert.Equal(t, testHatchery, w["hatchery_name"])
}

func TestWorkerConfigRoundTripsThroughCDSConfig(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.API.HTTP.Insecure = true
	cfg.Provision.WorkerBasedir = "/var/lib/cds"
	cfg.Provision.InjectEnvVars = []string{"HTTP_PROXY=http://proxy:3128", "EMPTY=", "bad"}
	wc := buildWorkerConfig(cfg, workerCDN{HTTP: "http://cdn.test", TCP: "cdn.test:8090", TCPWithTLS: true}, spawn.WorkerLogConfig{Level: "info"}, workerConfigInput{
		Name: "debian12-abc", Model: "shared.infra/debian12", JobID: 42, Token: "jwt",
	})
	assert.Equal(t, "http://api.test", wc.APIEndpoint)
	assert.True(t, wc.APIEndpointInsecure)
	assert.Equal(t, map[string]string{"HTTP_PROXY": "http://proxy:3128", "EMPTY": ""}, wc.InjectEnvVars)
	assert.Equal(t, "eu", wc.Region)
	assert.Equal(t, testHatchery, wc.HatcheryName)
	// The worker reads its CDN log address under these names.
	raw, err := base64.StdEncoding.DecodeString(wc.EncodeBase64())
	require.NoError(t, err)
	assert.Contains(t, string(raw), `"cdn_endpoint":"http://cdn.test"`)
	assert.Contains(t, string(raw), `"gelf_service_addr":"cdn.test:8090"`)
	assert.Contains(t, string(raw), `"gelf_service_addr_enable_tls":true`)

	back, err := spawn.DecodeWorkerConfig(wc.EncodeBase64())
	require.NoError(t, err)
	assert.Equal(t, wc, back)

	cfg.Provision.WorkerAPIHTTP = HTTPClientConfig{URL: "https://api.internal"}
	wc2 := buildWorkerConfig(cfg, workerCDN{}, spawn.WorkerLogConfig{}, workerConfigInput{Name: "n", RunJobID: "run-1"})
	assert.Equal(t, "https://api.internal", wc2.APIEndpoint)
	assert.False(t, wc2.APIEndpointInsecure)
	raw, err = base64.StdEncoding.DecodeString(wc2.EncodeBase64())
	require.NoError(t, err)
	assert.Contains(t, string(raw), `"run_job_id":"run-1"`)
	assert.NotContains(t, string(raw), "booked_job_id")
}

func TestWorkerName(t *testing.T) {
	t.Parallel()
	dns := regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)
	cases := []struct{ name, prefix, model, wantPrefix string }{
		{"v1 path", "", "shared.infra/Debian_12", "debian-12-"},
		{"register", workerpool.RegisterPrefix, "debian12", "register-debian12-"},
		{"long", "", strings.Repeat("x", 100), strings.Repeat("x", 52) + "-"},
		{"empty", "", "", "worker-"},
		{"symbols", "", "--A..b--", "a-b-"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := WorkerName(tc.prefix, tc.model)
			assert.LessOrEqual(t, len(n), 63)
			assert.Regexp(t, dns, n)
			assert.True(t, strings.HasPrefix(n, tc.wantPrefix), n)
		})
	}
	assert.NotEqual(t, WorkerName("", "m"), WorkerName("", "m"))
}

func TestValidate(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	assert.Empty(t, cfg.Validate())
	cfg.Provision.MaxWorker = 2
	cfg.Provision.MaxConcurrentProvisioning = 5
	cfg.Provision.InjectEnvVars = []string{"nokey"}
	cfg.API.Token = ""
	errs := cfg.Validate()
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	all := strings.Join(msgs, "\n")
	assert.Contains(t, all, "maxConcurrentProvisioning: 5 exceeds maxWorker 2")
	assert.Contains(t, all, "injectEnvVars[0]")
	assert.Contains(t, all, "token or tokenV2")

	cfg = testConfig(t)
	cfg.Provision.MaxWorker = 0
	cfg.Provision.MaxConcurrentProvisioning = 50
	assert.Empty(t, cfg.Validate(), "no cross checks when maxWorker is unlimited")
}

func TestResolveModelV1(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, testConfig(t), nil)
	docker := testModel("shared.infra", "alpine")
	docker.Type = sdk.Docker
	hs.c.models = []sdk.Model{testModel("shared.infra", "debian12"), docker}
	job := func(reqs ...sdk.Requirement) *sdk.WorkflowNodeJobRun {
		return &sdk.WorkflowNodeJobRun{Job: sdk.ExecutedJob{Action: sdk.Action{Requirements: reqs}}}
	}
	ctx := t.Context()
	m, reason := hs.f.resolveModelV1(ctx, job(modelReq("shared.infra/debian12")))
	assert.Empty(t, reason)
	assert.Equal(t, "shared.infra/debian12", m.GetName())
	_, reason = hs.f.resolveModelV1(ctx, job(modelReq("shared.infra/alpine")))
	assert.Contains(t, reason, `type "docker"`)
	_, reason = hs.f.resolveModelV1(ctx, job(modelReq("nope/x")))
	assert.Contains(t, reason, "not found")
	_, reason = hs.f.resolveModelV1(ctx, job())
	assert.Contains(t, reason, "no model requirement")
}
