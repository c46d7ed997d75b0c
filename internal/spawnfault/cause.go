package spawnfault

import (
	"context"
	"errors"
	"net"
	"net/url"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/quarantine"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// Cause is what a spawn failure points at.
type Cause int

const (
	// None: success, or elsewhere (capacity, IP, the job gone...).
	None Cause = iota
	// Template: the template, or a VM made from it.
	Template
	// VCenter: vCenter itself (down, the session lost, no answer).
	VCenter
)

// Quarantine maps the cause on the quarantine's: only the template counts.
func (c Cause) Quarantine() quarantine.Cause {
	if c == Template {
		return quarantine.CauseTemplate
	}
	return quarantine.CauseOther
}

// Classify classifies a spawn's error (nil: None). vCenter itself
// comes first (isVCenterDown): it fails the spawn whatever step it was at. Then a spawn whose own ctx ended (shutdown, the
// job gone) says nothing. Then the template: the guest of a VM made from
// it never became ready or could not launch the worker, or vCenter
// refused to clone it (MarkTemplate marks both); a clone refused for
// lack of resources is capacity, not the template. err's vCenter faults
// are read from their kinds: err must have been classified
// (vcenter.Classify) where it left the port.
func Classify(ctx context.Context, err error) Cause {
	var tf *templateFault
	switch {
	case err == nil:
		return None
	case isVCenterDown(err):
		return VCenter
	case ctx.Err() != nil:
		return None
	case !errors.As(err, &tf):
		return None
	}
	switch vctypes.KindOf(err) {
	case vctypes.FaultInsufficientResources, vctypes.FaultDuplicateName:
		return None
	}
	return Template
}

// isVCenterDown tells whether err is vCenter's own failure rather than an
// answer about the request: not connected, the session lost, vCenter's
// internal error (SystemError), the inventory unreadable for too long, or a
// transport error (no answer) other than a deadline.
func isVCenterDown(err error) bool {
	if errors.Is(err, vctypes.ErrNotConnected) || errors.Is(err, inventory.ErrStale) {
		return true
	}
	if k := vctypes.KindOf(err); k == vctypes.FaultNotAuthenticated || k == vctypes.FaultSystemError {
		return true
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	var ue *url.Error
	var ne net.Error
	return errors.As(err, &ue) || errors.As(err, &ne)
}

// templateFault marks a spawn failure that happened on the template or on
// a VM made from it: the clone itself, the guest's readiness, the worker's
// launch. Its text is the cause's.
type templateFault struct{ err error }

// Error is the cause's text.
func (e *templateFault) Error() string { return e.err.Error() }

// Unwrap returns the cause.
func (e *templateFault) Unwrap() error { return e.err }

// MarkTemplate wraps err (nil stays nil) as a failure on the template or on
// a VM made from it.
func MarkTemplate(err error) error {
	if err == nil {
		return nil
	}
	return &templateFault{err: err}
}

// IsVCenterFault tells whether err carries a fault vCenter answered (a
// failed task's fault or a SOAP fault): the operation's outcome is known.
// Anything else (the task wait timed out, ctx ended, the connection
// failed) leaves it unknown: the task may still run on vCenter. err must
// have been classified (vcenter.Classify) where it left the port.
func IsVCenterFault(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	return vctypes.KindOf(err) != vctypes.NoFault
}
