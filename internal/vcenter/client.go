package vcenter

import (
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// Client is the govmomi adapter behind the port, which is
// vctypes.Port (internal/vctypes/port.go: the interfaces beside the
// vocabulary, so that the port package imports no govmomi); the
// property paths it reads are vim.VMProperties and vim.VMWatchProperties.
var _ vctypes.Port = (*Client)(nil)

// Classify returns err with the kind of the vCenter fault it carries
// attached, so that the decision packages test it with errors.Is(err,
// vctypes.FaultX); it is vim.Classify, the one rule (internal/vcenter/vim,
// vocabulary.go), here where the adapter's errors are classified.
func Classify(err error) error { return vim.Classify(err) }

// FaultKindOf is the kind of the vCenter fault err carries
// (vim.FaultKindOf), vctypes.NoFault when it carries none.
func FaultKindOf(err error) vctypes.FaultKind { return vim.FaultKindOf(err) }
