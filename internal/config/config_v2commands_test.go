package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// v2Model is a V2 model whose workers clone template image.
func v2Model(image string) sdk.WorkerStarterWorkerModel {
	return sdk.WorkerStarterWorkerModel{ModelV2: &sdk.V2WorkerModel{Name: "debian12", OSArch: "linux/amd64"}, VSphereSpec: sdk.V2WorkerModelVSphereSpec{Image: image}}
}

// By default a V2 model's workers download the worker before starting it.
func TestV2CommandsDefaultDownloadsTheWorker(t *testing.T) {
	t.Parallel()
	c := validConfig()
	got := c.V2CommandsOf(v2Model("debian12"))
	assert.Equal(t, hatchery.DefaultV2Commands(), got)
	assert.Contains(t, got.PreCmd, `"{{.API}}/download/worker/{{.OSArch}}"`)
	assert.Equal(t, "./worker", got.Cmd)
}

// The entry of a V2 template that sets commands replaces the three
// defaults for that template only; an entry without commands (only
// credentials) leaves the defaults.
func TestV2CommandsPerModelOverrideWins(t *testing.T) {
	t.Parallel()
	c := validConfig()
	c.V2PreCmd, c.V2Cmd, c.V2PostCmd = "fetch-worker", "./worker --default", "poweroff"
	c.GuestCredentials = []GuestCredential{
		{ModelVMWare: "ubuntu24", Username: "cds", V2Cmd: "exec /usr/local/bin/worker"},
		{ModelVMWare: "debian12", Username: "cds"},
	}
	c.Models = []GuestCredential{{ModelVMWare: "alma9", Username: "cds", V2PreCmd: "dnf -y install curl", V2Cmd: "./worker"}}
	require.NoError(t, c.Validate())
	assert.Equal(t, hatchery.V2Commands{Cmd: "exec /usr/local/bin/worker"}, c.V2CommandsOf(v2Model("ubuntu24")))
	assert.Equal(t, hatchery.V2Commands{PreCmd: "dnf -y install curl", Cmd: "./worker"}, c.V2CommandsOf(v2Model("alma9")), "a models (alias) entry too")
	assert.Equal(t, hatchery.V2Commands{PreCmd: "fetch-worker", Cmd: "./worker --default", PostCmd: "poweroff"}, c.V2CommandsOf(v2Model("debian12")))
	assert.Equal(t, hatchery.V2Commands{PreCmd: "fetch-worker", Cmd: "./worker --default", PostCmd: "poweroff"}, c.V2CommandsOf(v2Model("rocky9")), "no entry")
}

// Commands that do not render, and V2 commands where they cannot apply,
// are refused with their key.
func TestValidateCommands(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		mutate  func(c *Config)
		key     string
		problem string
	}{
		{"v2PreCmd does not parse", func(c *Config) { c.V2PreCmd = "curl {{.API" }, "v2PreCmd", "does not render"},
		{"v2Cmd unknown field", func(c *Config) { c.V2Cmd = "./worker --hatchery={{.Hatchery}}" }, "v2Cmd", "can't evaluate field Hatchery"},
		{"v2PostCmd does not parse", func(c *Config) { c.V2PostCmd = "{{end}}" }, "v2PostCmd", "does not render"},
		{"v2Cmd empty", func(c *Config) { c.V2Cmd = " " }, "v2Cmd", "required"},
		{"entry v2Cmd", func(c *Config) {
			c.GuestCredentials = []GuestCredential{{ModelVMWare: "debian12", Username: "cds", V2Cmd: "{{.Nope}}"}}
		}, "guestCredentials[0].v2Cmd", "can't evaluate field Nope"},
		{"alias entry v2PreCmd", func(c *Config) {
			c.Models = []GuestCredential{{ModelVMWare: "debian12", Username: "cds", V2PreCmd: "{{if}}", V2Cmd: "./worker"}}
		}, "models[0].v2PreCmd", "does not render"},
		{"entry preStartScript", func(c *Config) {
			c.GuestCredentials = []GuestCredential{{ModelPath: "shared.infra/debian12", Username: "cds", PreStartScript: "echo {{.Nope}}"}}
		}, "guestCredentials[0].preStartScript", "can't evaluate field Nope"},
		{"entry without v2Cmd", func(c *Config) {
			c.GuestCredentials = []GuestCredential{{ModelVMWare: "debian12", Username: "cds", V2PostCmd: "poweroff"}}
		}, "guestCredentials[0].v2Cmd", "required when the entry sets v2PreCmd or v2PostCmd"},
		{"v1 entry with v2 commands", func(c *Config) {
			c.GuestCredentials = []GuestCredential{{ModelPath: "shared.infra/debian12", Username: "cds", V2Cmd: "./worker"}}
		}, "guestCredentials[0]", "apply to V2 models only"},
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
			var got []string
			for _, fe := range ce {
				if fe.Key == key && strings.Contains(fe.Problem, tt.problem) {
					return
				}
				got = append(got, fe.Key+": "+fe.Problem)
			}
			t.Fatalf("no problem %q at %s; got %q", tt.problem, key, got)
		})
	}
}

// Templates using the names CDS's own hatcheries offer, this hatchery's,
// and map keys of InjectEnvVars (which depend on the worker) validate.
func TestValidateCommandsAcceptsTheOfferedNames(t *testing.T) {
	t.Parallel()
	c := validConfig()
	c.V2PreCmd = "curl {{.API}}/download/worker/linux/$(uname -m) -o worker && chmod +x worker && export T={{.Token}} C={{.Config}} B={{.APIEndpoint}}"
	c.V2Cmd = "./worker {{.InjectEnvVars.HTTP_PROXY}}"
	c.V2PostCmd = ""
	require.NoError(t, c.Validate())
}

// docs/configuration.md shows the default V2 pre-command as it is.
func TestDefaultV2PreCmdDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	require.NoError(t, err)
	assert.Contains(t, string(doc), "\n"+hatchery.DefaultV2PreCmd+"\n")
}
