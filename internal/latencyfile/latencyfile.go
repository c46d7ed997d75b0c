// Package latencyfile owns the file form of the latency model
// (docs/architecture.md, "Latency model"): the real durations of vCenter
// operations by operation name, which `vcenter check --latency-model
// FILE` writes from what it measured on an operator's vCenter and which
// `make bench-latency LATENCY_MODEL=FILE` plays on the simulator in place
// of the model's own figures (internal/vcsimtest, UseLatencyFile). A
// TOML document of [[latency]] tables, each an operation and its
// duration. Imports the standard library and BurntSushi/toml only, so
// that the production binary writes it without linking the simulator.
package latencyfile

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/BurntSushi/toml"
)

// The operations of the model a file may carry; the names are the
// model's own (internal/vcsimtest's Op constants, checked equal there).
const (
	OpFullClone         = "full clone"
	OpLinkedClone       = "linked clone"
	OpInstantCloneTask  = "instant clone (task)"
	OpInstantReidentify = "instant clone -> guest ready"
	OpGuestReady        = "power on -> guest ready"
	OpResume            = "resume"
	OpPowerOn           = "power on (task)"
	OpReconfigure       = "reconfigure"
	OpRename            = "rename"
)

// Ops are the operations a file may carry.
var Ops = []string{OpFullClone, OpLinkedClone, OpInstantCloneTask, OpInstantReidentify, OpGuestReady, OpResume, OpPowerOn, OpReconfigure, OpRename}

// Entry is one measured operation.
type Entry struct {
	// Op is the operation (one of Ops).
	Op string `toml:"op"`
	// Real is its duration as measured, a Go duration ("52s", "1.2s").
	Real string `toml:"real"`
	// Note says where the figure comes from.
	Note string `toml:"note,omitempty"`
}

// File is the document.
type File struct {
	// Source says what measured it (the vCenter, the time).
	Source string `toml:"source,omitempty"`
	// Latency are the operations measured.
	Latency []Entry `toml:"latency"`
}

// Write writes f to path (mode 0644: durations, no secret).
func Write(path string, f File) error {
	out, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write latency model %s: %w", path, err)
	}
	if err := encode(out, f); err != nil {
		_ = out.Close()
		return fmt.Errorf("write latency model %s: %w", path, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("write latency model %s: %w", path, err)
	}
	return nil
}

func encode(w io.Writer, f File) error {
	if _, err := fmt.Fprintln(w, "# latency model of hatchery-vsphere (docs/vcenter-check.md#latency-model): make bench-latency LATENCY_MODEL=FILE"); err != nil {
		return err
	}
	return toml.NewEncoder(w).Encode(f)
}

// Read reads the file at path: the duration of each operation it names.
// An unknown operation, a duration that does not parse or is not
// positive, or an operation given twice is an error naming it.
func Read(path string) (map[string]time.Duration, error) {
	var f File
	md, err := toml.DecodeFile(path, &f)
	if err != nil {
		return nil, fmt.Errorf("read latency model %s: %w", path, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		return nil, fmt.Errorf("read latency model %s: unknown key %s", path, und[0])
	}
	known := map[string]bool{}
	for _, op := range Ops {
		known[op] = true
	}
	out := map[string]time.Duration{}
	for i, e := range f.Latency {
		if !known[e.Op] {
			return nil, fmt.Errorf("read latency model %s: latency[%d]: unknown operation %q", path, i, e.Op)
		}
		if _, dup := out[e.Op]; dup {
			return nil, fmt.Errorf("read latency model %s: latency[%d]: operation %q given twice", path, i, e.Op)
		}
		d, err := time.ParseDuration(e.Real)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("read latency model %s: latency[%d] (%s): real %q: a positive duration such as \"52s\"", path, i, e.Op, e.Real)
		}
		out[e.Op] = d
	}
	return out, nil
}
