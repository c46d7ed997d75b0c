package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestValidatePlacements: each problem of [[placements]] is reported with
// its key path, one case per problem; a valid set is accepted.
func TestValidatePlacements(t *testing.T) {
	t.Parallel()
	two := func() []Placement {
		return []Placement{
			{Name: "a", ResourcePool: "/dc/host/cluster-a", Datastores: []string{"ds1", "ds2"}, Weight: 2,
				TemplateCopies: []TemplateCopy{{Template: "debian12", Copy: "debian12-a"}}},
			{Name: "b", ResourcePool: "/dc/host/cluster-b", Datastores: []string{"ds3"}},
		}
	}
	for _, tc := range []struct {
		name string
		edit func(c *Config)
		want string // "" : valid
	}{
		{"valid", func(c *Config) {}, ""},
		{"no placements, old keys", func(c *Config) {
			c.Placements = nil
			c.ResourcePoolString, c.DatastoreString = "/dc/host/c/Resources", "ds1"
		}, ""},
		{"negative top-level floor", func(c *Config) { c.DatastoreFloorGB = -1 }, "hatchery.vsphere.datastoreFloorGB: -1: must be 0"},
		{"empty name", func(c *Config) { c.Placements[1].Name = "" }, "hatchery.vsphere.placements[1].name: required"},
		{"name with spaces", func(c *Config) { c.Placements[1].Name = " b" }, "hatchery.vsphere.placements[1].name: \" b\" has leading or trailing spaces"},
		{"duplicate name", func(c *Config) { c.Placements[1].Name = "a" }, "hatchery.vsphere.placements[1].name: duplicate of placements[0]"},
		{"negative maxCpus", func(c *Config) { c.Placements[0].MaxCPUs = -1 }, "hatchery.vsphere.placements[0].maxCpus: -1: must be 0"},
		{"negative maxMemoryMB", func(c *Config) { c.Placements[0].MaxMemoryMB = -1 }, "hatchery.vsphere.placements[0].maxMemoryMB: -1"},
		{"negative maxVMs", func(c *Config) { c.Placements[0].MaxVMs = -2 }, "hatchery.vsphere.placements[0].maxVMs: -2"},
		{"negative maxConcurrentTasks", func(c *Config) { c.Placements[1].MaxConcurrentTasks = -1 }, "hatchery.vsphere.placements[1].maxConcurrentTasks: -1"},
		{"negative weight", func(c *Config) { c.Placements[1].Weight = -1 }, "hatchery.vsphere.placements[1].weight: -1"},
		{"negative floor", func(c *Config) { c.Placements[1].DatastoreFloorGB = -5 }, "hatchery.vsphere.placements[1].datastoreFloorGB: -5"},
		{"empty datastore", func(c *Config) { c.Placements[0].Datastores[1] = " " }, "hatchery.vsphere.placements[0].datastores[1]: empty"},
		{"repeated datastore", func(c *Config) { c.Placements[0].Datastores[1] = "ds1" }, "hatchery.vsphere.placements[0].datastores[1]: \"ds1\" repeats datastores[0]"},
		{"copy without template", func(c *Config) { c.Placements[0].TemplateCopies[0].Template = "" }, "hatchery.vsphere.placements[0].templateCopies[0].template: required"},
		{"template without copy", func(c *Config) { c.Placements[0].TemplateCopies[0].Copy = "" }, "hatchery.vsphere.placements[0].templateCopies[0].copy: required"},
		{"two copies of a template", func(c *Config) {
			c.Placements[0].TemplateCopies = append(c.Placements[0].TemplateCopies, TemplateCopy{Template: "debian12", Copy: "other"})
		}, "hatchery.vsphere.placements[0].templateCopies[1].template: \"debian12\" already has a copy in templateCopies[0]"},
		{"resourcePoolString with placements", func(c *Config) { c.ResourcePoolString = "/dc/host/c/Resources" },
			"hatchery.vsphere.resourcePoolString: \"/dc/host/c/Resources\" is set together with placements"},
		{"datastoreString with placements", func(c *Config) { c.DatastoreString = "ds1" },
			"hatchery.vsphere.datastoreString: \"ds1\" is set together with placements"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			c.Placements = two()
			tc.edit(&c)
			err := c.Validate()
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Len(t, err.(Errors), 1, "one problem: %v", err)
		})
	}
}

// TestOldConfigurationLoadsUnchangedAsTheDefaultPlacement: a configuration
// written before [[placements]] (the shipped minimal one, with the
// placement keys of earlier versions added) loads, validates and is one
// placement named default made of its top-level keys, without limits of
// its own.
func TestOldConfigurationLoadsUnchangedAsTheDefaultPlacement(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "..", "configs", "minimal.toml"))
	require.NoError(t, err)
	old := strings.Replace(string(doc), `datacenterString = "datacenter1"`, `datacenterString = "datacenter1"
  resourcePoolString = "/datacenter1/host/cluster1/Resources"
  datastoreString = "ds-1"
  folderString = "/datacenter1/vm/ci"
  networkString = "ci-net"`, 1)
	require.NotEqual(t, string(doc), old)
	cfg, err := LoadFrom(strings.NewReader(old), secretEnv())
	require.NoError(t, err)
	require.NoError(t, cfg.Validate())
	assert.Empty(t, cfg.Placements)
	assert.Equal(t, []Placement{{
		Name: DefaultPlacementName, ResourcePool: "/datacenter1/host/cluster1/Resources", Datastores: []string{"ds-1"},
		Folder: "/datacenter1/vm/ci", Network: "ci-net",
	}}, cfg.EffectivePlacements())
}

// TestPlacementsAreNotLive: a change of [[placements]] (or of the floor)
// is refused by a reload, naming the key: a restart applies it.
func TestPlacementsAreNotLive(t *testing.T) {
	t.Parallel()
	old := validConfig()
	old.Placements = []Placement{{Name: "a"}, {Name: "b"}}
	n := validConfig()
	n.Placements = []Placement{{Name: "a"}, {Name: "b", MaxVMs: 3}}
	n.DatastoreFloorGB = 10
	keys := ChangedKeys(&old, &n)
	assert.Equal(t, []string{KeyPrefix + ".datastoreFloorGB", KeyPrefix + ".placements[1].maxVMs"}, keys)
	for _, k := range keys {
		assert.False(t, LiveKey(k), k)
	}
	n.Placements = append(n.Placements, Placement{Name: "c"})
	assert.Contains(t, ChangedKeys(&old, &n), KeyPrefix+".placements")
	assert.False(t, LiveKey(KeyPrefix+".placements"))
}

// TestPlacementNameOf: a record naming no placement (a worker cloned
// without [[placements]]) and a record naming the default placement (an
// instant parent's key) are in the same placement; any other name is
// kept.
func TestPlacementNameOf(t *testing.T) {
	for in, want := range map[string]string{
		"":                   DefaultPlacementName,
		DefaultPlacementName: DefaultPlacementName,
		"a":                  "a",
	} {
		if got := PlacementNameOf(in); got != want {
			t.Errorf("PlacementNameOf(%q) = %q, want %q", in, got, want)
		}
	}
}
