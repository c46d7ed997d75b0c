package config

import (
	"iter"
	"slices"
	"strings"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// Placement is one [[placements]] entry (docs/configuration.md,
// "Placements"): where a clone may go (a resource pool or a cluster, one
// or more datastores, a folder, a network), its own limits and its
// weight. Without [[placements]] the top-level keys (resourcePoolString,
// datastoreString, folderString, networkString) are one placement named
// DefaultPlacementName: EffectivePlacements.
type Placement struct {
	// Name identifies the placement in logs, metrics, /mon/status, ctl and
	// the VM's record; unique, non-empty.
	Name string `mapstructure:"name" toml:"name" json:"name"`
	// ResourcePool is a resource pool's or a cluster's inventory path
	// (or name); empty: the datacenter's default pool.
	ResourcePool string `mapstructure:"resourcePool" toml:"resourcePool" json:"resourcePool"`
	// Datastores are the datastores clones of this placement may go to,
	// by name or path; the one with the most free space above the floor is
	// taken. Empty: the datacenter's default datastore.
	Datastores []string `mapstructure:"datastores" toml:"datastores" json:"datastores"`
	// Folder is the VM folder its clones go to; empty: folderString.
	Folder string `mapstructure:"folder" toml:"folder" json:"folder"`
	// Network is the network of its clones' NIC; empty: networkString.
	Network string `mapstructure:"network" toml:"network" json:"network"`
	// MaxCPUs, MaxMemoryMB and MaxVMs bound what the hatchery runs in this
	// placement (0: no own limit); the top-level maxCpus/maxMemoryMB and
	// maxWorker still bound the whole.
	MaxCPUs     int   `mapstructure:"maxCpus" toml:"maxCpus" json:"maxCpus"`
	MaxMemoryMB int64 `mapstructure:"maxMemoryMB" toml:"maxMemoryMB" json:"maxMemoryMB"`
	MaxVMs      int   `mapstructure:"maxVMs" toml:"maxVMs" json:"maxVMs"`
	// MaxConcurrentTasks bounds this placement's clones in flight (0: only
	// the top-level maxConcurrentTasks).
	MaxConcurrentTasks int `mapstructure:"maxConcurrentTasks" toml:"maxConcurrentTasks" json:"maxConcurrentTasks"`
	// Weight scales the placement's headroom when placements are compared
	// (0: 1).
	Weight int `mapstructure:"weight" toml:"weight" json:"weight"`
	// DatastoreFloorGB is the free space, in GB, below which none of its
	// datastores takes a clone (0: the top-level datastoreFloorGB).
	DatastoreFloorGB int64 `mapstructure:"datastoreFloorGB" toml:"datastoreFloorGB" json:"datastoreFloorGB"`
	// TemplateCopies name, per template, the copy of it that lives on this
	// placement's datastores and is cloned instead (a linked clone needs
	// its template's disks on the target datastore).
	TemplateCopies []TemplateCopy `mapstructure:"templateCopies" toml:"templateCopies" json:"templateCopies"`
}

// TemplateCopy is one [[placements.templateCopies]] entry: Copy is cloned
// instead of Template in its placement.
type TemplateCopy struct {
	Template string `mapstructure:"template" toml:"template" json:"template"`
	Copy     string `mapstructure:"copy" toml:"copy" json:"copy"`
}

// DefaultPlacementName is the name of the one placement the top-level
// keys make when [[placements]] is not set.
const DefaultPlacementName = "default"

// PlacementNameOf is the placement a VM's record names, as placements are
// counted and instant parents keyed (docs/placements.md): the record's
// placement, DefaultPlacementName when it names none (a worker cloned
// without [[placements]], a record of an earlier version). The one rule
// that makes an empty placement and DefaultPlacementName the same.
func PlacementNameOf(recorded string) string {
	if recorded == "" {
		return DefaultPlacementName
	}
	return recorded
}

// EffectivePlacements returns the placements clones go to: the
// [[placements]] entries, their empty folder, network and floor taken from
// the top-level keys; without entries, one placement named
// DefaultPlacementName made of resourcePoolString, datastoreString,
// folderString and networkString, limited by nothing of its own, so that a
// configuration written before [[placements]] behaves as it did.
func (c *Config) EffectivePlacements() []Placement {
	if len(c.Placements) == 0 {
		p := Placement{
			Name:             DefaultPlacementName,
			ResourcePool:     c.ResourcePoolString,
			Folder:           c.FolderString,
			Network:          c.NetworkString,
			DatastoreFloorGB: c.DatastoreFloorGB,
		}
		if c.DatastoreString != "" {
			p.Datastores = []string{c.DatastoreString}
		}
		return []Placement{p}
	}
	out := make([]Placement, len(c.Placements))
	for i, p := range c.Placements {
		if p.Folder == "" {
			p.Folder = c.FolderString
		}
		if p.Network == "" {
			p.Network = c.NetworkString
		}
		if p.DatastoreFloorGB == 0 {
			p.DatastoreFloorGB = c.DatastoreFloorGB
		}
		p.Datastores = append([]string(nil), p.Datastores...)
		p.TemplateCopies = append([]TemplateCopy(nil), p.TemplateCopies...)
		out[i] = p
	}
	return out
}

// EffectiveWeight is the placement's weight, 1 when unset.
func (p Placement) EffectiveWeight() int {
	if p.Weight <= 0 {
		return 1
	}
	return p.Weight
}

// CopyOf returns the template copy this placement clones instead of
// template, template itself when none is named.
func (p Placement) CopyOf(template string) string {
	for _, c := range p.TemplateCopies {
		if c.Template == template {
			return c.Copy
		}
	}
	return template
}

// Clone modes of a model entry (GuestCredential.CloneMode).
const (
	// CloneModeDefault ("" or "linked"): a linked clone of the template's
	// snapshot, a full clone when it has none (docs/flavors-and-capacity.md).
	CloneModeDefault = ""
	// CloneModeLinked is the same as CloneModeDefault, said explicitly.
	CloneModeLinked = "linked"
	// CloneModeInstant: an instant clone of a running parent VM the
	// hatchery keeps per template, placement and flavor
	// (docs/instant-clones.md).
	CloneModeInstant = "instant"
)

// CloneModes lists the allowed cloneMode values.
var CloneModes = []string{CloneModeDefault, CloneModeLinked, CloneModeInstant}

// IsInstant tells whether the entry's workers are instant clones.
func (g GuestCredential) IsInstant() bool {
	return strings.TrimSpace(g.CloneMode) == CloneModeInstant
}

// InstantEntries yields the entries (guestCredentials then models, the
// order Validate reads them) whose cloneMode is instant, with their key
// path: the models an instant parent is kept for (internal/instantparent).
func (c *Config) InstantEntries() iter.Seq2[string, GuestCredential] {
	return func(yield func(string, GuestCredential) bool) {
		for key, g := range c.credentialEntries() {
			if g.IsInstant() && !yield(key, g) {
				return
			}
		}
	}
}

// CloneModeOf is the clone mode of model: its entry's, else the default.
func (c *Config) CloneModeOf(model sdk.WorkerStarterWorkerModel) string {
	if e := c.ModelEntry(model); e != nil {
		return strings.TrimSpace(e.CloneMode)
	}
	return CloneModeDefault
}

// validateCloneMode checks each entry's cloneMode: a known value, and
// instant only for a Linux model started through cloud-init's guestinfo.
// An instant clone never boots: a guest-operations model's and a Windows
// model's identity (hostname, address) comes from a customization applied
// at boot, which the child never goes through (docs/instant-clones.md).
func (c *Config) validateCloneMode(es *Errors) {
	for key, g := range c.credentialEntries() {
		m := strings.TrimSpace(g.CloneMode)
		switch {
		case !slices.Contains(CloneModes, m):
			es.add(key+".cloneMode", "%q is not a clone mode (allowed: %q, %q, or empty for linked)", m, CloneModeLinked, CloneModeInstant)
		case m != CloneModeInstant:
		case entryOS(g) == OSWindows:
			es.add(key+".cloneMode", "instant is refused for a windows model: its identity comes from sysprep at boot, and an instant clone never boots (use linked)")
		case c.entryBootstrap(g) != BootstrapCloudInit:
			es.add(key+".cloneMode", "instant needs bootstrap %q: a %q model's identity comes from a customization at boot, and an instant clone never boots; the child reads its identity from guestinfo (docs/instant-clones.md)", BootstrapCloudInit, c.entryBootstrap(g))
		}
	}
}
