package config

import (
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/modelref"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// Bootstrap modes: how a worker is started inside its VM
// (docs/configuration.md, "Bootstrap").
const (
	// BootstrapGuestOps starts the worker through VMware guest operations,
	// signed in with the model's guest credentials (the default).
	BootstrapGuestOps = "guestops"
	// BootstrapCloudInit hands the worker to cloud-init through the VM's
	// guestinfo.metadata / guestinfo.userdata properties: no guest
	// credentials, no guest operations (docs/cloud-init.md).
	BootstrapCloudInit = "cloud-init"
)

// BootstrapModes lists the allowed bootstrap values.
var BootstrapModes = []string{BootstrapGuestOps, BootstrapCloudInit}

// FinishedWorkerGracePeriodDuration is finishedWorkerGracePeriod (seconds),
// converted without overflow: a negative value gives no grace and a value
// above MaxFinishedWorkerGracePeriod gives that bound (Validate refuses
// both).
func (c *Config) FinishedWorkerGracePeriodDuration() time.Duration {
	if c.FinishedWorkerGracePeriod <= 0 {
		return 0
	}
	return boundedDuration(c.FinishedWorkerGracePeriod, time.Second, 0, MaxFinishedWorkerGracePeriod)
}

// entryBootstrap is the bootstrap mode of a guestCredentials/models entry:
// its own, else defaultBootstrap, else guestops.
func (c *Config) entryBootstrap(g GuestCredential) string {
	if m := strings.TrimSpace(g.Bootstrap); m != "" {
		return m
	}
	return c.defaultBootstrap()
}

func (c *Config) defaultBootstrap() string {
	if m := strings.TrimSpace(c.DefaultBootstrap); m != "" {
		return m
	}
	return BootstrapGuestOps
}

// Matches reports whether entry c is the one of model: the entry names
// the model's key (modelref.KeyOf: the model path for V1, ModelPath; the
// template for V2, ModelVMWare).
func (c GuestCredential) Matches(model sdk.WorkerStarterWorkerModel) bool {
	return modelref.KeyOf(model).NamedBy(c.ModelPath, c.ModelVMWare)
}

// ModelEntry is the guestCredentials entry of model, else its models
// (alias) entry, else nil: the first naming the model's key (Matches).
func (c *Config) ModelEntry(model sdk.WorkerStarterWorkerModel) *GuestCredential {
	key := modelref.KeyOf(model)
	for _, list := range [][]GuestCredential{c.GuestCredentials, c.Models} {
		for i := range list {
			if key.NamedBy(list[i].ModelPath, list[i].ModelVMWare) {
				return &list[i]
			}
		}
	}
	return nil
}

// BootstrapOf is the bootstrap mode of model: its entry's, else
// defaultBootstrap.
func (c *Config) BootstrapOf(model sdk.WorkerStarterWorkerModel) string {
	if e := c.ModelEntry(model); e != nil {
		return c.entryBootstrap(*e)
	}
	return c.defaultBootstrap()
}

// poolBootstrap is the bootstrap mode of a warm-pool entry's model: the
// mode of the guestCredentials/models entry of the same model, else
// defaultBootstrap.
func (c *Config) poolBootstrap(w WorkerProvisioning) string {
	for _, list := range [][]GuestCredential{c.GuestCredentials, c.Models} {
		for _, g := range list {
			if (w.ModelVMWare != "" && g.ModelVMWare == w.ModelVMWare) || (w.ModelPath != "" && g.ModelPath == w.ModelPath) {
				return c.entryBootstrap(g)
			}
		}
	}
	return c.defaultBootstrap()
}

// validateBootstrap checks defaultBootstrap, every entry's bootstrap and
// finishedWorkerGracePeriod.
func (c *Config) validateBootstrap(es *Errors) {
	if m := strings.TrimSpace(c.DefaultBootstrap); m != "" && !slices.Contains(BootstrapModes, m) {
		es.add("defaultBootstrap", "%q is not a bootstrap mode (allowed: %q, %q)", m, BootstrapGuestOps, BootstrapCloudInit)
	}
	for key, g := range c.credentialEntries() {
		if m := strings.TrimSpace(g.Bootstrap); m != "" && !slices.Contains(BootstrapModes, m) {
			es.add(key+".bootstrap", "%q is not a bootstrap mode (allowed: %q, %q, or empty for defaultBootstrap)", m, BootstrapGuestOps, BootstrapCloudInit)
		}
	}
	if v := c.FinishedWorkerGracePeriod; v < 0 || v > MaxFinishedWorkerGracePeriod {
		es.add("finishedWorkerGracePeriod", "%d is out of range: must be >= 0 (seconds; 0 destroys a finished worker's vm at the next cleanup pass) and at most %d (allowed: 0-%d seconds)", v, MaxFinishedWorkerGracePeriod, MaxFinishedWorkerGracePeriod)
	}
}

// needsGuestAccount tells whether an entry must name a guest account: only
// when its model starts through guest operations.
func (c *Config) needsGuestAccount(g GuestCredential) bool {
	return c.entryBootstrap(g) == BootstrapGuestOps
}

// BootstrapNotes are the lines `config check` prints about bootstrap modes
// after a valid configuration: which entries start their workers through
// cloud-init and so need no guest credentials. No line holds a secret.
func (c *Config) BootstrapNotes() []string {
	var notes []string
	if c.defaultBootstrap() == BootstrapCloudInit {
		notes = append(notes, KeyPrefix+".defaultBootstrap: models without an entry start through cloud-init (guestinfo): no guest credentials needed")
	}
	for key, g := range c.credentialEntries() {
		if c.entryBootstrap(g) != BootstrapCloudInit {
			continue
		}
		model := g.ModelVMWare
		if model == "" {
			model = g.ModelPath
		}
		note := fmt.Sprintf("%s.%s (model %q): bootstrap cloud-init: no guest credentials needed", KeyPrefix, key, model)
		if g.Username != "" || g.Password != "" {
			note += "; its username/password are not used"
		}
		notes = append(notes, note)
	}
	return notes
}

// credentialEntries yields every guest account entry with its key path,
// guestCredentials[i] then models[i] (the alias): the one order in which
// Validate, the notes and the lookups read them.
func (c *Config) credentialEntries() iter.Seq2[string, GuestCredential] {
	return func(yield func(string, GuestCredential) bool) {
		for _, list := range []struct {
			key   string
			creds []GuestCredential
		}{{"guestCredentials", c.GuestCredentials}, {"models", c.Models}} {
			for i, g := range list.creds {
				if !yield(fmt.Sprintf("%s[%d]", list.key, i), g) {
					return
				}
			}
		}
	}
}
