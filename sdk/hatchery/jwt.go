package hatchery

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"time"
)

// WorkerTokenTTL is how long a worker JWT is valid (docs/design.md#cds-api).
const WorkerTokenTTL = time.Hour

// ParseRSAPrivateKey reads an RSA private key from PEM, PKCS#1
// ("RSA PRIVATE KEY") or PKCS#8 ("PRIVATE KEY").
func ParseRSAPrivateKey(pemText string) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode([]byte(pemText))
	if block == nil {
		return nil, errors.New("parse rsa private key: no pem block")
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse rsa private key: neither pkcs#1 nor pkcs#8: %w", err)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("parse rsa private key: pkcs#8 key is %T, not rsa", k)
	}
	return rk, nil
}

// PublicKeyPEM returns the PKCS#1 "RSA PUBLIC KEY" PEM of key's public
// half, the public key a hatchery sends at sign-in so the API can verify
// worker JWTs. The API takes only this form: a PKIX "PUBLIC KEY" PEM is
// accepted at sign-in, but every worker sign-in is then refused (401).
func PublicKeyPEM(key *rsa.PrivateKey) ([]byte, error) {
	if key == nil {
		return nil, errors.New("marshal public key: no private key")
	}
	der := x509.MarshalPKCS1PublicKey(&key.PublicKey)
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: der}), nil
}

// WorkerJWTModel names the worker model in a worker JWT.
type WorkerJWTModel struct {
	ID   int64  `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
}

// WorkerJWTWorker is the "Worker" claim of a worker JWT, shaped like the
// CDS API's SpawnArgumentsJWT (the worker name goes under "worker_model").
type WorkerJWTWorker struct {
	WorkerName   string         `json:"worker_model,omitempty"`
	Model        WorkerJWTModel `json:"model,omitempty"`
	JobID        int64          `json:"job_id,omitempty"`
	RunJobID     string         `json:"run_job_id,omitempty"`
	RegisterOnly bool           `json:"register_only"`
	HatcheryName string         `json:"hatchery_name,omitempty"`
}

// WorkerJWTClaims are the claims of a worker JWT: issuer the hatchery,
// subject the worker, valid WorkerTokenTTL.
type WorkerJWTClaims struct {
	Issuer    string          `json:"iss"`
	Subject   string          `json:"sub"`
	ID        string          `json:"jti"`
	IssuedAt  int64           `json:"iat"`
	ExpiresAt int64           `json:"exp"`
	Worker    WorkerJWTWorker `json:"Worker"`
}

var jwtHeaderRS512 = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS512","typ":"JWT"}`))

// SignWorkerJWT encodes claims as an RS512 JWT signed with key.
func SignWorkerJWT(key *rsa.PrivateKey, claims WorkerJWTClaims) (string, error) {
	if key == nil {
		return "", errors.New("sign worker jwt: no private key")
	}
	body, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("sign worker jwt: encode claims: %w", err)
	}
	signingInput := jwtHeaderRS512 + "." + base64.RawURLEncoding.EncodeToString(body)
	sum := sha512.Sum512([]byte(signingInput))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA512, sum[:])
	if err != nil {
		return "", fmt.Errorf("sign worker jwt: %w", err)
	}
	return signingInput + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// newWorkerJWTClaims fills the standard claims for a worker.
func newWorkerJWTClaims(hatcheryName string, now time.Time, w WorkerJWTWorker) WorkerJWTClaims {
	var jti [16]byte
	_, _ = rand.Read(jti[:]) // crypto/rand.Read never fails on supported platforms
	w.HatcheryName = hatcheryName
	return WorkerJWTClaims{
		Issuer:    hatcheryName,
		Subject:   w.WorkerName,
		ID:        hex.EncodeToString(jti[:]),
		IssuedAt:  now.Unix(),
		ExpiresAt: now.Add(WorkerTokenTTL).Unix(),
		Worker:    w,
	}
}
