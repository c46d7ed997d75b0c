package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// Environment variables that override the secrets of the file, so that the
// file can be world-readable and the secrets kept in a root-only
// EnvironmentFile (see configs/hatchery-vsphere.service). A variable set to a
// non-empty value wins over the file.
const (
	EnvPassword      = "CDS_HATCHERY_VSPHERE_PASSWORD"        // hatchery.vsphere.password
	EnvAPIToken      = "CDS_HATCHERY_VSPHERE_API_TOKEN"       // …commonConfiguration.api.token
	EnvAPITokenV2    = "CDS_HATCHERY_VSPHERE_API_TOKENV2"     // …commonConfiguration.api.tokenV2
	EnvRSAPrivateKey = "CDS_HATCHERY_VSPHERE_RSA_PRIVATE_KEY" // …commonConfiguration.rsaPrivateKey (PEM text)
)

// LoadOptions tune LoadFile and LoadFrom.
type LoadOptions struct {
	// LookupEnv reads the secret overrides (Env* constants); nil means
	// os.LookupEnv. Tests pass a map-backed function instead of setting the
	// process environment.
	LookupEnv func(key string) (string, bool)
}

func (o LoadOptions) lookupEnv() func(string) (string, bool) {
	if o.LookupEnv != nil {
		return o.LookupEnv
	}
	return os.LookupEnv
}

// Load reads the TOML file at path, with secrets overridable from the
// process environment. See LoadFrom; the result is not validated (use
// LoadAndValidate or Validate).
func Load(path string) (*Config, error) {
	return LoadFile(path, LoadOptions{})
}

// LoadFile is Load with options.
func LoadFile(path string, o LoadOptions) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open config: %w", err)
	}
	defer f.Close()
	cfg, err := LoadFrom(f, o)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// LoadFrom decodes a TOML document whose [hatchery.vsphere] table is
// the configuration:
//   - Default is applied first; keys present in the file win;
//   - flavors are accepted as [[hatchery.vsphere.flavors]] name=… or as
//     [hatchery.vsphere.flavors.NAME] and normalised into Flavors in file
//     order with lower-cased names (defaultFlavor and workerProvisioning
//     flavors are lower-cased too);
//   - guestCredentials and its alias models are both kept as written (see
//     AllGuestCredentials);
//   - the Env* variables override the secrets.
//
// A key the configuration does not know is an error naming its full path,
// with a suggestion when it looks like a typo; all of them are returned
// together as Errors. A syntax error or a value of the wrong type is
// an error naming the key. No error ever quotes a secret.
func LoadFrom(r io.Reader, o LoadOptions) (*Config, error) {
	cfg, problems, err := decodeConfig(r, o)
	if err != nil {
		return nil, err
	}
	if len(problems) > 0 {
		return nil, problems
	}
	return cfg, nil
}

// LoadAndValidate loads the file at path and validates it, returning every
// problem at once: unknown keys and Validate's findings together (a syntax
// or type error stops before validation).
func LoadAndValidate(path string, o LoadOptions) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open config: %w", err)
	}
	defer f.Close()
	cfg, problems, err := decodeConfig(f, o)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	var verrs Errors
	if err := cfg.Validate(); err != nil && !errors.As(err, &verrs) {
		return nil, err
	}
	if all := append(problems, verrs...); len(all) > 0 {
		return nil, all
	}
	return cfg, nil
}

// fileRoot is the document: only [hatchery.vsphere] is read.
type fileRoot struct {
	Hatchery struct {
		VSphere vsphereTable `toml:"vsphere"`
	} `toml:"hatchery"`
}

// vsphereTable is Config with flavors kept raw, because they come in
// two forms.
type vsphereTable struct {
	Config
	RawFlavors toml.Primitive `toml:"flavors"`
}

// decodeConfig returns the configuration and the unknown keys, or an error
// that stops everything (unreadable, not TOML, wrong type, no table).
func decodeConfig(r io.Reader, o LoadOptions) (*Config, Errors, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxConfigBytes+1))
	if err != nil {
		return nil, nil, fmt.Errorf("read config: %w", err)
	}
	if len(data) > maxConfigBytes {
		return nil, nil, fmt.Errorf("config is larger than %d bytes (a configuration is a few KB)", maxConfigBytes)
	}
	if err := checkShape(data, maxConfigNesting, maxConfigItems); err != nil {
		return nil, nil, err
	}
	external := readExternalSecrets(o.lookupEnv())
	envSecrets := external.list()

	var root fileRoot
	root.Hatchery.VSphere.Config = Default()
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(&root)
	if err != nil {
		return nil, nil, decodeTypeErrors(data, err, envSecrets)
	}
	if !md.IsDefined("hatchery", "vsphere") {
		return nil, nil, errors.New("no [hatchery.vsphere] table: the configuration must be under [hatchery.vsphere] (print a reference with `hatchery-vsphere config new`)")
	}
	cfg := root.Hatchery.VSphere.Config
	// A CDS engine file: the keys only upstream has, its other sections
	// and placeholders (internal/config/upstream, config_upstream.go).
	up, err := decodeUpstream(data, envSecrets)
	if err != nil {
		return nil, nil, err
	}

	mapForm, err := decodeFlavors(md, root.Hatchery.VSphere.RawFlavors, &cfg)
	if err != nil {
		return nil, nil, errors.New(scrubString(err.Error(), envSecrets))
	}
	undecoded := up.FilterUnknown(md)
	applyUpstream(up, md, &cfg)
	cfg.Normalize()
	external.apply(&cfg)

	problems := append(unknownKeys(md, undecoded, mapForm), caseDuplicates(md)...)
	problems = append(problems, external.problems...)
	return &cfg, problems.scrub(append(envSecrets, cfg.secrets()...)), nil
}

// decodeFlavors fills cfg.Flavors from either form and reports whether the
// map form was used.
func decodeFlavors(md toml.MetaData, raw toml.Primitive, cfg *Config) (bool, error) {
	cfg.Flavors = nil
	key := []string{"hatchery", "vsphere", flavorsKey}
	if !md.IsDefined(key...) {
		return false, nil
	}
	switch t := md.Type(key...); t {
	case "ArrayHash", "Hash", "":
	default:
		return false, fmt.Errorf("%s.%s: is %s, want [[%s.%s]] entries or [%s.%s.NAME] tables", KeyPrefix, flavorsKey, strings.ToLower(t), KeyPrefix, flavorsKey, KeyPrefix, flavorsKey)
	}
	if md.Type(key...) == "ArrayHash" {
		var list []Flavor
		if err := md.PrimitiveDecode(raw, &list); err != nil {
			return false, flavorDecodeError(err)
		}
		for i := range list {
			list[i].Name = FlavorName(list[i].Name)
		}
		cfg.Flavors = list
		return false, nil
	}
	var byName map[string]Flavor
	if err := md.PrimitiveDecode(raw, &byName); err != nil {
		return true, flavorDecodeError(err)
	}
	// File order, from the metadata (a Go map has none).
	prefix := KeyPrefix + "." + flavorsKey + "."
	for _, k := range md.Keys() {
		if len(k) != 4 || k[0] != "hatchery" || k[1] != "vsphere" || k[2] != flavorsKey {
			continue
		}
		name := k[3]
		f, ok := byName[name]
		if !ok {
			continue
		}
		if f.Name != "" && !strings.EqualFold(f.Name, name) {
			return true, fmt.Errorf("%s%s.name: %q differs from the table name %q (in the [%s%s] form the name is the table's; drop name or make it equal)", prefix, name, f.Name, name, prefix, name)
		}
		f.Name = FlavorName(name)
		cfg.Flavors = append(cfg.Flavors, f)
		delete(byName, name)
	}
	return true, nil
}

// flavorDecodeError names the flavor key a decode error is about.
func flavorDecodeError(err error) error {
	return fmt.Errorf("%w (flavors are [[%s.%s]] entries with name, cpus, memoryMB, diskSizeGB, or [%s.%s.NAME] tables)", decodeError(err, nil), KeyPrefix, flavorsKey, KeyPrefix, flavorsKey)
}

// secretKeys are the leaf names whose values must never be quoted.
var secretKeys = map[string]bool{"password": true, "token": true, "tokenV2": true, "rsaPrivateKey": true}

// typeErrorRE matches BurntSushi/toml's decode (type) errors, which are
// plain errors: `toml: line 2 (last key "a.b"): incompatible types: …`.
var typeErrorRE = regexp.MustCompile(`^toml: (?:line (\d+) )?\(last key "(.*)"\): (.*)$`)

// decodeError rewrites a TOML error as "line N: key: problem", hiding the
// message when the key holds a secret (the lexer quotes what it found).
func decodeError(err error, secrets []string) error {
	var line, key, msg string
	var pe toml.ParseError
	if errors.As(err, &pe) {
		line, key, msg = strconv.Itoa(pe.Position.Line), pe.LastKey, pe.Message
	} else if m := typeErrorRE.FindStringSubmatch(err.Error()); m != nil {
		line, key, msg = m[1], m[2], m[3]
	} else {
		return errors.New(scrubString(strings.TrimPrefix(err.Error(), "toml: "), secrets))
	}
	leaf := key
	if i := strings.LastIndexByte(key, '.'); i >= 0 {
		leaf = key[i+1:]
	}
	if secretKeys[leaf] {
		msg = "invalid value (not shown: the key holds a secret; a secret is a quoted TOML string)"
	}
	msg = scrubString(msg, secrets)
	var b strings.Builder
	if line != "" {
		b.WriteString("line " + line + ": ")
	}
	if key != "" {
		b.WriteString(key + ": ")
	}
	b.WriteString(msg)
	return errors.New(b.String())
}

// unknownKeys reports the keys of the file nothing decoded (undecoded: the
// metadata's, less upstream's keys and other services' sections), each
// once (a misspelt table is reported, not every key inside it).
func unknownKeys(md toml.MetaData, undecoded []toml.Key, flavorsMapForm bool) Errors {
	tree := configKeys()
	tree.addUpstream()
	var out Errors
	reported := map[string]bool{}
	for _, k := range undecoded {
		path := k.String()
		skip := false
		for i := 1; i < len(k) && !skip; i++ {
			skip = reported[toml.Key(k[:i]).String()]
		}
		if skip {
			continue
		}
		reported[path] = true
		parent, leaf := "", k[len(k)-1]
		if len(k) > 1 {
			parent = toml.Key(k[:len(k)-1]).String()
		}
		if flavorsMapForm && len(k) == 5 && strings.HasPrefix(path, KeyPrefix+"."+flavorsKey+".") {
			parent = KeyPrefix + "." + flavorsKey
		}
		problem := "unknown key"
		if s := tree.suggest(parent, leaf); s != "" && s != leaf {
			problem += fmt.Sprintf(" (did you mean %s?)", s)
		} else if !strings.HasPrefix(path+".", KeyPrefix+".") {
			problem += " (this file holds only [" + KeyPrefix + "])"
		} else {
			problem += " (see `hatchery-vsphere config new` for every key)"
		}
		out = append(out, FieldError{Key: path, Problem: problem})
	}
	return out
}
