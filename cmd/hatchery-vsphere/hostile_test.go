package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
)

// hangBound is how long one refused configuration may take before the test
// calls it a hang (refusals take milliseconds; this only catches a parser
// that never returns).
const hangBound = 20 * time.Second

// TestHostileAndMistakenConfigs drives `config check` and `start` over
// configurations an operator could plausibly write, or a corrupted or
// hostile file: each is refused with exit 1, without a crash or a hang,
// naming the key or line, and never printing a secret.
func TestHostileAndMistakenConfigs(t *testing.T) {
	t.Parallel()
	ref := string(config.ReferenceConfig())
	// edit replaces one line of the reference (which must hold it).
	edit := func(pairs ...string) string {
		doc := ref
		for i := 0; i < len(pairs); i += 2 {
			require.Contains(t, doc, pairs[i])
			doc = strings.Replace(doc, pairs[i], pairs[i+1], 1)
		}
		return doc
	}
	const endpoint = `endpoint = "vcenter.example.com"`
	deep := func(open, close string, n int) string {
		return ref + "\n[hatchery.vsphere.x]\na = " + strings.Repeat(open, n) + "1" + strings.Repeat(close, n) + "\n"
	}
	var manyKeys strings.Builder
	manyKeys.WriteString(ref)
	for i := 0; i < 12000; i++ {
		fmt.Fprintf(&manyKeys, "[hatchery.vsphere.t%d]\n", i)
	}
	tests := []struct {
		name string
		doc  string
		env  map[string]string
		want string
	}{
		// Durations.
		{"workerTTL overflowing to negative", edit("workerTTL = 120", "workerTTL = 9223372036854775807"), nil, "hatchery.vsphere.workerTTL: 9223372036854775807 is out of range"},
		{"finishedWorkerGracePeriod overflowing", edit("finishedWorkerGracePeriod = 0", "finishedWorkerGracePeriod = 9223372036854775807"), nil, "hatchery.vsphere.finishedWorkerGracePeriod: 9223372036854775807 is out of range"},
		{"finishedWorkerGracePeriod negative", edit("finishedWorkerGracePeriod = 0", "finishedWorkerGracePeriod = -1"), nil, "hatchery.vsphere.finishedWorkerGracePeriod: -1 is out of range"},
		{"workerTTL beyond int64", edit("workerTTL = 120", "workerTTL = 99999999999999999999"), nil, "workerTTL"},
		{"workerTTL as text", edit("workerTTL = 120", `workerTTL = "2h"`), nil, "workerTTL"},
		{"workerTTL in seconds by mistake", edit("workerTTL = 120", "workerTTL = 7200000"), nil, "hatchery.vsphere.workerTTL: 7200000 is out of range"},
		{"negative interval", edit("killAwolServersInterval = 120", "killAwolServersInterval = -5"), nil, "hatchery.vsphere.killAwolServersInterval: -5 is out of range"},
		{"inventory refresh of a day", edit("inventoryRefreshInterval = 60", "inventoryRefreshInterval = 86400"), nil, "hatchery.vsphere.inventoryRefreshInterval: 86400 is out of range"},
		{"request timeout huge", edit("requestTimeout = 10", "requestTimeout = 4294967296"), nil, "hatchery.vsphere.commonConfiguration.api.requestTimeout: 4294967296 is out of range"},
		{"register frequency huge", edit("registerFrequency = 60", "registerFrequency = 9223372036854775807"), nil, "hatchery.vsphere.commonConfiguration.provision.registerFrequency:"},
		// Endpoint.
		{"endpoint http", edit(endpoint, `endpoint = "http://vcenter.example.com"`), nil, "hatchery.vsphere.endpoint: http:// would send the vCenter password in clear"},
		{"endpoint ftp", edit(endpoint, `endpoint = "ftp://vcenter.example.com"`), nil, "hatchery.vsphere.endpoint: the scheme is not https"},
		{"endpoint port 0", edit(endpoint, `endpoint = "vcenter.example.com:0"`), nil, "hatchery.vsphere.endpoint: port \"0\" is out of range"},
		{"endpoint port 70000", edit(endpoint, `endpoint = "https://vcenter.example.com:70000/sdk"`), nil, "hatchery.vsphere.endpoint: port \"70000\" is out of range"},
		{"endpoint ui path", edit(endpoint, `endpoint = "https://vcenter.example.com/ui/"`), nil, "hatchery.vsphere.endpoint: path \"/ui/\" is not the SDK path"},
		{"endpoint with password", edit(endpoint, `endpoint = "https://administrator:`+plantedPassword+`@vcenter.example.com"`), nil, "hatchery.vsphere.endpoint: is not a host name: it holds user information"},
		{"endpoint with password no scheme", edit(endpoint, `endpoint = "root:`+plantedPassword+`@vcenter.example.com:443"`), nil, "hatchery.vsphere.endpoint: is not a host name: it holds user information"},
		// IP plan.
		{"gateway inside the range", edit(`#iprange = "192.168.10.20/24"`, `iprange = "192.168.10.20/24"`, `#gateway = "192.168.10.1"`, `gateway = "192.168.10.30"`), nil, "hatchery.vsphere.gateway: 192.168.10.30 is inside iprange"},
		{"dns inside the range", edit(`#iprange = "192.168.10.20/24"`, `iprange = "192.168.10.20/24"`, `#dns = "192.168.10.2"`, `dns = "192.168.10.53"`), nil, "hatchery.vsphere.dns: 192.168.10.53 is inside iprange"},
		{"gateway in another network", edit(`#iprange = "192.168.10.20/24"`, `iprange = "192.168.10.20/24"`, `#gateway = "192.168.10.1"`, `gateway = "192.168.11.1"`), nil, "hatchery.vsphere.gateway: 192.168.11.1 is outside the network 192.168.10.0/24"},
		{"range wider than the mask", edit(`#iprange = "192.168.10.20/24"`, `iprange = "192.168.10.20/23"`, `#gateway = "192.168.10.1"`, `gateway = "192.168.10.1"`), nil, "hatchery.vsphere.iprange: address 192.168.11.0 is outside the network 192.168.10.0/24"},
		{"range of a /8", edit(`#iprange = "192.168.10.20/24"`, `iprange = "10.0.0.1/8"`), nil, "hatchery.vsphere.iprange:"},
		{"bad mask", edit(`subnetMask = "255.255.255.0"`, `subnetMask = "255.255.255.256"`), nil, "hatchery.vsphere.subnetMask:"},
		// Keys.
		{"same key in two cases", edit("# Total vCPUs this hatchery may allocate. Default 0.", "maxCpus = 8\n  MaxCpus = 64"), nil, "hatchery.vsphere.MaxCpus: is hatchery.vsphere.maxCpus written again in another letter case"},
		{"typo", edit("workerTTL = 120", "workerTtl = 120\n  workerTL = 5"), nil, "hatchery.vsphere.workerTL: unknown key (did you mean workerTTL?)"},
		{"table written twice", ref + "\n[hatchery.vsphere]\n", nil, "line"},
		{"negative maxWorker", edit("maxWorker = 10", "maxWorker = -1"), nil, "hatchery.vsphere.commonConfiguration.provision.maxWorker: -1: must be >= 0"},
		// Secrets.
		{"unquoted password", edit(`password = ""`, `password = `+plantedPassword), nil, "password"},
		{"password file missing", ref, map[string]string{config.EnvPassword: "", config.EnvPassword + config.EnvFileSuffix: "/nonexistent/vcenter-password"}, "hatchery.vsphere.password: cannot read the secret from CDS_HATCHERY_VSPHERE_PASSWORD_FILE"},
		{"key not PEM", ref, map[string]string{config.EnvRSAPrivateKey: plantedToken}, "hatchery.vsphere.commonConfiguration.rsaPrivateKey: not PEM"},
		// Corrupted or hostile files.
		{"deeply nested arrays", deep("[", "]", 500000), nil, "nested more than 16 deep"},
		{"deeply nested inline tables", deep("{a=", "}", 200000), nil, "nested more than 16 deep"},
		{"too many tables", manyKeys.String(), nil, "more than 10000 keys"},
		{"too large", ref + "#" + strings.Repeat("A", 2<<20) + "\n", nil, "larger than"},
		{"binary garbage", "\x00\xff\xfe[[[\x00 = = \x01", nil, "line"},
		{"thousands of problems", ref + strings.Repeat("[[hatchery.vsphere.flavors]]\ncpus = -1\n", 2000), nil, "and 5900 more"},
		{"a unit file", "[Unit]\nDescription=not a hatchery config\n", nil, "line 2: Unit.Description"},
		{"another program's config", "[server]\nport = 8080\n", nil, "no [hatchery.vsphere] table"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := secretsEnv()
			for k, v := range tt.env {
				env[k] = v
				if v == "" {
					delete(env, k)
				}
			}
			path := writeFile(t, tt.doc)
			for _, cmd := range [][]string{{"config", "check", "--config", path}, {"start", "--config", path}} {
				done := make(chan result, 1)
				go func() { done <- runCmd(t, env, nil, cmd...) }()
				var r result
				select {
				case r = <-done:
				case <-time.After(hangBound):
					t.Fatalf("%s: no answer within %s", cmd[0], hangBound)
				}
				assert.Equal(t, exitFail, r.code, "%s: %s", cmd[0], r.stderr)
				assert.Empty(t, r.stdout, cmd[0])
				assert.Contains(t, r.stderr, tt.want, cmd[0])
				assert.Contains(t, r.stderr, filepath.Base(path), "%s names the file", cmd[0])
				for _, s := range []string{plantedPassword, plantedToken, "PRIVATE KEY-----\nMI"} {
					assert.NotContains(t, r.stderr, s, "%s prints a secret", cmd[0])
				}
				assert.Less(t, len(r.stderr), 64<<10, "%s: the refusal is short", cmd[0])
			}
		})
	}
}

// TestStartStopsWhenSignalledWhileLoading: a SIGTERM that arrives while
// the file is read (the context is cancelled by then) starts nothing.
func TestStartStopsWhenSignalledWhileLoading(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	a := &app{start: func(context.Context, *config.Config, *slog.Logger, func() (*config.Config, error), func(string)) error {
		t.Error("start hook called after the signal")
		return nil
	}}
	r := runCmdCtx(ctx, secretsEnv(), a, "start", "--config", writeFile(t, string(config.ReferenceConfig())))
	assert.Equal(t, exitOK, r.code, r.stderr)
}
