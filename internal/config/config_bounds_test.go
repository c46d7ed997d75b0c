package config

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDurationConversionNeverOverflows: a huge count of minutes once wrapped
// to a negative duration, which made every running worker look expired.
func TestDurationConversionNeverOverflows(t *testing.T) {
	t.Parallel()
	for _, n := range []int{math.MaxInt64, math.MaxInt64 / 60, 1 << 40, math.MinInt64, -1, 0} {
		c := validConfig()
		c.WorkerTTL, c.WorkerRegistrationTTL = n, n
		c.WorkerProvisioningInterval, c.KillAwolServersInterval, c.KillDisabledWorkersInterval, c.InventoryRefreshInterval = n, n, n, n
		for name, d := range map[string]time.Duration{
			"workerTTL":                   c.WorkerTTLDuration(),
			"workerRegistrationTTL":       c.WorkerRegistrationTTLDuration(),
			"workerProvisioningInterval":  c.WorkerProvisioningIntervalDuration(),
			"killAwolServersInterval":     c.KillAwolServersIntervalDuration(),
			"killDisabledWorkersInterval": c.KillDisabledWorkersIntervalDuration(),
			"inventoryRefreshInterval":    c.InventoryRefreshIntervalDuration(),
		} {
			assert.Positive(t, d, "%s = %d", name, n)
			assert.LessOrEqual(t, d, 7*24*time.Hour, "%s = %d", name, n)
		}
		assert.Equal(t, time.Duration(MaxWorkerTTL)*time.Minute, func() time.Duration {
			c.WorkerTTL = MaxWorkerTTL + 1
			return c.WorkerTTLDuration()
		}(), "above the bound converts to the bound")
	}
	c := validConfig()
	c.WorkerTTL = 90
	assert.Equal(t, 90*time.Minute, c.WorkerTTLDuration(), "in range converts exactly")
}

// TestValidateDurationBounds: every duration key refuses a value above its
// documented bound, naming the key and the allowed range.
func TestValidateDurationBounds(t *testing.T) {
	t.Parallel()
	for _, d := range durationKeys {
		for _, v := range []int{d.max + 1, math.MaxInt64} {
			c := validConfig()
			setDurationKey(t, &c, d.key, v)
			err := c.Validate()
			require.Error(t, err, "%s = %d", d.key, v)
			var es Errors
			require.True(t, errors.As(err, &es))
			require.Len(t, es, 1, "%s = %d: %v", d.key, v, err)
			assert.Equal(t, KeyPrefix+"."+d.key, es[0].Key)
			assert.Contains(t, es[0].Problem, "out of range")
			assert.Contains(t, es[0].Problem, d.unitName)
		}
		c := validConfig()
		setDurationKey(t, &c, d.key, d.max)
		require.NoError(t, c.Validate(), "%s at its bound is allowed", d.key)
	}
}

func setDurationKey(t *testing.T, c *Config, key string, v int) {
	t.Helper()
	p := map[string]*int{
		"workerTTL":                                       &c.WorkerTTL,
		"workerRegistrationTTL":                           &c.WorkerRegistrationTTL,
		"workerProvisioningInterval":                      &c.WorkerProvisioningInterval,
		"killAwolServersInterval":                         &c.KillAwolServersInterval,
		"killDisabledWorkersInterval":                     &c.KillDisabledWorkersInterval,
		"inventoryRefreshInterval":                        &c.InventoryRefreshInterval,
		"quarantineBackoff":                               &c.QuarantineBackoff,
		"quarantineBackoffMax":                            &c.QuarantineBackoffMax,
		"keepFailedWorkersFor":                            &c.KeepFailedWorkersFor,
		"commonConfiguration.api.requestTimeout":          &c.CommonConfiguration.API.RequestTimeout,
		"commonConfiguration.provision.registerFrequency": &c.CommonConfiguration.Provision.RegisterFrequency,
		"windowsGuestOpsTimeout":                          &c.WindowsGuestOpsTimeout,
		"windowsIPTimeout":                                &c.WindowsIPTimeout,
		"windowsEnvTimeout":                               &c.WindowsEnvTimeout,
	}[key]
	require.NotNil(t, p, "duration key %s has no setter in the test", key)
	*p = v
}

// TestValidateEndpoint: the accepted forms and the refused ones; no message
// repeats the value (it may hold the password).
func TestValidateEndpoint(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{
		"vc.example.com", "vc.example.com:8443", "10.0.0.5", "https://vc.example.com",
		"https://vc.example.com/", "https://vc.example.com/sdk", "HTTPS://vc.example.com:443/sdk/", "[fd00::5]:443",
	} {
		c := validConfig()
		c.Endpoint = ok
		assert.NoError(t, c.Validate(), "%q is a valid endpoint", ok)
		_, problem := parseEndpoint(ok)
		assert.Empty(t, problem)
	}
	for _, tc := range []struct{ in, problem string }{
		{"http://vc.example.com", "in clear"},
		{"ftp://vc.example.com", "not https"},
		{"ldap://vc.example.com", "not https"},
		{"vc.example.com:0", "out of range"},
		{"vc.example.com:65536", "out of range"},
		{"https://vc.example.com:99999/sdk", "out of range"},
		{"vc.example.com:", "out of range"},
		{"https://vc.example.com/ui", "not the SDK path"},
		{"https://vc.example.com/sdk?x=1", "query"},
		{"https://", "no host"},
		{"https://admin:" + testPassword + "@vc.example.com", "user information"},
		{"admin:" + testPassword + "@vc.example.com", "user information"},
		{"vc example", "white space"},
	} {
		c := validConfig()
		c.Endpoint = tc.in
		err := c.Validate()
		require.Error(t, err, tc.in)
		assert.Contains(t, err.Error(), KeyPrefix+".endpoint: ", tc.in)
		assert.Contains(t, err.Error(), tc.problem, tc.in)
		assert.NotContains(t, err.Error(), testPassword)
		if strings.Contains(tc.in, "@") {
			assert.NotContains(t, err.Error(), tc.in)
		}
	}
}

// TestValidateIPPlan checks a range together with its gateway, DNS and mask.
func TestValidateIPPlan(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		mutate       func(c *Config)
		key, problem string
	}{
		{"gateway inside the range", func(c *Config) {
			c.IPRange, c.Gateway = "10.0.0.1/24", "10.0.0.50"
		}, "gateway", "inside iprange"},
		{"dns inside the range", func(c *Config) {
			c.IPRange, c.Gateway, c.DNS = "10.0.0.10/24", "10.0.0.1", "10.0.0.2,10.0.0.53"
		}, "dns", "10.0.0.53 is inside iprange"},
		{"gateway outside the network", func(c *Config) {
			c.IPRange, c.Gateway = "10.0.0.10/24", "10.0.1.1"
		}, "gateway", "outside the network 10.0.0.0/24"},
		{"narrow mask splits the range", func(c *Config) {
			c.IPRange, c.Gateway, c.SubnetMask = "10.0.0.10/24", "10.0.0.1", "255.255.255.128"
		}, "iprange", "outside the network 10.0.0.0/25"},
		{"range holds the broadcast of the mask", func(c *Config) {
			c.IPRange, c.Gateway = "10.0.0.10/24,10.0.0.255/32", "10.0.0.1"
		}, "iprange", "10.0.0.255, the broadcast address"},
		{"range holds the network address of the mask", func(c *Config) {
			c.IPRange, c.Gateway, c.SubnetMask = "10.0.4.0/31,10.0.4.10/24", "10.0.4.1", "255.255.252.0"
		}, "iprange", "10.0.4.0, the network address"},
		{"network entry inherits the gateway", func(c *Config) {
			c.Gateway = "10.0.0.1"
			c.Networks = []Network{{IPRange: "10.0.5.10/24"}}
		}, "networks[0].gateway", "outside the network 10.0.5.0/24"},
		{"network entry gateway inside", func(c *Config) {
			c.Networks = []Network{{IPRange: "10.0.5.1/24", Gateway: "10.0.5.1"}}
		}, "networks[0].gateway", "inside networks[0].iprange"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			tc.mutate(&c)
			err := c.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), KeyPrefix+"."+tc.key+": ")
			assert.Contains(t, err.Error(), tc.problem)
		})
	}
	c := validConfig()
	c.IPRange, c.Gateway, c.DNS = "10.0.0.10/24", "10.0.0.1", "10.0.0.2,8.8.8.8"
	c.Networks = []Network{{IPRange: "10.0.8.10/22", Gateway: "10.0.8.1", SubnetMask: "255.255.252.0"}}
	require.NoError(t, c.Validate(), "a plausible plan is accepted")
}
