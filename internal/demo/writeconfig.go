package demo

import (
	"bytes"
	"fmt"
	"os"

	"github.com/BurntSushi/toml"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
)

// writeConfigHeader opens the file WriteConfig writes.
const writeConfigHeader = `# hatchery-vsphere: configuration of a running demo's simulators, written by
# ` + "`demo --write-config`" + `. The vCenter and CDS API credentials below are the
# simulators' throwaway ones, valid while that demo runs. With it:
#   hatchery-vsphere config check --config FILE --online
#   hatchery-vsphere vcenter check --config FILE
#   hatchery-vsphere start --config FILE   (a second instance of the demo's hatchery)
# (docs/vcenter-check.md, docs/operations.md)

`

// WriteConfig writes cfg, the configuration of the running demo's
// simulators (Sims.Config), as a TOML file at path (mode 0600: it holds
// the simulators' throwaway credentials and a fresh RSA key), which
// config.LoadAndValidate reads back as cfg.
func WriteConfig(path string, cfg *config.Config) error {
	var b bytes.Buffer
	b.WriteString(writeConfigHeader)
	// The flavors are decoded by hand (either TOML form, config_load.go):
	// the struct's encoding leaves them out, so they are added as the
	// list form.
	var keys bytes.Buffer
	if err := toml.NewEncoder(&keys).Encode(cfg); err != nil {
		return fmt.Errorf("demo: encode the configuration: %w", err)
	}
	m := map[string]any{}
	if _, err := toml.Decode(keys.String(), &m); err != nil {
		return fmt.Errorf("demo: encode the configuration: %w", err)
	}
	m["flavors"] = cfg.Flavors
	if err := toml.NewEncoder(&b).Encode(map[string]any{"hatchery": map[string]any{"vsphere": m}}); err != nil {
		return fmt.Errorf("demo: encode the configuration: %w", err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		return fmt.Errorf("demo: write the configuration: %w", err)
	}
	return nil
}
