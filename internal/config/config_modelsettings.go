package config

import (
	"strings"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// ModelSettings are what one configuration says about the workers of one
// model, read with one lookup of its entry (ModelEntry): the pieces of a
// job's plan (internal/admission.Plan) that come from the model's entry.
type ModelSettings struct {
	// Entry is a copy of the model's guestCredentials (else models) entry:
	// its guest account and preStartScript; nil when none names the model.
	Entry *GuestCredential
	// Bootstrap is how the worker starts (BootstrapOf).
	Bootstrap string
	// OS is the guest OS (OSOf).
	OS string
	// CloneMode is the entry's cloneMode (CloneModeOf).
	CloneMode string
}

// SettingsOf is model's settings: BootstrapOf, OSOf and CloneModeOf
// together, from one lookup of its entry.
func (c *Config) SettingsOf(model sdk.WorkerStarterWorkerModel) ModelSettings {
	s := ModelSettings{Bootstrap: c.defaultBootstrap(), OS: OSLinux, CloneMode: CloneModeDefault}
	if e := c.ModelEntry(model); e != nil {
		copied := *e
		s.Entry = &copied
		s.Bootstrap, s.OS, s.CloneMode = c.entryBootstrap(copied), entryOS(copied), strings.TrimSpace(copied.CloneMode)
	}
	return s
}
