// Package vcheck owns `hatchery-vsphere vcenter check`: it proves, on the
// operator's vCenter and before the first job, each vCenter capability
// the hatchery relies on (docs/vcenter-check.md). It tries every
// capability for real, in a scratch folder of its own that it creates and
// removes, and reports one Result per capability and object: pass, fail
// (with the fault and what to change) or unsupported (vCenter, its
// licence or the template does not offer it). Support is learnt by
// trying, never from a list of versions. Everything it creates carries
// its record (Record), and its clean-up touches only what carries it.
package vcheck

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
)

// Status is a capability's outcome.
type Status string

// The outcomes of a capability.
const (
	// Pass: the capability worked.
	Pass Status = "pass"
	// Fail: it did not; the Result names the fault and the fix.
	Fail Status = "fail"
	// Unsupported: vCenter (or the template) answered that it does not
	// offer it. Counted as a failure when the configuration needs it
	// (Result.Needed).
	Unsupported Status = "unsupported"
)

// Result is one line of the check: a capability on one object.
type Result struct {
	// Capability is what was tried ("clone", "power on", …).
	Capability string `json:"capability"`
	// Object names what it was tried on (a template and placement, a
	// datastore, a configuration key).
	Object string `json:"object"`
	// Status is the outcome.
	Status Status `json:"status"`
	// Duration is how long the attempt took.
	Duration time.Duration `json:"-"`
	// Millis is Duration in milliseconds (for --json).
	Millis int64 `json:"ms"`
	// Fault is the kind of the vCenter fault of a failure (its
	// vctypes.FaultKind's name), "" when none.
	Fault string `json:"fault,omitempty"`
	// Detail says what happened (the error, or a measured figure).
	Detail string `json:"detail,omitempty"`
	// Fix is what to change, for a failure or a needed unsupported
	// capability.
	Fix string `json:"fix,omitempty"`
	// Needed: the configuration uses the capability, so unsupported
	// fails the check.
	Needed bool `json:"needed,omitempty"`
}

// Failed tells whether r fails the check: a failure, or a capability the
// configuration needs that vCenter does not offer.
func (r Result) Failed() bool {
	return r.Status == Fail || (r.Status == Unsupported && r.Needed)
}

// Report is a whole check: its results in order and what its clean-up
// removed.
type Report struct {
	// LatencyModel, when set, is a file the measured operation times are
	// written to in the latency model's form (internal/latencyfile).
	LatencyModel string
	// RunID names the run (its scratch folder and record).
	RunID string `json:"run"`
	// Results are the lines, in the order tried.
	Results []Result `json:"results"`
	// Kept is the scratch folder left for inspection (--keep), "" else.
	Kept string `json:"kept,omitempty"`
}

// Failed tells whether any result fails the check (exit code non-zero).
func (r *Report) Failed() bool {
	for _, x := range r.Results {
		if x.Failed() {
			return true
		}
	}
	return false
}

// WriteText writes one line per result: status, capability, object,
// time, then the detail, the fault and the fix on the lines below.
func (r *Report) WriteText(w io.Writer) {
	for _, x := range r.Results {
		fmt.Fprintf(w, "%-11s %-26s %-40s %8s\n", strings.ToUpper(string(x.Status)), x.Capability, x.Object, x.Duration.Round(time.Millisecond))
		if x.Detail != "" {
			fmt.Fprintf(w, "            %s\n", x.Detail)
		}
		if x.Fault != "" {
			fmt.Fprintf(w, "            fault: %s\n", x.Fault)
		}
		if x.Fix != "" && (x.Status != Pass) {
			fmt.Fprintf(w, "            fix: %s\n", x.Fix)
		}
	}
	if r.Kept != "" {
		fmt.Fprintf(w, "kept: scratch folder %s (remove it with `vcenter check --clean`)\n", r.Kept)
	}
	failed := 0
	for _, x := range r.Results {
		if x.Failed() {
			failed++
		}
	}
	if failed == 0 {
		fmt.Fprintf(w, "vcenter check OK (%d lines)\n", len(r.Results))
	} else {
		fmt.Fprintf(w, "vcenter check FAILED: %d of %d lines\n", failed, len(r.Results))
	}
}

// WriteJSON writes the report as one JSON document (for bug reports).
func (r *Report) WriteJSON(w io.Writer) error {
	for i := range r.Results {
		r.Results[i].Millis = r.Results[i].Duration.Milliseconds()
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Options shape a check.
type Options struct {
	// Keep leaves the scratch folder and its VMs (powered off) for
	// inspection.
	Keep bool
	// CleanOnly removes what earlier runs left and tries nothing else.
	CleanOnly bool
	// GuestReadyTimeout bounds the wait for a clone's guest to be ready
	// for guest operations (0: DefaultGuestReadyTimeout).
	GuestReadyTimeout time.Duration
	// NotifyTimeout bounds the wait for a change notification (0:
	// DefaultNotifyTimeout).
	NotifyTimeout time.Duration
	// LatencyModel, when set, is a file the measured operation times are
	// written to in the latency model's form (internal/latencyfile).
	LatencyModel string
	// RunID names the run ("": from the time); tests set it.
	RunID string
	// Now is the clock of the run ID ("": time.Now).
	Now func() time.Time
	// Logger receives one line per decision (nil: discard).
	Logger *slog.Logger
}

// DefaultGuestReadyTimeout bounds a guest's readiness: a template's guest
// boots and starts VMware Tools within minutes; five is the hatchery's
// own default readiness bound's order (docs/design.md#timeouts).
const DefaultGuestReadyTimeout = 5 * time.Minute

// DefaultNotifyTimeout bounds the wait for a change notification: vCenter
// reports a property change within seconds; a minute is far past that.
const DefaultNotifyTimeout = time.Minute

// Dialer connects to vCenter with the configuration's endpoint and
// credentials.
type Dialer func(ctx context.Context) (*vcenter.Client, error)

// Run checks cfg's vCenter: the session (dial), the clean-up of earlier
// runs' leftovers, then, unless o.CleanOnly, the topology and privileges
// and every capability in a scratch folder. It always returns a report;
// the connection it made is closed.
func Run(ctx context.Context, cfg *config.Config, dial Dialer, o Options) *Report {
	r := newRunner(cfg, o)
	defer r.close(ctx)
	if !r.session(ctx, dial) {
		return r.rep
	}
	r.cleanLeftovers(ctx)
	if o.CleanOnly {
		return r.rep
	}
	templates, ok := r.topology(ctx)
	if !ok {
		// Nothing is created on a configuration vCenter does not match.
		return r.rep
	}
	if !r.createScratch(ctx) {
		return r.rep
	}
	r.locks(ctx)
	for _, t := range templates {
		r.template(ctx, t)
	}
	r.removeScratch(ctx)
	r.releaseAddresses(ctx)
	if o.LatencyModel != "" {
		r.writeLatency()
	}
	return r.rep
}
