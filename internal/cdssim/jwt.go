package cdssim

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"sync"
	"time"
)

var (
	keyOnce sync.Once
	keyVal  *rsa.PrivateKey
	keyErr  error
)

// signingKey is the simulator's session signing key, generated once per
// process (every simulator of a test binary shares it).
func signingKey() (*rsa.PrivateKey, error) {
	keyOnce.Do(func() { keyVal, keyErr = rsa.GenerateKey(rand.Reader, 2048) })
	return keyVal, keyErr
}

// PublicSigningKeyPEM is the PKCS#1 "RSA PUBLIC KEY" PEM of the key that
// signs session JWTs; the X-Api-Pub-Signing-Key header carries its base64.
func PublicSigningKeyPEM() []byte {
	k, err := signingKey()
	if err != nil {
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&k.PublicKey)})
}

// sessionClaims are the claims of a CDS session JWT.
type sessionClaims struct {
	ID      string `json:"ID"`
	TokenID string `json:"TokenID"`
	Exp     int64  `json:"exp"`
	JTI     string `json:"jti"`
	IAT     int64  `json:"iat"`
	ISS     string `json:"iss"`
	Sub     string `json:"sub"`
}

// signSession returns an RS512 JWT for a session of consumer sub.
func signSession(id, sub string, now time.Time, ttl time.Duration) (string, error) {
	k, err := signingKey()
	if err != nil {
		return "", err
	}
	hdr, _ := json.Marshal(map[string]string{"alg": "RS512", "typ": "JWT"})
	cl, _ := json.Marshal(sessionClaims{ID: id, Exp: now.Add(ttl).Unix(), JTI: id, IAT: now.Unix(), ISS: "cds-api-cdssim", Sub: sub})
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString(hdr) + "." + enc.EncodeToString(cl)
	sum := sha512.Sum512([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA512, sum[:])
	if err != nil {
		return "", err
	}
	return signing + "." + enc.EncodeToString(sig), nil
}
