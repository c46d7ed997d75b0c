package config

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"sync"
	"testing"
)

// Planted secrets: tests assert none of them ever appears in an error.
const (
	testPassword = "vc-Pa55word-planted"
	testToken    = "tok-v1-planted-0123456789"
	testTokenV2  = "tok-v2-planted-9876543210"
)

// testRSAKey is a PEM RSA key generated once for the package's tests.
var testRSAKey = sync.OnceValue(func() string {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))
})

// mapEnv is an injectable environment.
func mapEnv(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// secretEnv supplies every secret through the environment.
func secretEnv() LoadOptions {
	return LoadOptions{LookupEnv: mapEnv(map[string]string{
		EnvPassword:      testPassword,
		EnvAPIToken:      testToken,
		EnvAPITokenV2:    testTokenV2,
		EnvRSAPrivateKey: testRSAKey(),
	})}
}

// noEnv is an empty environment.
func noEnv() LoadOptions { return LoadOptions{LookupEnv: mapEnv(nil)} }

// loadString loads a TOML document.
func loadString(t *testing.T, doc string, o LoadOptions) (*Config, error) {
	t.Helper()
	return LoadFrom(strings.NewReader(doc), o)
}

// validConfig is a configuration that passes Validate, built in code.
func validConfig() Config {
	c := Default()
	c.CommonConfiguration.Name = "hatchery-test"
	c.CommonConfiguration.API.HTTP.URL = "https://cds.example.com"
	c.CommonConfiguration.API.TokenV2 = testTokenV2
	c.CommonConfiguration.RSAPrivateKey = testRSAKey()
	c.Endpoint = "vcenter.example.com"
	c.User = "user"
	c.Password = testPassword
	c.DatacenterString = "DC0"
	c.Flavors = []Flavor{{Name: "small", CPUs: 2, MemoryMB: 4096}, {Name: "large", CPUs: 8, MemoryMB: 16384}}
	c.DefaultFlavor = "small"
	return c
}

// assertNoSecret fails when s holds a planted secret.
func assertNoSecret(t *testing.T, s string) {
	t.Helper()
	for _, sec := range []string{testPassword, testToken, testTokenV2, "PRIVATE KEY-----\nMI"} {
		if strings.Contains(s, sec) {
			t.Fatalf("message leaks secret %q:\n%s", sec, s)
		}
	}
}
