package config

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// docKeyRE finds the key column of docs/configuration.md's tables.
var docKeyRE = regexp.MustCompile("(?m)^\\| `(hatchery\\.vsphere\\.[^`]+)` \\|")

// aliasKeys are struct keys the reference shows in comments only (an active
// alias next to guestCredentials would read as a second source of truth).
func isAliasKey(k string) bool { return strings.HasPrefix(k, KeyPrefix+".models[].") }

func TestConfigKeysDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	require.NoError(t, err)
	documented := map[string]bool{}
	for _, m := range docKeyRE.FindAllStringSubmatch(string(doc), -1) {
		assert.False(t, documented[m[1]], "%s documented twice", m[1])
		documented[m[1]] = true
	}
	keys := KeyPaths()
	require.Greater(t, len(keys), 60, "the struct walk found too few keys: %v", keys)
	inStruct := map[string]bool{}
	for _, k := range keys {
		inStruct[k] = true
		assert.True(t, documented[k], "%s is not documented in docs/configuration.md", k)
	}
	for k := range documented {
		assert.True(t, inStruct[k], "docs/configuration.md documents %s, which Config does not have", k)
	}
}

// exampleLineRE is an example line of the reference: "#" directly followed
// by a key or a table header (prose comments have a space after "#").
var exampleLineRE = regexp.MustCompile(`(?m)^(\s*)#([^\s#])`)

// enableExamples returns the reference with every example line uncommented,
// as an operator enables them (delete the "#").
func enableExamples(ref []byte) []byte { return exampleLineRE.ReplaceAll(ref, []byte("$1$2")) }

// TestConfigKeysInReference: every key appears in the reference, active or
// as an example line (an operator enables it by deleting the "#").
func TestConfigKeysInReference(t *testing.T) {
	t.Parallel()
	ref := enableExamples(ReferenceConfig())
	var v any
	md, err := toml.Decode(string(ref), &v)
	require.NoError(t, err)
	active := map[string]bool{}
	for _, k := range md.Keys() {
		// Leaf keys only, array elements written [].
		if t := md.Type(k...); t == "Hash" || t == "ArrayHash" {
			continue
		}
		active[arrayPath(md, k)] = true
	}
	var missing []string
	for _, k := range KeyPaths() {
		if isAliasKey(k) {
			leaf := k[strings.LastIndexByte(k, '.')+1:]
			assert.Regexp(t, `(?m)^\s*#\s+`+regexp.QuoteMeta(leaf)+` = `, string(ref), "alias key %s not shown in a comment", k)
			continue
		}
		if !active[k] {
			missing = append(missing, k)
		}
		delete(active, k)
	}
	sort.Strings(missing)
	assert.Empty(t, missing, "keys missing from configs/hatchery.toml")
	assert.Empty(t, active, "configs/hatchery.toml has keys Config does not")
}

// arrayPath writes a key of a decoded document with "[]" after every array
// of tables ("hatchery.vsphere.networks[].iprange").
func arrayPath(md toml.MetaData, k toml.Key) string {
	var b strings.Builder
	for i, part := range k {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(part)
		if i < len(k)-1 && md.Type(k[:i+1]...) == "ArrayHash" {
			b.WriteString("[]")
		}
	}
	return b.String()
}

func TestConfigKeyPathsWalksNestedTables(t *testing.T) {
	t.Parallel()
	keys := KeyPaths()
	for _, k := range []string{
		"hatchery.vsphere.commonConfiguration.provision.workerApiHttp.insecure",
		"hatchery.vsphere.commonConfiguration.api.http.url",
		"hatchery.vsphere.networks[].subnetMask",
		"hatchery.vsphere.flavors[].diskSizeGB",
		"hatchery.vsphere.defaultWorkerModelsV2[].binaries",
		"hatchery.vsphere.models[].preStartScript",
	} {
		assert.Contains(t, keys, k)
	}
	assert.NotContains(t, keys, "hatchery.vsphere.commonConfiguration", "tables are not leaves")
}

// TestReferenceHoldsDefaults: `config new | tee /etc/…` once turned example
// features on (a proxy injected into workers, a static IP plan, warm pools,
// CPU limits, flavors). Loaded as printed, the reference is the defaults
// plus the required keys' placeholders; with its examples enabled it is a
// valid configuration that turns those features on.
func TestReferenceHoldsDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := LoadFrom(strings.NewReader(string(ReferenceConfig())), secretEnv())
	require.NoError(t, err)
	require.NoError(t, cfg.Validate())
	assert.Empty(t, cfg.CommonConfiguration.Provision.InjectEnvVars, "no proxy or other variable injected into workers")
	assert.Empty(t, cfg.StaticNetworks(), "no static IP plan: DHCP")
	assert.Empty(t, cfg.WorkerProvisioning, "no warm pool")
	assert.Zero(t, cfg.MaxCPUs, "no static vCPU limit")
	assert.Zero(t, cfg.MaxMemoryMB, "no static memory limit")
	assert.Empty(t, cfg.Flavors, "no flavors")

	want := Default()
	want.Endpoint, want.User, want.DatacenterString = cfg.Endpoint, cfg.User, cfg.DatacenterString
	want.CommonConfiguration.Name, want.CommonConfiguration.API.HTTP.URL = cfg.CommonConfiguration.Name, cfg.CommonConfiguration.API.HTTP.URL
	want.Password, want.CommonConfiguration.API.Token, want.CommonConfiguration.API.TokenV2 = testPassword, testToken, testTokenV2
	want.CommonConfiguration.RSAPrivateKey = testRSAKey()
	assert.Equal(t, want, *cfg, "every other key holds its default")

	examples, err := LoadFrom(strings.NewReader(string(enableExamples(ReferenceConfig()))), secretEnv())
	require.NoError(t, err)
	require.NoError(t, examples.Validate(), "the examples, enabled, are valid")
	assert.NotEmpty(t, examples.CommonConfiguration.Provision.InjectEnvVars)
	assert.NotEmpty(t, examples.StaticNetworks())
	assert.NotEmpty(t, examples.WorkerProvisioning)
	assert.NotZero(t, examples.MaxCPUs)
}
