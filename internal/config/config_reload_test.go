package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestChangedKeys: each kind of change is named by its key as the file
// names it, and nothing else is; secrets are named, never their values.
func TestChangedKeys(t *testing.T) {
	old := validConfig()
	same := validConfig()
	assert.Empty(t, ChangedKeys(&old, &same), "identical configurations")

	n := validConfig()
	n.CommonConfiguration.Provision.MaxWorker = 42
	n.MaxCPUs = 64
	n.Flavors = append(n.Flavors, Flavor{Name: "xlarge", CPUs: 16, MemoryMB: 32768})
	n.Endpoint = "other.example.com"
	n.Password = "another-" + testPassword
	n.CommonConfiguration.API.TokenV2 = "another-" + testTokenV2
	got := ChangedKeys(&old, &n)
	assert.Equal(t, []string{
		KeyPrefix + ".commonConfiguration.api.tokenV2",
		KeyPrefix + ".commonConfiguration.provision.maxWorker",
		KeyPrefix + ".endpoint",
		KeyPrefix + ".flavors",
		KeyPrefix + ".maxCpus",
		KeyPrefix + ".password",
	}, got)
	assertNoSecret(t, strings.Join(got, " "))

	e := validConfig()
	e.Flavors[1].CPUs = 12
	assert.Equal(t, []string{KeyPrefix + ".flavors[1].cpus"}, ChangedKeys(&old, &e), "an element's field")
}

// TestLiveKey: limits, flavors, pools, models and quarantine settings
// are live (with their sub-keys); endpoints, names, secrets, inventory
// mode and maxConcurrentProvisioning are not.
func TestLiveKey(t *testing.T) {
	for _, k := range []string{"commonConfiguration.provision.maxWorker", "maxCpus", "maxMemoryMB", "flavors", "flavors[1].cpus",
		"workerProvisioning", "workerProvisioning[0].number", "models[2].password", "quarantineThreshold", "keepFailedWorkers"} {
		assert.True(t, LiveKey(KeyPrefix+"."+k), k)
	}
	for _, k := range []string{"endpoint", "user", "password", "commonConfiguration.name", "commonConfiguration.api.http.url",
		"commonConfiguration.api.tokenV2", "commonConfiguration.rsaPrivateKey", "inventoryMode", "iprange",
		"commonConfiguration.provision.maxConcurrentProvisioning", "maxCpusX", "flavorsX", "datacenterString"} {
		assert.False(t, LiveKey(KeyPrefix+"."+k), k)
	}
	assert.False(t, LiveKey("maxCpus"), "a key without the prefix")
	for _, k := range LiveKeys() {
		assert.True(t, LiveKey(k), k)
	}
}
