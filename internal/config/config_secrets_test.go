package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writeSecret(t *testing.T, dir, name, v string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(v), 0o600))
	return p
}

// TestSecretsFromFiles: every secret can come from a file named by a
// *_FILE variable or from a systemd credential; a value in the variable
// itself wins, then the file, then the credential, then the TOML file.
func TestSecretsFromFiles(t *testing.T) {
	t.Parallel()
	dir, creds := t.TempDir(), t.TempDir()
	key := testRSAKey()
	env := map[string]string{
		EnvPassword + EnvFileSuffix:      writeSecret(t, dir, "pw", testPassword+"\n"),
		EnvRSAPrivateKey + EnvFileSuffix: writeSecret(t, dir, "key.pem", key),
		EnvCredentialsDirectory:          creds,
	}
	writeSecret(t, creds, CredentialAPITokenV2, testTokenV2+"\r\n")
	writeSecret(t, creds, CredentialPassword, "loses-to-the-file")
	doc := string(MinimalConfig()) + "\n" // password from the file form, key too
	cfg, err := loadString(t, doc, LoadOptions{LookupEnv: mapEnv(env)})
	require.NoError(t, err)
	assert.Equal(t, testPassword, cfg.Password, "the *_FILE variable wins over the credential; the line break is dropped")
	assert.Equal(t, testTokenV2, cfg.CommonConfiguration.API.TokenV2, "systemd credential")
	assert.Equal(t, strings.TrimRight(key, "\n"), cfg.CommonConfiguration.RSAPrivateKey)
	require.NoError(t, cfg.Validate())

	env[EnvPassword] = "direct-value-wins"
	cfg, err = loadString(t, doc, LoadOptions{LookupEnv: mapEnv(env)})
	require.NoError(t, err)
	assert.Equal(t, "direct-value-wins", cfg.Password)
}

// TestSecretFileProblems: a named file that is missing or empty is a
// problem of the secret's key; the message names the file, never a value.
func TestSecretFileProblems(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := map[string]string{
		EnvPassword + EnvFileSuffix:   filepath.Join(dir, "missing"),
		EnvAPIToken + EnvFileSuffix:   writeSecret(t, dir, "empty", "\n"),
		EnvAPITokenV2 + EnvFileSuffix: writeSecret(t, dir, "big", strings.Repeat(testTokenV2, 10000)),
	}
	_, err := loadString(t, string(MinimalConfig()), LoadOptions{LookupEnv: mapEnv(env)})
	require.Error(t, err)
	msg := err.Error()
	assert.Contains(t, msg, "hatchery.vsphere.password: cannot read the secret from CDS_HATCHERY_VSPHERE_PASSWORD_FILE: open "+filepath.Join(dir, "missing"))
	assert.Contains(t, msg, "hatchery.vsphere.commonConfiguration.api.token: cannot read the secret from CDS_HATCHERY_VSPHERE_API_TOKEN_FILE: "+filepath.Join(dir, "empty")+" is empty")
	assert.Contains(t, msg, "hatchery.vsphere.commonConfiguration.api.tokenV2: cannot read the secret from CDS_HATCHERY_VSPHERE_API_TOKENV2_FILE: ")
	assertNoSecret(t, msg)
}

// TestRSAKeyWithEscapedLineBreaks: an EnvironmentFile line keeps \n as two
// characters; such a one-line PEM key is read with real line breaks.
func TestRSAKeyWithEscapedLineBreaks(t *testing.T) {
	t.Parallel()
	oneLine := strings.ReplaceAll(strings.TrimRight(testRSAKey(), "\n"), "\n", `\n`)
	env := map[string]string{EnvPassword: testPassword, EnvAPITokenV2: testTokenV2, EnvRSAPrivateKey: oneLine}
	cfg, err := loadString(t, string(MinimalConfig()), LoadOptions{LookupEnv: mapEnv(env)})
	require.NoError(t, err)
	require.NoError(t, cfg.Validate())
}
