package testutil

import (
	"context"
	"testing"
	"time"
)

// A liveness bound is how long a test waits for something that does
// happen, only slower on a loaded machine: a signal (a channel, a status
// line, a metric) rather than a deadline it asserts. Such a wait must not
// fail a test because the machine is slow, so it ends with the test
// binary's own deadline (go test -timeout), a little before it so that
// the test still reports what it was waiting for, instead of at a fixed
// number of seconds sized on an idle machine.

// patienceMargin is how long before the test binary's deadline a liveness
// bound ends, at most: time for the test to report and clean up before
// the binary's deadline kills it without a word.
const patienceMargin = 30 * time.Second

// noDeadlinePatience is the liveness bound of a test binary run without
// a deadline (-timeout 0).
const noDeadlinePatience = time.Hour

// deadliner is what a *testing.T gives: the test binary's deadline.
type deadliner interface{ Deadline() (time.Time, bool) }

// PatienceDeadline is when the liveness bounds of t end: shortly before
// the test binary's deadline (patienceMargin, or a tenth of the time left
// when that is less). t is the test: a *testing.T gives the binary's
// deadline; a t without one (a benchmark, the demo's fixtures, -timeout 0)
// gets an hour.
func PatienceDeadline(t any) time.Time {
	d, ok := t.(deadliner)
	if !ok {
		return time.Now().Add(noDeadlinePatience)
	}
	end, ok := d.Deadline()
	if !ok {
		return time.Now().Add(noDeadlinePatience)
	}
	return end.Add(-min(patienceMargin, time.Until(end)/10))
}

// Patience is the time left to PatienceDeadline: the wait of a
// require.Eventually whose condition does come true, only later on a
// slow machine.
func Patience(t testing.TB) time.Duration {
	return max(time.Until(PatienceDeadline(t)), time.Second)
}

// PatienceContext returns a context that ends at PatienceDeadline (or at
// the test's end): for the requests of a test whose only bound is its
// liveness.
func PatienceContext(t testing.TB) context.Context {
	ctx, cancel := context.WithDeadline(context.Background(), PatienceDeadline(t))
	t.Cleanup(cancel)
	return ctx
}
