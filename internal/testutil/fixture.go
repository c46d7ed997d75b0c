package testutil

import (
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// The fixture kit: what the decision packages' unit tests (admission,
// warmpool, custody, vsphere) each wrote for themselves — the hatchery's
// name, a fixed instant, a VM's fake reference, a logger writing nowhere,
// the call log of a fake port.

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

// CallLog is what a fake port embeds to record the calls made to it, each
// as "verb object" in the order made, and to answer each verb with the
// next error a test queued for it (nil when none is left). Safe for
// concurrent use; the zero value is ready.
type CallLog struct {
	mu    sync.Mutex
	calls []string
	errs  map[string][]error
}

// Call records "verb object" and returns the next error queued for verb.
func (l *CallLog) Call(verb, object string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, verb+" "+object)
	if q := l.errs[verb]; len(q) > 0 {
		l.errs[verb] = q[1:]
		return q[0]
	}
	return nil
}

// Fail queues errs as the next answers of verb, one a call.
func (l *CallLog) Fail(verb string, errs ...error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.errs == nil {
		l.errs = map[string][]error{}
	}
	l.errs[verb] = append(l.errs[verb], errs...)
}

// List returns the calls recorded so far, in order.
func (l *CallLog) List() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}
