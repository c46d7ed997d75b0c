package demo

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// errSimFatal carries a fatal harness error out of vcsimtest.Start.
type errSimFatal struct{ msg string }

func (e errSimFatal) Error() string { return e.msg }

// simTB lets the demo drive vcsimtest, written for tests, outside a test: it
// implements the part of testing.TB the harness calls (Helper, Cleanup,
// Fatalf). Fatalf panics with errSimFatal, which startSimulator turns into
// an error; Close runs the cleanups in reverse order, as a test would.
// BRIDGE: replaced by a vcsimtest constructor without testing.TB once the
// harness has one.
type simTB struct {
	testing.TB // nil: any other method panics, and none is called

	mu       sync.Mutex
	cleanups []func()
}

func (s *simTB) Helper() {}

func (s *simTB) Cleanup(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanups = append(s.cleanups, f)
}

func (s *simTB) Fatalf(format string, args ...any) {
	panic(errSimFatal{fmt.Sprintf(format, args...)})
}

// Close runs the cleanups, last registered first.
func (s *simTB) Close() {
	s.mu.Lock()
	cs := s.cleanups
	s.cleanups = nil
	s.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
}

// startSimulator starts the in-process vCenter simulator; close stops it.
func startSimulator(o vcsimtest.Options) (env *vcsimtest.Env, closeFn func(), err error) {
	tb := &simTB{}
	defer func() {
		if r := recover(); r != nil {
			var fe errSimFatal
			if e, ok := r.(error); !ok || !errors.As(e, &fe) {
				panic(r)
			}
			tb.Close()
			env, closeFn, err = nil, nil, fmt.Errorf("start vcenter simulator: %w", fe)
		}
	}()
	env = vcsimtest.Start(tb, o)
	return env, tb.Close, nil
}
