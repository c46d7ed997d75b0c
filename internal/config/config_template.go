package config

import "github.com/cds-contrib/hatchery-vsphere/configs"

// ReferenceConfig returns configs/hatchery.toml, the commented reference of
// every key (what `hatchery-vsphere config new` prints).
func ReferenceConfig() []byte { return append([]byte(nil), configs.Reference...) }

// MinimalConfig returns configs/minimal.toml.
func MinimalConfig() []byte { return append([]byte(nil), configs.Minimal...) }

// DemoConfig returns configs/demo.toml, the configuration of the in-process
// demo; the demo overwrites its endpoint, secrets and URLs.
func DemoConfig() []byte { return append([]byte(nil), configs.Demo...) }
