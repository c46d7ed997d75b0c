package config

import (
	"fmt"
	"strings"

	"github.com/cds-contrib/hatchery-vsphere/internal/config/upstream"
)

// KeyPrefix is the TOML table holding this hatchery's configuration; every
// key path in a FieldError starts with it. It is upstream's table of a CDS
// engine file, kept (internal/config/upstream).
const KeyPrefix = upstream.KeyPrefix

// FieldError is one configuration problem: the full TOML key path
// ("hatchery.vsphere.networks[1].iprange") and what is wrong with it, with
// what is allowed. Problem never holds a secret value.
type FieldError struct {
	Key     string
	Problem string
}

// Error returns "key: problem".
func (e FieldError) Error() string { return e.Key + ": " + e.Problem }

// Errors is every problem found in a configuration, in the order of
// the keys checked. It is returned as an error by Load, Validate and
// LoadAndValidate; use errors.As to list the problems one by one.
type Errors []FieldError

// Error lists the problems, one "key: problem" per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// add records a problem for key (relative to KeyPrefix).
func (es *Errors) add(key, format string, args ...any) {
	*es = append(*es, FieldError{Key: KeyPrefix + "." + key, Problem: fmt.Sprintf(format, args...)})
}

// err returns es as an error, or nil when there is no problem.
func (es Errors) err() error {
	if len(es) == 0 {
		return nil
	}
	return es
}

// scrub replaces every non-empty secret in es with "***", a last line of
// defence should a message ever quote a value.
func (es Errors) scrub(secrets []string) Errors {
	for i := range es {
		es[i].Key = scrubString(es[i].Key, secrets)
		es[i].Problem = scrubString(es[i].Problem, secrets)
	}
	return es
}

// minScrubLen is the shortest secret scrubbed from messages: shorter ones
// would turn every message into noise (and are rejected nowhere else, so a
// message must simply never quote a value, which is the first defence).
const minScrubLen = 4

// scrubString replaces every secret at least minScrubLen long in s with "***".
func scrubString(s string, secrets []string) string {
	for _, sec := range secrets {
		if len(sec) >= minScrubLen && strings.Contains(s, sec) {
			s = strings.ReplaceAll(s, sec, "***")
		}
	}
	return s
}
