package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoadConfigAppliesDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := loadString(t, "[hatchery.vsphere]\nuser = \"u\"\n", noEnv())
	require.NoError(t, err)
	want := Default()
	want.User = "u"
	assert.Equal(t, want, *cfg)
}

func TestLoadConfigKeysOverrideDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := loadString(t, `
[hatchery.vsphere]
workerTTL = 30
cardName = "vmxnet3"
[hatchery.vsphere.commonConfiguration.provision]
maxWorker = 0
`, noEnv())
	require.NoError(t, err)
	assert.Equal(t, 30, cfg.WorkerTTL)
	assert.Equal(t, "vmxnet3", cfg.CardName)
	assert.Equal(t, 0, cfg.CommonConfiguration.Provision.MaxWorker)
	// Untouched keys of the same tables keep their defaults.
	assert.Equal(t, DefaultMaxConcurrentProvisioning, cfg.CommonConfiguration.Provision.MaxConcurrentProvisioning)
	assert.Equal(t, DefaultWorkerRegistrationTTL, cfg.WorkerRegistrationTTL)
}

func TestLoadConfigFlavorFormsAreEquivalent(t *testing.T) {
	t.Parallel()
	arrayForm := `
[hatchery.vsphere]
defaultFlavor = "Medium"
[[hatchery.vsphere.flavors]]
name = "Small"
cpus = 2
memoryMB = 4096
[[hatchery.vsphere.flavors]]
name = "medium"
cpus = 4
memoryMB = 8192
diskSizeGB = 40
[[hatchery.vsphere.workerProvisioning]]
modelVMWare = "debian12"
number = 1
flavor = "SMALL"
`
	mapForm := `
[hatchery.vsphere]
defaultFlavor = "Medium"
[hatchery.vsphere.flavors.Small]
cpus = 2
memoryMB = 4096
[hatchery.vsphere.flavors.medium]
name = "MEDIUM"
cpus = 4
memoryMB = 8192
diskSizeGB = 40
[[hatchery.vsphere.workerProvisioning]]
modelVMWare = "debian12"
number = 1
flavor = "SMALL"
`
	a, err := loadString(t, arrayForm, noEnv())
	require.NoError(t, err)
	m, err := loadString(t, mapForm, noEnv())
	require.NoError(t, err)
	assert.Equal(t, a, m)
	assert.Equal(t, []Flavor{
		{Name: "small", CPUs: 2, MemoryMB: 4096},
		{Name: "medium", CPUs: 4, MemoryMB: 8192, DiskSizeGB: 40},
	}, a.Flavors)
	assert.Equal(t, "medium", a.DefaultFlavor)
	assert.Equal(t, "small", a.WorkerProvisioning[0].Flavor)
}

// TestLoadConfigFlavorReferencesTrimmed: Validate accepts a flavor
// reference with surrounding spaces (it compares trimmed names), so the
// loaded configuration holds it trimmed: the pool of " Small " is the
// pool of flavor small at run time, not an unknown flavor.
func TestLoadConfigFlavorReferencesTrimmed(t *testing.T) {
	t.Parallel()
	cfg, err := loadString(t, `
[hatchery.vsphere]
defaultFlavor = " Medium"
[[hatchery.vsphere.flavors]]
name = "small "
cpus = 2
memoryMB = 4096
[[hatchery.vsphere.flavors]]
name = "medium"
cpus = 4
memoryMB = 8192
[[hatchery.vsphere.workerProvisioning]]
modelVMWare = "debian12"
number = 1
flavor = " Small "
`, noEnv())
	require.NoError(t, err)
	assert.Equal(t, "small", cfg.Flavors[0].Name)
	assert.Equal(t, "medium", cfg.DefaultFlavor)
	assert.Equal(t, "small", cfg.WorkerProvisioning[0].Flavor)
}

func TestLoadConfigFlavorMapNameMismatch(t *testing.T) {
	t.Parallel()
	_, err := loadString(t, "[hatchery.vsphere.flavors.small]\nname = \"big\"\ncpus = 1\nmemoryMB = 1\n", noEnv())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "hatchery.vsphere.flavors.small.name")
}

func TestLoadConfigEnvOverrides(t *testing.T) {
	t.Parallel()
	doc := `
[hatchery.vsphere]
password = "from-file"
[hatchery.vsphere.commonConfiguration]
rsaPrivateKey = "file-key"
[hatchery.vsphere.commonConfiguration.api]
token = "file-token"
tokenV2 = "file-token-v2"
`
	tests := []struct {
		name string
		env  map[string]string
		want [4]string // password, token, tokenV2, rsaPrivateKey
	}{
		{"no env keeps the file", nil, [4]string{"from-file", "file-token", "file-token-v2", "file-key"}},
		{"empty variables keep the file", map[string]string{EnvPassword: "", EnvAPIToken: ""},
			[4]string{"from-file", "file-token", "file-token-v2", "file-key"}},
		{"every variable wins", map[string]string{EnvPassword: "p", EnvAPIToken: "t", EnvAPITokenV2: "t2", EnvRSAPrivateKey: "k"},
			[4]string{"p", "t", "t2", "k"}},
		{"one variable", map[string]string{EnvAPITokenV2: "t2"},
			[4]string{"from-file", "file-token", "t2", "file-key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := loadString(t, doc, LoadOptions{LookupEnv: mapEnv(tt.env)})
			require.NoError(t, err)
			cc := cfg.CommonConfiguration
			assert.Equal(t, tt.want, [4]string{cfg.Password, cc.API.Token, cc.API.TokenV2, cc.RSAPrivateKey})
		})
	}
}

func TestLoadConfigUnknownKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{"typo at top level", "[hatchery.vsphere]\nmaxCpu = 4\n",
			[]string{"hatchery.vsphere.maxCpu: unknown key (did you mean maxCpus?)"}},
		{"typo in a nested table", "[hatchery.vsphere.commonConfiguration.provision]\nmaxWorkers = 4\n",
			[]string{"hatchery.vsphere.commonConfiguration.provision.maxWorkers: unknown key (did you mean maxWorker?)"}},
		{"typo in an array of tables", "[[hatchery.vsphere.networks]]\niprnage = \"10.0.0.1/24\"\n",
			[]string{"hatchery.vsphere.networks.iprnage: unknown key (did you mean iprange?)"}},
		{"typo in a map-form flavor", "[hatchery.vsphere.flavors.small]\ncpu = 2\nmemoryMB = 1\n",
			[]string{"hatchery.vsphere.flavors.small.cpu: unknown key (did you mean cpus?)"}},
		{"typo in an array-form flavor", "[[hatchery.vsphere.flavors]]\nname = \"a\"\nmemory = 1\n",
			[]string{"hatchery.vsphere.flavors.memory: unknown key (did you mean memoryMB?)"}},
		{"unknown table reported once", "[hatchery.vsphere]\n[hatchery.vsphere.extra]\na = 1\nb = 2\n",
			[]string{"hatchery.vsphere.extra: unknown key"}},
		// A table of another CDS service ([hatchery.openstack], [api]) is
		// ignored (config_upstream_test.go); a plain key outside any table
		// is no service's.
		{"key outside the table", "x = 1\n[hatchery.vsphere]\n",
			[]string{"x: unknown key (this file holds only [hatchery.vsphere])"}},
		{"every unknown key at once", "[hatchery.vsphere]\nusr = \"a\"\nendpont = \"b\"\n",
			[]string{"hatchery.vsphere.usr: unknown key (did you mean user?)", "hatchery.vsphere.endpont: unknown key (did you mean endpoint?)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := loadString(t, tt.doc, noEnv())
			require.Error(t, err)
			var ce Errors
			require.True(t, errors.As(err, &ce), "want Errors, got %T: %v", err, err)
			require.Len(t, ce, len(tt.want), err.Error())
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestLoadConfigFatalErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		doc  string
		want string
	}{
		{"no vsphere table", "[hatchery.openstack]\nuser = \"u\"\n", "no [hatchery.vsphere] table"},
		{"empty file", "", "no [hatchery.vsphere] table"},
		{"wrong type names the key", "[hatchery.vsphere]\nmaxCpus = \"12\"\n", "hatchery.vsphere.maxCpus: line 2: incompatible types"},
		{"wrong nested type", "[hatchery.vsphere.commonConfiguration.http]\nport = \"x\"\n", "hatchery.vsphere.commonConfiguration.http.port"},
		{"not TOML", "[hatchery.vsphere\n", "line 2: expected '.' or ']'"},
		{"array of flavors of wrong shape", "[hatchery.vsphere]\nflavors = 3\n", "hatchery.vsphere.flavors"},
		{"flavor field of wrong type", "[hatchery.vsphere.flavors.small]\ncpus = \"two\"\n", "hatchery.vsphere.flavors"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := loadString(t, tt.doc, noEnv())
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestLoadConfigSyntaxErrorHidesSecret(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{
		"[hatchery.vsphere]\npassword = " + testPassword + "\n",
		"[hatchery.vsphere.commonConfiguration.api]\ntokenV2 = " + testTokenV2 + "\n",
		"[hatchery.vsphere]\npassword = \"" + testPassword + "\n",
	} {
		_, err := loadString(t, doc, noEnv())
		require.Error(t, err)
		assertNoSecret(t, err.Error())
		assert.Contains(t, err.Error(), "not shown")
	}
}

func TestLoadConfigGuestCredentialsAlias(t *testing.T) {
	t.Parallel()
	cfg, err := loadString(t, `
[[hatchery.vsphere.guestCredentials]]
modelVMWare = "debian12"
username = "a"
[[hatchery.vsphere.models]]
modelPath = "grp/model"
username = "b"
preStartScript = "echo hi"
`, noEnv())
	require.NoError(t, err)
	all := cfg.AllGuestCredentials()
	require.Len(t, all, 2)
	assert.Equal(t, "a", all[0].Username)
	assert.Equal(t, "b", all[1].Username)
	assert.Equal(t, "echo hi", all[1].PreStartScript)
}

func TestLoadConfigFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "h.toml")
	require.NoError(t, os.WriteFile(path, []byte("[hatchery.vsphere]\nuser = \"u\"\n"), 0o600))
	cfg, err := LoadFile(path, noEnv())
	require.NoError(t, err)
	assert.Equal(t, "u", cfg.User)

	_, err = LoadFile(filepath.Join(dir, "missing.toml"), noEnv())
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestShippedConfigs(t *testing.T) {
	t.Parallel()
	demoEnv := LoadOptions{LookupEnv: mapEnv(map[string]string{EnvRSAPrivateKey: testRSAKey()})}
	tests := []struct {
		name string
		doc  []byte
		file string
		opts LoadOptions
	}{
		{"reference", ReferenceConfig(), "hatchery.toml", secretEnv()},
		{"minimal", MinimalConfig(), "minimal.toml", secretEnv()},
		{"demo", DemoConfig(), "demo.toml", demoEnv},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			onDisk, err := os.ReadFile(filepath.Join("..", "..", "configs", tt.file))
			require.NoError(t, err)
			require.Equal(t, string(onDisk), string(tt.doc), "embedded and on-disk %s differ", tt.file)
			cfg, err := LoadFrom(strings.NewReader(string(tt.doc)), tt.opts)
			require.NoError(t, err)
			require.NoError(t, cfg.Validate())
		})
	}
}

func TestShippedConfigsNeedSecrets(t *testing.T) {
	t.Parallel()
	cfg, err := LoadFrom(strings.NewReader(string(ReferenceConfig())), noEnv())
	require.NoError(t, err)
	err = cfg.Validate()
	require.Error(t, err)
	for _, k := range []string{"hatchery.vsphere.password", "hatchery.vsphere.commonConfiguration.api.token", "hatchery.vsphere.commonConfiguration.rsaPrivateKey"} {
		assert.Contains(t, err.Error(), k+": required")
	}
}

func TestDemoConfigShape(t *testing.T) {
	t.Parallel()
	cfg, err := LoadFrom(strings.NewReader(string(DemoConfig())), noEnv())
	require.NoError(t, err)
	assert.Equal(t, []Flavor{
		{Name: "small", CPUs: 2, MemoryMB: 4096},
		{Name: "medium", CPUs: 4, MemoryMB: 8192},
		{Name: "large", CPUs: 8, MemoryMB: 16384},
	}, cfg.Flavors)
	assert.Equal(t, 32, cfg.MaxCPUs)
	assert.Equal(t, InventoryWatch, cfg.InventoryMode)
	require.Len(t, cfg.WorkerProvisioning, 1)
	assert.Equal(t, WorkerProvisioning{ModelVMWare: "debian12", Number: 2}, cfg.WorkerProvisioning[0])
	assert.NotEmpty(t, cfg.IPRange)
	assert.NotEmpty(t, cfg.DefaultFlavor)
	assert.True(t, strings.HasPrefix(cfg.CommonConfiguration.API.HTTP.URL, "http://"))
}
