package vsphere

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzLoadConfig feeds arbitrary documents to the loader and the validator:
// neither may panic, and no error may show the planted secrets, which come
// from the environment (so a message quoting them is a leak, whatever the
// document says). Run with `go test -fuzz FuzzLoadConfig ./internal/vsphere`;
// the seed corpus runs with every `go test`.
func FuzzLoadConfig(f *testing.F) {
	f.Add(ReferenceConfig())
	f.Add(MinimalConfig())
	f.Add(DemoConfig())
	f.Add([]byte("\x00\xff[[[ = = garbage"))
	f.Add([]byte(""))
	f.Add([]byte("[hatchery.vsphere]\nmaxCpu = 4\n[[hatchery.vsphere.flavors]]\nname = \"Small\"\ncpus = 2\nmemoryMB = 4096\n"))
	f.Add([]byte("[hatchery.vsphere.flavors.small]\ncpus = 2\nmemoryMB = 4096\n[hatchery.vsphere.flavors.LARGE]\ncpus = -8\nmemoryMB = 1\n"))
	f.Add([]byte("[hatchery.vsphere]\niprange = \"10.0.0.1/24,10.0.0.5/30\"\nsubnetMask = \"255.0.255.0\"\n[[hatchery.vsphere.networks]]\niprange = \"10.0.0.9/29\"\n"))
	f.Add([]byte("[hatchery.vsphere]\npassword = unquoted\n"))

	secrets := []string{testPassword, testToken, testTokenV2}
	opts := LoadOptions{LookupEnv: mapEnv(map[string]string{
		EnvPassword:   testPassword,
		EnvAPIToken:   testToken,
		EnvAPITokenV2: testTokenV2,
	})}
	f.Fuzz(func(t *testing.T, doc []byte) {
		planted := false
		for _, s := range secrets {
			planted = planted || bytes.Contains(doc, []byte(s))
		}
		cfg, err := LoadConfigFrom(bytes.NewReader(doc), opts)
		if err != nil {
			if !planted {
				assertNoSecretIn(t, err.Error(), secrets)
			}
			return
		}
		if cfg.Password != testPassword {
			t.Fatalf("environment password not applied")
		}
		if err := cfg.Validate(); err != nil && !planted {
			assertNoSecretIn(t, err.Error(), secrets)
		}
		_ = cfg.Redacted()
	})
}

func assertNoSecretIn(t *testing.T, msg string, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(msg, s) {
			t.Fatalf("error shows secret %q:\n%s", s, msg)
		}
	}
}
