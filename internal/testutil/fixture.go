package testutil

import (
	"io"
	"log/slog"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// The fixture kit: what the decision packages' unit tests (admission,
// warmpool, custody, vsphere) each wrote for themselves — the hatchery's
// name, a fixed instant, a VM's fake reference, a logger writing nowhere.

// Hatchery is the name of the hatchery under test: the owner written in
// the ownership records of the VMs a test makes.
const Hatchery = "hatch-a"

// Epoch is the fixed instant the unit tests' clocks stand at: a test that
// says "created an hour ago" means Epoch minus an hour.
var Epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// FixedNow is a clock standing at Epoch, for code taking a func() time.Time
// that the test never moves (NewClock(Epoch) for one it moves).
func FixedNow() time.Time { return Epoch }

// VMRef is the fake reference of the VM named name: "vm-" + name, so that
// a test can tell from a reference which VM a call was for.
func VMRef(name string) vctypes.Ref {
	return vctypes.Ref{Type: "VirtualMachine", Value: "vm-" + name}
}

// DiscardLogger is a logger whose lines go nowhere, for the tests that do
// not read them.
func DiscardLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}
