package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestValidateAcceptsValid(t *testing.T) {
	t.Parallel()
	c := validConfig()
	require.NoError(t, c.Validate())
}

// TestValidateProblems has one case per documented problem: the key path
// and the gist of the message must both appear.
func TestValidateProblems(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		mutate  func(c *Config)
		key     string
		problem string
	}{
		{"name required", func(c *Config) { c.CommonConfiguration.Name = " " }, "commonConfiguration.name", "required"},
		{"api url required", func(c *Config) { c.CommonConfiguration.API.HTTP.URL = "" }, "commonConfiguration.api.http.url", "required"},
		{"api url absolute", func(c *Config) { c.CommonConfiguration.API.HTTP.URL = "cds.example.com" }, "commonConfiguration.api.http.url", "not an absolute http(s) URL"},
		{"hatchery url", func(c *Config) { c.CommonConfiguration.URL = "ftp://x" }, "commonConfiguration.url", "not an absolute http(s) URL"},
		{"cdn url", func(c *Config) { c.CommonConfiguration.CDN.URL = "::" }, "commonConfiguration.cdn.url", "not an absolute"},
		{"cdn tcp url scheme", func(c *Config) { c.CommonConfiguration.CDN.TCP.URL = "tcp://cdn:8090" }, "commonConfiguration.cdn.tcp.url", "not host:port"},
		{"cdn tcp url no port", func(c *Config) { c.CommonConfiguration.CDN.TCP.URL = "cdn.example.com" }, "commonConfiguration.cdn.tcp.url", "not host:port"},
		{"cdn tcp url port range", func(c *Config) { c.CommonConfiguration.CDN.TCP.URL = "cdn:70000" }, "commonConfiguration.cdn.tcp.url", "not host:port"},
		{"cdn tcp tls without url", func(c *Config) { c.CommonConfiguration.CDN.TCP.EnableTLS = true }, "commonConfiguration.cdn.tcp.enableTLS", "without cdn.tcp.url"},
		{"worker api url", func(c *Config) { c.CommonConfiguration.Provision.WorkerAPIHTTP.URL = "x" }, "commonConfiguration.provision.workerApiHttp.url", "not an absolute"},
		{"a token required", func(c *Config) { c.CommonConfiguration.API.TokenV2 = "" }, "commonConfiguration.api.token", "at least one of api.token"},
		{"rsa key required", func(c *Config) { c.CommonConfiguration.RSAPrivateKey = "" }, "commonConfiguration.rsaPrivateKey", "required"},
		{"rsa key not pem", func(c *Config) { c.CommonConfiguration.RSAPrivateKey = "garbage" }, "commonConfiguration.rsaPrivateKey", "not PEM"},
		{"rsa key wrong block", func(c *Config) {
			c.CommonConfiguration.RSAPrivateKey = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
		}, "commonConfiguration.rsaPrivateKey", "not an RSA private key"},
		{"rsa key bad der", func(c *Config) {
			c.CommonConfiguration.RSAPrivateKey = "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n"
		}, "commonConfiguration.rsaPrivateKey", "does not parse as PKCS#1"},
		{"http port range", func(c *Config) { c.CommonConfiguration.HTTP.Port = 70000 }, "commonConfiguration.http.port", "out of range"},
		{"http port negative", func(c *Config) { c.CommonConfiguration.HTTP.Port = -1 }, "commonConfiguration.http.port", "out of range"},
		{"http addr", func(c *Config) { c.CommonConfiguration.HTTP.Addr = "1.2.3.4:80" }, "commonConfiguration.http.addr", "not a listen address"},
		{"request timeout", func(c *Config) { c.CommonConfiguration.API.RequestTimeout = 0 }, "commonConfiguration.api.requestTimeout", "must be > 0"},
		{"heartbeat failures", func(c *Config) { c.CommonConfiguration.API.MaxHeartbeatFailures = -1 }, "commonConfiguration.api.maxHeartbeatFailures", "must be > 0"},
		{"maxWorker negative", func(c *Config) { c.CommonConfiguration.Provision.MaxWorker = -1 }, "commonConfiguration.provision.maxWorker", "must be >= 0"},
		{"provisioning above maxWorker", func(c *Config) {
			c.CommonConfiguration.Provision.MaxWorker = 5
			c.CommonConfiguration.Provision.MaxConcurrentRegistering = 1
		}, "commonConfiguration.provision.maxConcurrentProvisioning", "greater than provision.maxWorker 5"},
		{"provisioning not positive", func(c *Config) { c.CommonConfiguration.Provision.MaxConcurrentProvisioning = 0 }, "commonConfiguration.provision.maxConcurrentProvisioning", "must be > 0"},
		{"registering above maxWorker", func(c *Config) {
			c.CommonConfiguration.Provision.MaxWorker = 1
			c.CommonConfiguration.Provision.MaxConcurrentProvisioning = 1
		}, "commonConfiguration.provision.maxConcurrentRegistering", "greater than provision.maxWorker 1"},
		{"registering below -1", func(c *Config) { c.CommonConfiguration.Provision.MaxConcurrentRegistering = -2 }, "commonConfiguration.provision.maxConcurrentRegistering", "must be >= -1"},
		{"register frequency", func(c *Config) { c.CommonConfiguration.Provision.RegisterFrequency = 0 }, "commonConfiguration.provision.registerFrequency", "must be > 0"},
		{"max attempts", func(c *Config) { c.CommonConfiguration.Provision.MaxAttemptsNumberBeforeFailure = -3 }, "commonConfiguration.provision.maxAttemptsNumberBeforeFailure", "must be >= -1"},
		{"inject env vars", func(c *Config) { c.CommonConfiguration.Provision.InjectEnvVars = []string{"A=1", "novalue"} }, "commonConfiguration.provision.injectEnvVars[1]", "NAME=value"},
		{"endpoint required", func(c *Config) { c.Endpoint = "" }, "endpoint", "required"},
		{"endpoint with user", func(c *Config) { c.Endpoint = "admin@vc" }, "endpoint", "not a host name"},
		{"user required", func(c *Config) { c.User = "" }, "user", "required"},
		{"password required", func(c *Config) { c.Password = "" }, "password", "required"},
		{"datacenter required", func(c *Config) { c.DatacenterString = "" }, "datacenterString", "required"},
		{"card name", func(c *Config) { c.CardName = "e2000" }, "cardName", "not a network card type"},
		{"workerTTL", func(c *Config) { c.WorkerTTL = 0 }, "workerTTL", "must be > 0 (minutes)"},
		{"workerRegistrationTTL", func(c *Config) { c.WorkerRegistrationTTL = -1 }, "workerRegistrationTTL", "must be > 0"},
		{"workerProvisioningInterval", func(c *Config) { c.WorkerProvisioningInterval = 0 }, "workerProvisioningInterval", "must be > 0 (seconds)"},
		{"workerProvisioningPoolSize", func(c *Config) { c.WorkerProvisioningPoolSize = 0 }, "workerProvisioningPoolSize", "must be > 0"},
		{"killAwolServersInterval", func(c *Config) { c.KillAwolServersInterval = 0 }, "killAwolServersInterval", "must be > 0"},
		{"killDisabledWorkersInterval", func(c *Config) { c.KillDisabledWorkersInterval = 0 }, "killDisabledWorkersInterval", "must be > 0"},
		{"inventoryRefreshInterval", func(c *Config) { c.InventoryRefreshInterval = 0 }, "inventoryRefreshInterval", "must be > 0"},
		{"maxConcurrentTasks", func(c *Config) { c.MaxConcurrentTasks = 0 }, "maxConcurrentTasks", "must be > 0"},
		{"quarantineThreshold", func(c *Config) { c.QuarantineThreshold = 0 }, "quarantineThreshold", "must be > 0"},
		{"quarantineBackoff", func(c *Config) { c.QuarantineBackoff = 0 }, "quarantineBackoff", "must be > 0 (seconds)"},
		{"quarantineBackoffMax too long", func(c *Config) { c.QuarantineBackoffMax = MaxQuarantineBackoff + 1 }, "quarantineBackoffMax", "at most 86400"},
		{"keepFailedWorkers negative", func(c *Config) { c.KeepFailedWorkers = -1 }, "keepFailedWorkers", "must be 0-100"},
		{"keepFailedWorkers too many", func(c *Config) { c.KeepFailedWorkers = MaxKeepFailedWorkers + 1 }, "keepFailedWorkers", "must be 0-100"},
		{"keepFailedWorkersFor", func(c *Config) { c.KeepFailedWorkersFor = 0 }, "keepFailedWorkersFor", "must be > 0 (seconds)"},
		{"maxCpus negative", func(c *Config) { c.MaxCPUs = -1 }, "maxCpus", "must be >= 0"},
		{"maxMemoryMB negative", func(c *Config) { c.MaxMemoryMB = -1 }, "maxMemoryMB", "must be >= 0"},
		{"countSmallerFlavorToKeep", func(c *Config) { c.CountSmallerFlavorToKeep = -1 }, "countSmallerFlavorToKeep", "must be >= 0"},
		{"inventory mode", func(c *Config) { c.InventoryMode = "cached" }, "inventoryMode", `allowed: "watch", "shared", "listing"`},
		{"iprange syntax", func(c *Config) { c.IPRange = "10.0.0.1" }, "iprange", "not an IPv4 CIDR block"},
		{"name too long for the ip locks", func(c *Config) {
			c.IPRange = "10.0.0.10/24"
			c.CommonConfiguration.Name = strings.Repeat("h", MaxNameWithStaticIPs+1)
		}, "commonConfiguration.name", "62 characters: with static IPs (iprange, [[networks]]) at most 61"},
		{"name with an escaped character and ip locks", func(c *Config) {
			c.Networks = []Network{{IPRange: "10.0.0.10/24"}}
			c.CommonConfiguration.Name = "ci/hatchery"
		}, "commonConfiguration.name", "must not hold %, / or \\"},
		{"gateway ipv4", func(c *Config) { c.Gateway = "fe80::1" }, "gateway", "not an IPv4 address"},
		{"dns ipv4", func(c *Config) { c.DNS = "dns.example.com" }, "dns", "not an IPv4 address"},
		{"dns list", func(c *Config) { c.DNS = "10.0.0.2, nope" }, "dns[1]", "not an IPv4 address"},
		{"mask syntax", func(c *Config) { c.SubnetMask = "24" }, "subnetMask", "not an IPv4 subnet mask"},
		{"mask contiguous", func(c *Config) { c.SubnetMask = "255.0.255.0" }, "subnetMask", "not a contiguous subnet mask"},
		{"mask zero", func(c *Config) { c.SubnetMask = "0.0.0.0" }, "subnetMask", "not a contiguous subnet mask"},
		{"network iprange required", func(c *Config) { c.Networks = []Network{{IPRange: "10.1.0.1/30"}, {Gateway: "10.2.0.1"}} }, "networks[1].iprange", "required"},
		{"network iprange syntax", func(c *Config) {
			c.Networks = []Network{{IPRange: "10.1.0.1/30"}, {IPRange: "10.2.0.1/33"}}
		}, "networks[1].iprange", "not an IPv4 CIDR block"},
		{"network gateway", func(c *Config) { c.Networks = []Network{{IPRange: "10.1.0.1/30", Gateway: "x"}} }, "networks[0].gateway", "not an IPv4 address"},
		{"network mask", func(c *Config) {
			c.Networks = []Network{{IPRange: "10.1.0.1/30", SubnetMask: "255.255.255.1"}}
		}, "networks[0].subnetMask", "not a contiguous"},
		{"network overlaps iprange", func(c *Config) {
			c.IPRange = "10.0.0.10/24"
			c.Networks = []Network{{IPRange: "10.0.0.200/29"}}
		}, "networks[0].iprange", "overlaps hatchery.vsphere.iprange"},
		{"networks overlap each other", func(c *Config) {
			c.Networks = []Network{{IPRange: "10.0.0.0/29"}, {IPRange: "10.1.0.0/29"}, {IPRange: "10.0.0.4/30"}}
		}, "networks[2].iprange", "overlaps hatchery.vsphere.networks[0].iprange"},
		{"flavor name required", func(c *Config) { c.Flavors = append(c.Flavors, Flavor{CPUs: 1, MemoryMB: 1}) }, "flavors[2].name", "required"},
		{"flavor name spaces", func(c *Config) { c.Flavors[1].Name = " large" }, "flavors[1].name", "surrounding spaces"},
		{"flavor duplicate", func(c *Config) {
			c.Flavors = append(c.Flavors, Flavor{Name: "SMALL", CPUs: 1, MemoryMB: 1})
		}, "flavors[2].name", "duplicate of flavors[0]"},
		{"flavor cpus", func(c *Config) { c.Flavors[0].CPUs = 0 }, "flavors[0].cpus", `flavor "small": 0: must be > 0`},
		{"flavor memory", func(c *Config) { c.Flavors[0].MemoryMB = -5 }, "flavors[0].memoryMB", "must be > 0"},
		{"flavor disk", func(c *Config) { c.Flavors[0].DiskSizeGB = -1 }, "flavors[0].diskSizeGB", "must be >= 0"},
		{"flavor above maxCpus", func(c *Config) { c.MaxCPUs = 4 }, "flavors[1].cpus", "more than maxCpus 4"},
		{"flavor above maxMemoryMB", func(c *Config) { c.MaxMemoryMB = 8192 }, "flavors[1].memoryMB", "more than maxMemoryMB 8192"},
		{"default flavor undefined", func(c *Config) { c.DefaultFlavor = "huge" }, "defaultFlavor", `"huge" is not a defined flavor (defined: small, large)`},
		{"default flavor without flavors", func(c *Config) { c.Flavors = nil }, "defaultFlavor", "none; define"},
		{"provisioning needs a model", func(c *Config) {
			c.WorkerProvisioning = []WorkerProvisioning{{Number: 1}}
		}, "workerProvisioning[0]", "set exactly one of modelPath"},
		{"provisioning both models", func(c *Config) {
			c.WorkerProvisioning = []WorkerProvisioning{{ModelPath: "g/m", ModelVMWare: "debian12", Number: 1}}
		}, "workerProvisioning[0]", "sets both modelPath and modelVMWare"},
		{"provisioning model path", func(c *Config) {
			c.WorkerProvisioning = []WorkerProvisioning{{ModelPath: "nogroup", Number: 1}}
		}, "workerProvisioning[0].modelPath", `want "group/model"`},
		{"provisioning number", func(c *Config) {
			c.WorkerProvisioning = []WorkerProvisioning{{ModelVMWare: "debian12", Number: -1}}
		}, "workerProvisioning[0].number", "must be >= 0"},
		{"provisioning flavor", func(c *Config) {
			c.WorkerProvisioning = []WorkerProvisioning{{ModelVMWare: "debian12", Number: 1, Flavor: "xl"}}
		}, "workerProvisioning[0].flavor", `"xl" is not a defined flavor`},
		{"provisioning suspended without flavor", func(c *Config) {
			c.WorkerProvisioning = []WorkerProvisioning{{ModelVMWare: "debian12", Number: 1, IdleState: IdleStateSuspended}}
		}, "workerProvisioning[0].flavor", `required when idleState is "suspended"`},
		{"provisioning powered on without flavor", func(c *Config) {
			c.WorkerProvisioning = []WorkerProvisioning{{ModelVMWare: "debian12", Number: 1, Flavor: "small"}, {ModelVMWare: "debian12", Number: 1, IdleState: IdleStatePoweredOn}}
		}, "workerProvisioning[1].flavor", `required when idleState is "poweredOn"`},
		{"provisioning hot cloud-init", func(c *Config) {
			c.GuestCredentials = []GuestCredential{{ModelVMWare: "debian12", Bootstrap: BootstrapCloudInit}}
			c.WorkerProvisioning = []WorkerProvisioning{{ModelVMWare: "debian12", Number: 1, Flavor: "small", IdleState: IdleStateSuspended}}
		}, "workerProvisioning[0].idleState", "starts with cloud-init"},
		{"provisioning idle state", func(c *Config) {
			c.WorkerProvisioning = []WorkerProvisioning{{ModelVMWare: "debian12", Number: 1, Flavor: "small", IdleState: "hibernated"}}
		}, "workerProvisioning[0].idleState", `"hibernated": must be "poweredOff" (default), "suspended" or "poweredOn"`},
		{"provisioning duplicate", func(c *Config) {
			c.WorkerProvisioning = []WorkerProvisioning{
				{ModelVMWare: "debian12", Number: 1, Flavor: "small"},
				{ModelVMWare: "debian12", Number: 1},
				{ModelVMWare: "debian12", Number: 2, Flavor: "SMALL"},
			}
		}, "workerProvisioning[2]", "duplicate of workerProvisioning[0]"},
		{"default models v2", func(c *Config) {
			c.DefaultWorkerModelsV2 = []DefaultWorkerModelsV2{{Binaries: []string{"git"}}}
		}, "defaultWorkerModelsV2[0].workerModelV2", "required"},
		{"credentials model", func(c *Config) {
			c.GuestCredentials = []GuestCredential{{Username: "u"}}
		}, "guestCredentials[0]", "needs a model"},
		{"credentials username", func(c *Config) {
			c.GuestCredentials = []GuestCredential{{ModelVMWare: "debian12"}}
		}, "guestCredentials[0].username", "required"},
		{"models alias username", func(c *Config) {
			c.Models = []GuestCredential{{ModelPath: "g/m"}}
		}, "models[0].username", "required"},
		{"credentials duplicate across alias", func(c *Config) {
			c.GuestCredentials = []GuestCredential{{ModelVMWare: "debian12", Username: "a"}}
			c.Models = []GuestCredential{{ModelVMWare: "debian12", Username: "b"}}
		}, "models[0]", "duplicate credentials"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := validConfig()
			tt.mutate(&c)
			err := c.Validate()
			require.Error(t, err)
			var ce Errors
			require.True(t, errors.As(err, &ce))
			key := KeyPrefix + "." + tt.key
			found := false
			for _, fe := range ce {
				if fe.Key == key && strings.Contains(fe.Problem, tt.problem) {
					found = true
				}
			}
			assert.True(t, found, "want %s: …%s…; got:\n%v", key, tt.problem, err)
			assert.Contains(t, err.Error(), key+": ")
			assertNoSecret(t, err.Error())
		})
	}
}

func TestValidateRegisteringDisabledAndUnlimited(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                      string
		maxWorker, prov, register int
	}{
		{"maxWorker 0 skips the <= checks", 0, 50, 50},
		{"registering -1 allowed", 5, 5, -1},
		{"equal to maxWorker", 5, 5, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := validConfig()
			p := &c.CommonConfiguration.Provision
			p.MaxWorker, p.MaxConcurrentProvisioning, p.MaxConcurrentRegistering = tt.maxWorker, tt.prov, tt.register
			require.NoError(t, c.Validate())
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()
	c := Default()
	c.CommonConfiguration.Provision.MaxWorker = -1
	c.IPRange = "bad"
	c.Networks = []Network{{IPRange: "10.0.0.1/24"}, {IPRange: "nope"}}
	c.Flavors = []Flavor{{Name: "a"}}
	err := c.Validate()
	require.Error(t, err)
	var ce Errors
	require.True(t, errors.As(err, &ce))
	keys := map[string]bool{}
	for _, fe := range ce {
		keys[strings.TrimPrefix(fe.Key, KeyPrefix+".")] = true
	}
	for _, k := range []string{
		"commonConfiguration.name", "commonConfiguration.api.http.url", "commonConfiguration.api.token",
		"commonConfiguration.rsaPrivateKey", "endpoint", "user", "password", "datacenterString",
		"commonConfiguration.provision.maxWorker", "iprange", "networks[1].iprange", "flavors[0].cpus", "flavors[0].memoryMB",
	} {
		assert.True(t, keys[k], "missing %s in:\n%v", k, err)
	}
	assert.Equal(t, len(ce), strings.Count(err.Error(), "\n")+1, "one problem per line")
}

func TestValidateNeverShowsSecrets(t *testing.T) {
	t.Parallel()
	// Secrets planted where a careless message could echo them.
	c := validConfig()
	c.Endpoint = testPassword + "@vc"
	c.CommonConfiguration.API.Token = testToken
	c.CommonConfiguration.API.HTTP.URL = testToken
	c.CommonConfiguration.RSAPrivateKey = "-----BEGIN RSA PRIVATE KEY-----\nMIIsecret\n-----END RSA PRIVATE KEY-----\n"
	c.GuestCredentials = []GuestCredential{{ModelVMWare: testTokenV2, Password: testTokenV2}}
	err := c.Validate()
	require.Error(t, err)
	assertNoSecret(t, err.Error())
	assert.NotContains(t, err.Error(), "MIIsecret")
}

func TestRedacted(t *testing.T) {
	t.Parallel()
	c := validConfig()
	c.CommonConfiguration.API.Token = testToken
	c.GuestCredentials = []GuestCredential{{ModelVMWare: "d", Username: "u", Password: "guest-secret"}}
	c.Models = []GuestCredential{{ModelVMWare: "e", Username: "u"}}
	r := c.Redacted()

	assert.Equal(t, RedactedMask, r.Password)
	assert.Equal(t, RedactedMask, r.CommonConfiguration.API.Token)
	assert.Equal(t, RedactedMask, r.CommonConfiguration.API.TokenV2)
	assert.Equal(t, RedactedMask, r.CommonConfiguration.RSAPrivateKey)
	assert.Equal(t, RedactedMask, r.GuestCredentials[0].Password)
	assert.Empty(t, r.Models[0].Password, "an unset secret stays empty")
	assert.Equal(t, c.User, r.User)

	// The copy is deep: masking did not touch the original.
	assert.Equal(t, "guest-secret", c.GuestCredentials[0].Password)
	assert.Equal(t, testPassword, c.Password)
	r.Flavors[0].Name = "changed"
	assert.Equal(t, "small", c.Flavors[0].Name)
}

func TestStaticNetworksFallBack(t *testing.T) {
	t.Parallel()
	c := validConfig()
	c.IPRange, c.Gateway, c.DNS = "10.0.0.10/24", "10.0.0.1", "10.0.0.2"
	c.Networks = []Network{{IPRange: "10.1.0.10/24", Gateway: "10.1.0.1"}}
	assert.Equal(t, []Network{
		{IPRange: "10.0.0.10/24", Gateway: "10.0.0.1", DNS: "10.0.0.2", SubnetMask: DefaultSubnetMask},
		{IPRange: "10.1.0.10/24", Gateway: "10.1.0.1", DNS: "10.0.0.2", SubnetMask: DefaultSubnetMask},
	}, c.StaticNetworks())
	c.IPRange, c.Networks = "", nil
	assert.Empty(t, c.StaticNetworks(), "no range: DHCP")
}
