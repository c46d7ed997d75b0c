// Package configs holds the example configurations shipped with
// hatchery-vsphere and embeds them, so that the file operators read in the
// repository and the text `hatchery-vsphere config new` prints are the same
// bytes.
package configs

import _ "embed"

// Reference is hatchery.toml: every key with its default and meaning.
//
//go:embed hatchery.toml
var Reference []byte

// Minimal is minimal.toml: the required keys only.
//
//go:embed minimal.toml
var Minimal []byte

// Demo is demo.toml: the configuration of `hatchery-vsphere demo`, whose
// endpoint, secrets and URLs the demo overwrites with its simulators'.
//
//go:embed demo.toml
var Demo []byte
