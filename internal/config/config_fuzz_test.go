package config

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzLoadConfig feeds arbitrary documents to the loader and the validator:
// neither may panic or allocate more than fuzzMemoryBound, and no error may
// show the planted secrets, which come from the environment (so a message
// quoting them is a leak, whatever the document says) or from a password
// line put in front of the document. Run with `go test -fuzz FuzzLoadConfig ./internal/vsphere`;
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
	f.Add([]byte(nestDoc("[", "]", 100000)))
	f.Add([]byte(nestDoc("{a=", "}", 100000)))
	f.Add([]byte(nestDoc("[", "]", maxConfigNesting)))
	f.Add([]byte("[hatchery.vsphere]\nmaxCpus = 1\nMaxCpus = 2\nworkerTTL = 9223372036854775807\n"))
	f.Add([]byte("[hatchery.vsphere]\nendpoint = \"https://root:" + testPassword + "@vc/sdk\"\n"))
	f.Add([]byte("[hatchery.vsphere]\nendpoint = \"http://vc:70000/ui\"\niprange = \"10.0.0.1/24\"\ngateway = \"10.0.0.9\"\n"))
	f.Add([]byte("x = \"\"\"\n[[[[[[[[[[[[[[[[[[[[\n\"\"\"\ny = '{{{{{{{{{{{{{{{{{{{{{{{'\n"))

	secrets := []string{testPassword, testToken, testTokenV2}
	opts := LoadOptions{LookupEnv: mapEnv(map[string]string{
		EnvPassword:   testPassword,
		EnvAPIToken:   testToken,
		EnvAPITokenV2: testTokenV2,
	})}
	const filePassword = "file-Pa55word-planted-in-doc"
	f.Fuzz(func(t *testing.T, doc []byte) {
		// A secret written in the file itself never shows either.
		withPassword := append([]byte("[hatchery.vsphere]\npassword = \""+filePassword+"\"\n"), doc...)
		alloc, err := loadMemory(withPassword, opts)
		if err != nil {
			assertNoSecretIn(t, err.Error(), []string{filePassword})
		}
		if alloc > fuzzMemoryBound {
			t.Fatalf("loading %d bytes allocated %d MB", len(withPassword), alloc>>20)
		}

		planted := false
		for _, s := range secrets {
			planted = planted || bytes.Contains(doc, []byte(s))
		}
		cfg, err := LoadFrom(bytes.NewReader(doc), opts)
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

// fuzzMemoryBound is what loading one document may allocate at most: the
// worst shapes the input bounds let through allocate a few tens of MB.
const fuzzMemoryBound = 256 << 20

func assertNoSecretIn(t *testing.T, msg string, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(msg, s) {
			t.Fatalf("error shows secret %q:\n%s", s, msg)
		}
	}
}
