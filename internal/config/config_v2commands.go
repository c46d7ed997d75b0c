package config

import (
	"strings"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// hasV2Commands tells whether an entry sets its own V2 commands.
func (g GuestCredential) hasV2Commands() bool {
	return strings.TrimSpace(g.V2PreCmd) != "" || strings.TrimSpace(g.V2Cmd) != "" || strings.TrimSpace(g.V2PostCmd) != ""
}

// V2CommandsOf is the guest commands of a V2 model's workers
// (docs/configuration.md, "V2 commands"): those of its guestCredentials
// (or models) entry when the entry sets any, as a whole; else v2PreCmd,
// v2Cmd and v2PostCmd, or for a Windows model (os = "windows")
// WindowsV2Commands. It is the framework's hatchery.Options.V2Commands.
func (c *Config) V2CommandsOf(model sdk.WorkerStarterWorkerModel) hatchery.V2Commands {
	if e := c.ModelEntry(model); e != nil && e.hasV2Commands() {
		return hatchery.V2Commands{PreCmd: e.V2PreCmd, Cmd: e.V2Cmd, PostCmd: e.V2PostCmd}
	}
	if c.IsWindows(model) {
		// The hatchery-wide defaults are Linux shell (config_guestos.go).
		return WindowsV2Commands()
	}
	return hatchery.V2Commands{PreCmd: c.V2PreCmd, Cmd: c.V2Cmd, PostCmd: c.V2PostCmd}
}

// validateCommands checks the commands the hatchery renders as templates
// (spawn.CheckModelCommand): v2PreCmd, v2Cmd, v2PostCmd, and each
// entry's preStartScript and V2 commands. v2Cmd starts the worker: it may
// not be empty, nor may an entry's own. An entry's V2 commands need a V2
// template (modelVMWare).
func (c *Config) validateCommands(es *Errors) {
	check := func(key, src string) {
		if err := spawn.CheckModelCommand(src); err != nil {
			es.add(key, "does not render as a model command template (docs/configuration.md, \"Model command templates\"): %v", err)
		}
	}
	check("v2PreCmd", c.V2PreCmd)
	check("v2Cmd", c.V2Cmd)
	check("v2PostCmd", c.V2PostCmd)
	if strings.TrimSpace(c.V2Cmd) == "" {
		es.add("v2Cmd", "required: the command starting the worker of V2 models (default %q)", hatchery.DefaultV2Commands().Cmd)
	}
	for key, g := range c.credentialEntries() {
		check(key+".preStartScript", g.PreStartScript)
		check(key+".v2PreCmd", g.V2PreCmd)
		check(key+".v2Cmd", g.V2Cmd)
		check(key+".v2PostCmd", g.V2PostCmd)
		if !g.hasV2Commands() {
			continue
		}
		if strings.TrimSpace(g.ModelVMWare) == "" {
			es.add(key, "v2PreCmd, v2Cmd and v2PostCmd apply to V2 models only: the entry needs modelVMWare")
		}
		if strings.TrimSpace(g.V2Cmd) == "" {
			es.add(key+".v2Cmd", "required when the entry sets v2PreCmd or v2PostCmd: its commands replace the three defaults as a whole")
		}
	}
}
