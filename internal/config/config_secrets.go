package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Secrets may be given outside the configuration file, so that the file can
// be readable by the service account while the secrets stay root-only
// (docs/configuration.md, "Secrets"). For each secret the first of these
// that is set wins:
//  1. the variable itself (EnvPassword…), holding the value;
//  2. the variable with EnvFileSuffix (CDS_HATCHERY_VSPHERE_PASSWORD_FILE…),
//     holding the path of a file whose content is the value;
//  3. a systemd credential: the file of the secret's credential name
//     (CredentialPassword…) in $CREDENTIALS_DIRECTORY, which systemd sets
//     for a unit with LoadCredential=;
//  4. the configuration file.
//
// Trailing line breaks of a value read from a file are dropped (editors add
// one). A PEM key given in a variable with its line breaks written as the
// two characters \n (what an EnvironmentFile line holds) is read with real
// line breaks.
const (
	// EnvFileSuffix turns a secret variable into the variable naming a file.
	EnvFileSuffix = "_FILE"
	// EnvCredentialsDirectory is where systemd puts a unit's credentials.
	EnvCredentialsDirectory = "CREDENTIALS_DIRECTORY"

	CredentialPassword      = "vcenter-password" // hatchery.vsphere.password
	CredentialAPIToken      = "api-token"        // …commonConfiguration.api.token
	CredentialAPITokenV2    = "api-tokenv2"      // …commonConfiguration.api.tokenV2
	CredentialRSAPrivateKey = "rsa-private-key"  // …commonConfiguration.rsaPrivateKey
)

// maxSecretFileBytes bounds a secret file: a PEM RSA key is a few KB.
const maxSecretFileBytes = 64 << 10

// secretSource is one secret that can come from outside the file.
type secretSource struct {
	env, credential, key string
	field                func(c *Config) *string
}

var secretSources = []secretSource{
	{EnvPassword, CredentialPassword, "password", func(c *Config) *string { return &c.Password }},
	{EnvAPIToken, CredentialAPIToken, "commonConfiguration.api.token", func(c *Config) *string { return &c.CommonConfiguration.API.Token }},
	{EnvAPITokenV2, CredentialAPITokenV2, "commonConfiguration.api.tokenV2", func(c *Config) *string { return &c.CommonConfiguration.API.TokenV2 }},
	{EnvRSAPrivateKey, CredentialRSAPrivateKey, "commonConfiguration.rsaPrivateKey", func(c *Config) *string { return &c.CommonConfiguration.RSAPrivateKey }},
}

// externalSecrets are the secrets found outside the configuration file.
type externalSecrets struct {
	values   map[string]string // by secretSource.env
	problems Errors
}

// list returns the values, for scrubbing messages.
func (s externalSecrets) list() []string {
	out := make([]string, 0, len(s.values))
	for _, v := range s.values {
		out = append(out, v)
	}
	return out
}

// apply overrides cfg's secrets with the ones found.
func (s externalSecrets) apply(cfg *Config) {
	for _, src := range secretSources {
		if v, ok := s.values[src.env]; ok {
			*src.field(cfg) = v
		}
	}
}

// readExternalSecrets looks every secret up in the environment, the files
// it names and the systemd credentials directory. A file that is named but
// cannot be read, or is empty, is a problem of the secret's key (naming the
// file, never a content).
func readExternalSecrets(env func(string) (string, bool)) externalSecrets {
	s := externalSecrets{values: map[string]string{}}
	credDir, _ := env(EnvCredentialsDirectory)
	for _, src := range secretSources {
		if v, ok := env(src.env); ok && v != "" {
			if src.env == EnvRSAPrivateKey && !strings.Contains(v, "\n") && strings.Contains(v, `\n`) {
				v = strings.ReplaceAll(v, `\n`, "\n")
			}
			s.values[src.env] = v
			continue
		}
		if p, ok := env(src.env + EnvFileSuffix); ok && p != "" {
			v, err := readSecretFile(p)
			if err != nil {
				s.problems.add(src.key, "cannot read the secret from %s%s: %v", src.env, EnvFileSuffix, err)
				continue
			}
			s.values[src.env] = v
			continue
		}
		if credDir == "" {
			continue
		}
		p := filepath.Join(credDir, src.credential)
		v, err := readSecretFile(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			s.problems.add(src.key, "cannot read the systemd credential %q from %s: %v", src.credential, EnvCredentialsDirectory, err)
		default:
			s.values[src.env] = v
		}
	}
	return s
}

// readSecretFile reads a secret file, without its trailing line breaks.
// Errors name the path (not secret) and never quote the content.
func readSecretFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > maxSecretFileBytes {
		return "", fmt.Errorf("%s is larger than %d bytes (a secret is a few KB at most)", path, maxSecretFileBytes)
	}
	v := strings.TrimRight(string(b), "\r\n")
	if v == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return v, nil
}
