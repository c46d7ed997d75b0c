package demo

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
)

// GenerateRSAKeyPEM returns a fresh 2048-bit RSA private key in PEM, the
// demo's commonConfiguration.rsaPrivateKey (worker tokens are signed with
// it; it lives as long as the demo).
func GenerateRSAKeyPEM() (string, error) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", fmt.Errorf("generate rsa key: %w", err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})), nil
}
