// Package config owns the hatchery's TOML configuration, [hatchery.vsphere]:
// the types (Config, Flavor, Network, WorkerProvisioning, GuestCredential),
// the defaults (Default, the one place they are set), loading (Load,
// LoadFile, LoadFrom, LoadAndValidate: hostile-shape limits, unknown keys
// with suggestions, secrets from the environment and from files),
// validation (Config.Validate returns every problem with its TOML key path,
// as Errors), the key list (KeyPaths), bounded durations, redaction of
// secrets, the syntax of IP plans (ParseIPRange) and the reference files of
// `config new` (ReferenceConfig, MinimalConfig, DemoConfig).
//
// It does not own what the hatchery does with the settings: the IP pool,
// guest credentials resolution, capacity and the vCenter connection live in
// the packages that use them, nor the table of the upstream hatchery's
// keys and the reading of a CDS engine file's upstream forms
// (internal/config/upstream; what they become in a Config is
// config_upstream.go's). Its project imports are internal/modelref (the
// key entries are matched on), internal/config/upstream, sdk (worker
// models), sdk/hatchery (the common configuration), sdk/spawn (the
// model-command data) and configs (the shipped TOML files).
// docs/configuration.md documents every key.
package config
